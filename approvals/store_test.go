package approvals

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRunModeOneRequestThenPass(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()

	q, first := e.authorize(ctx, run.ID, act("run-box", "uptime"))
	if q.Kind != KindRun {
		t.Fatalf("request kind = %v, want run", q.Kind)
	}
	// A second action while the run is pending joins the same request.
	q2, second := e.authorize(ctx, run.ID, act("run-box", "df -h"))
	if q2.ID != q.ID {
		t.Fatalf("second action raised %s, want to join %s", q2.ID, q.ID)
	}
	pending, err := e.s.Pending(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("Pending = %d requests, %v; want 1", len(pending), err)
	}
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	for _, ch := range []<-chan outcome{first, second} {
		o := recv(t, ch)
		want := Result{Status: StatusApproved, Mode: ModeRun, RequestID: q.ID, Reviewer: "rita"}
		if o.err != nil || !cmp.Equal(o.res, want) {
			t.Fatalf("Authorize = %+v, %v; want %+v", o.res, o.err, want)
		}
	}
	// Later actions pass without a request.
	res, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), func(Request) { t.Error("asked again in an approved run") })
	if err != nil || res.Status != StatusApproved {
		t.Fatalf("Authorize after approval = %+v, %v", res, err)
	}
	got, _ := e.s.Run(ctx, run.ID)
	if got.State != RunApproved || got.Actions != 3 || !got.ExpiresAt.Equal(e.clock.Now().Add(DefaultRunTTL)) {
		t.Errorf("run = state %v actions %d expires %v", got.State, got.Actions, got.ExpiresAt)
	}
	want := []string{"run.created", "approval.requested", "approval.decided", "run.approved"}
	if diff := cmp.Diff(want, e.sink.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestCallModeAsksEveryTimeEvenInApprovedRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, act("run-box", "uptime"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
	recv(t, ch)

	var ids []RequestID
	for _, cmd := range []string{"reboot", "reboot"} {
		a := act("call-box", cmd)
		q, ch := e.authorize(ctx, run.ID, a)
		if q.Kind != KindCall || q.Digest != DigestOf(run.ID, a) {
			t.Fatalf("request = kind %v digest %v; want a call request bound to the action", q.Kind, q.Digest)
		}
		ids = append(ids, q.ID)
		if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
			t.Fatal(err)
		}
		o := recv(t, ch)
		if o.err != nil || o.res.Status != StatusApproved || o.res.Mode != ModeCall || o.res.Digest != q.Digest {
			t.Fatalf("Authorize = %+v, %v", o.res, o.err)
		}
	}
	if ids[0] == ids[1] {
		t.Errorf("the same command twice reused request %s; each call needs its own", ids[0])
	}
	// The approval was used: deciding it again is refused.
	if _, err := e.s.Decide(ctx, rv, ids[0], Decision{Verdict: Approve}); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("second decision: err = %v, want ErrAlreadyDecided", err)
	}
}

func TestDenied(t *testing.T) {
	for _, target := range []string{"run-box", "call-box"} {
		t.Run(target, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rv := e.reviewer("rita")
			run, _ := e.remoteRun()
			q, ch := e.authorize(ctx, run.ID, act(target, "rm -rf /srv"))
			if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny, Reason: "no"}); err != nil {
				t.Fatal(err)
			}
			o := recv(t, ch)
			want := Result{Status: StatusDenied, Mode: q.Kind.mode(), RequestID: q.ID, Reviewer: "rita", Reason: "no"}
			if q.Kind == KindCall {
				want.Digest = q.Digest
			}
			if o.err != nil || !cmp.Equal(o.res, want) {
				t.Fatalf("Authorize = %+v, %v; want %+v", o.res, o.err, want)
			}
			if target == "run-box" {
				_, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil)
				if !errors.Is(err, ErrRunDenied) {
					t.Errorf("next action in denied run: err = %v, want ErrRunDenied", err)
				}
			}
		})
	}
}

func (k Kind) mode() Mode {
	if k == KindRun {
		return ModeRun
	}
	return ModeCall
}

func TestExpiryByTimerWakesWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run, _ := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.clock.Advance(DefaultApprovalTimeout)
	o := recv(t, ch)
	if o.err != nil || o.res.Status != StatusExpired || o.res.RequestID != q.ID {
		t.Fatalf("Authorize = %+v, %v; want expired", o.res, o.err)
	}
	// The run stays pending; the next action asks again.
	q2, ch2 := e.authorize(ctx, run.ID, act("run-box", "ls"))
	if q2.ID == "" || q2.ID == q.ID {
		t.Fatalf("next action: request %q, want a new one", q2.ID)
	}
	e.clock.Advance(DefaultApprovalTimeout)
	recv(t, ch2)
	want := []string{"run.created", "approval.requested", "approval.decided", "approval.requested", "approval.decided"}
	if diff := cmp.Diff(want, e.sink.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRunTTLEdges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     *time.Duration
		after   time.Duration
		wantErr error
	}{
		{"default ttl, just before", nil, DefaultRunTTL - time.Nanosecond, nil},
		{"default ttl, at expiry", nil, DefaultRunTTL, ErrRunExpired},
		{"short ttl, just before", ttl(time.Minute), time.Minute - time.Nanosecond, nil},
		{"short ttl, at expiry", ttl(time.Minute), time.Minute, ErrRunExpired},
		{"max ttl, just before", ttl(DefaultMaxRunTTL), DefaultMaxRunTTL - 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rv := e.reviewer("rita")
			run, _ := e.remoteRun()
			q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
			if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, TTL: tc.ttl}); err != nil {
				t.Fatal(err)
			}
			recv(t, ch)
			e.clock.Advance(tc.after)
			_, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Authorize: err = %v, want %v", err, tc.wantErr)
			}
			got, _ := e.s.Run(ctx, run.ID)
			if tc.wantErr != nil && (got.State != RunExpired || got.EndReason != EndTTL) {
				t.Errorf("run state %v reason %v, want expired ttl", got.State, got.EndReason)
			}
		})
	}
}

func TestTokenExpiryEdges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, tok, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "agent", TTL: ttl(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour - time.Nanosecond)
	if got, err := e.s.ResolveRemote(ctx, tok); err != nil || got.ID != r.ID {
		t.Fatalf("ResolveRemote before expiry = %v, %v", got.ID, err)
	}
	e.clock.Advance(time.Nanosecond)
	if _, err := e.s.ResolveRemote(ctx, tok); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("ResolveRemote at expiry: err = %v, want ErrTokenExpired", err)
	}
	got, _ := e.s.Run(ctx, r.ID)
	if got.State != RunExpired || got.EndReason != EndTokenExpired {
		t.Errorf("run = %v %v, want expired token_expired", got.State, got.EndReason)
	}
}

func TestMaxActionsAndScope(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Policy.Rules = append(o.Policy.Rules, Rule{Target: "other-box", Mode: ModeRun})
	})
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	_, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, MaxActions: 3, Scope: []Scope{{Target: "run-box"}}})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ch) // action 1
	if _, err := e.s.Authorize(ctx, run.ID, act("other-box", "ls"), nil); !errors.Is(err, ErrOutOfScope) {
		t.Errorf("out of scope: err = %v, want ErrOutOfScope", err)
	}
	for i := 2; i <= 3; i++ {
		if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); err != nil {
			t.Fatalf("action %d: %v", i, err)
		}
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunExpired) {
		t.Errorf("action 4 of 3: err = %v, want ErrRunExpired", err)
	}
	got, _ := e.s.Run(ctx, run.ID)
	if got.State != RunExpired || got.EndReason != EndMaxActions || got.Actions != 3 {
		t.Errorf("run = %v %v actions %d", got.State, got.EndReason, got.Actions)
	}
}

func TestRevoke(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, tok := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
	recv(t, ch)

	// A call waiting in the run when it is revoked is told the run ended.
	_, waiting := e.authorize(ctx, run.ID, act("call-box", "ls"))
	if err := e.s.Revoke(ctx, rv, run.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, waiting); !errors.Is(o.err, ErrRunEnded) {
		t.Errorf("waiting call after revoke: %+v, %v; want ErrRunEnded", o.res, o.err)
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunEnded) {
		t.Errorf("next action after revoke: err = %v, want ErrRunEnded", err)
	}
	// A revoked run's token reads nothing, not even the run's name.
	if got, err := e.s.ResolveRemote(ctx, tok); !errors.Is(err, ErrRunEnded) || got.ID != "" {
		t.Errorf("resolve after revoke: run %q err = %v, want no run and ErrRunEnded", got.ID, err)
	}
	got, _ := e.s.Run(ctx, run.ID)
	if got.EndReason != EndRevoked || got.EndedBy != "rita" || got.EndNote != "enough" {
		t.Errorf("run end = %v by %q note %q", got.EndReason, got.EndedBy, got.EndNote)
	}
	if err := e.s.Revoke(ctx, Reviewer{}, run.ID, ""); !errors.Is(err, ErrNotReviewer) {
		t.Errorf("revoke by zero reviewer: err = %v, want ErrNotReviewer", err)
	}
}

func TestCtxCancelLeavesNoWaiter(t *testing.T) {
	e := newEnv(t)
	run, _ := e.remoteRun()
	ctx, cancel := context.WithCancel(context.Background())
	_, ch := e.authorize(ctx, run.ID, act("call-box", "ls"))
	cancel()
	if o := recv(t, ch); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", o.err)
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	e := newEnv(t)
	run, _ := e.remoteRun()
	_, ch := e.authorize(context.Background(), run.ID, act("run-box", "ls"))
	e.s.Close()
	if o := recv(t, ch); !errors.Is(o.err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", o.err)
	}
}

// TestBadInput: every bad input is its own error and changes nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rita := e.reviewer("rita")
	self := e.reviewer("agent") // the remote runs' requester
	disabled := e.reviewer("dora")
	e.s.Accounts().SetEnabled(ctx, "dora", false, "test")
	other := newEnv(t).reviewer("rita") // a reviewer of another store

	run, tok := e.remoteRun()
	ended, _ := e.remoteRun()
	e.s.EndRun(ctx, ended.ID)
	runReq, runCh := e.authorize(ctx, run.ID, act("run-box", "ls"))
	callReq, callCh := e.authorize(ctx, run.ID, act("call-box", "ls"))
	decided, decidedCh := e.authorize(ctx, run.ID, act("call-box", "id"))
	e.s.Decide(ctx, rita, decided.ID, Decision{Verdict: Deny})
	recv(t, decidedCh)

	wrong := []byte(tok.Reveal()) // same length, same shape, other secret
	if i := len(runTokenPrefix) + idHexLen + 1; wrong[i] == 'A' {
		wrong[i] = 'B'
	} else {
		wrong[i] = 'A'
	}
	unknownRunTok := runTokenPrefix + "00000000000000000000000000000000" + tok.Reveal()[len(runTokenPrefix)+idHexLen:]

	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"unknown run", func() error {
			_, err := e.s.Authorize(ctx, "run_00000000000000000000000000000000", act("run-box", "ls"), nil)
			return err
		}, ErrUnknownRun},
		{"ended run", func() error { _, err := e.s.Authorize(ctx, ended.ID, act("run-box", "ls"), nil); return err }, ErrRunEnded},
		{"empty command", func() error { _, err := e.s.Authorize(ctx, run.ID, act("run-box", ""), nil); return err }, ErrBadAction},
		{"zero timeout", func() error {
			_, err := e.s.Authorize(ctx, run.ID, Action{Target: "run-box", Account: "a", Command: "ls"}, nil)
			return err
		}, ErrBadAction},
		{"malformed token", func() error { _, err := e.s.ResolveRemote(ctx, NewSecret("hunter2")); return err }, ErrMalformedToken},
		{"wrong token of right length", func() error { _, err := e.s.ResolveRemote(ctx, NewSecret(string(wrong))); return err }, ErrWrongToken},
		{"token of unknown run", func() error { _, err := e.s.ResolveRemote(ctx, NewSecret(unknownRunTok)); return err }, ErrUnknownRun},
		{"unknown request", func() error {
			_, err := e.s.Decide(ctx, rita, "apr_00000000000000000000000000000000", Decision{Verdict: Approve})
			return err
		}, ErrUnknownRequest},
		{"already decided", func() error { _, err := e.s.Decide(ctx, rita, decided.ID, Decision{Verdict: Approve}); return err }, ErrAlreadyDecided},
		{"ttl over cap", func() error {
			_, err := e.s.Decide(ctx, rita, runReq.ID, Decision{Verdict: Approve, TTL: ttl(DefaultMaxRunTTL + 1)})
			return err
		}, ErrTTLOverCap},
		{"zero ttl", func() error {
			_, err := e.s.Decide(ctx, rita, runReq.ID, Decision{Verdict: Approve, TTL: ttl(0)})
			return err
		}, ErrBadTTL},
		{"negative ttl", func() error {
			_, err := e.s.Decide(ctx, rita, runReq.ID, Decision{Verdict: Approve, TTL: ttl(-time.Second)})
			return err
		}, ErrBadTTL},
		{"ttl on a call", func() error {
			_, err := e.s.Decide(ctx, rita, callReq.ID, Decision{Verdict: Approve, TTL: ttl(time.Minute)})
			return err
		}, ErrTTLForCall},
		{"action budget on a call", func() error {
			_, err := e.s.Decide(ctx, rita, callReq.ID, Decision{Verdict: Approve, MaxActions: 1})
			return err
		}, ErrTTLForCall},
		{"negative max actions", func() error {
			_, err := e.s.Decide(ctx, rita, runReq.ID, Decision{Verdict: Approve, MaxActions: -1})
			return err
		}, ErrBadScope},
		{"unknown verdict", func() error { _, err := e.s.Decide(ctx, rita, runReq.ID, Decision{Verdict: 9}); return err }, ErrUnknownValue},
		{"zero reviewer", func() error { _, err := e.s.Decide(ctx, Reviewer{}, runReq.ID, Decision{Verdict: Approve}); return err }, ErrNotReviewer},
		{"reviewer of another store", func() error { _, err := e.s.Decide(ctx, other, runReq.ID, Decision{Verdict: Approve}); return err }, ErrNotReviewer},
		{"disabled reviewer", func() error { _, err := e.s.Decide(ctx, disabled, runReq.ID, Decision{Verdict: Approve}); return err }, ErrNotReviewer},
		{"requester decides its own run", func() error { _, err := e.s.Decide(ctx, self, runReq.ID, Decision{Verdict: Approve}); return err }, ErrSelfApproval},
		{"requester decides its own call", func() error { _, err := e.s.Decide(ctx, self, callReq.ID, Decision{Verdict: Approve}); return err }, ErrSelfApproval},
		{"remote ttl over cap", func() error {
			_, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "a", TTL: ttl(DefaultMaxRunTTL + 1)})
			return err
		}, ErrTTLOverCap},
		{"remote zero ttl", func() error { _, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "a", TTL: ttl(0)}); return err }, ErrBadTTL},
		{"end an ended run", func() error { return e.s.EndRun(ctx, ended.ID) }, ErrRunEnded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e)
			err := tc.do()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(before, snapshot(t, e), cmp.AllowUnexported(Run{})); diff != "" {
				t.Errorf("state changed (-before +after):\n%s", diff)
			}
		})
	}
	// Both requests are still pending and decidable by a proper reviewer.
	for _, q := range []Request{runReq, callReq} {
		if _, err := e.s.Decide(ctx, rita, q.ID, Decision{Verdict: Approve}); err != nil {
			t.Errorf("Decide(%s) after the bad inputs: %v", q.Kind, err)
		}
	}
	recv(t, runCh)
	recv(t, callCh)
}

// TestErrorsDistinct: no sentinel matches another.
func TestErrorsDistinct(t *testing.T) {
	all := []error{ErrUnknownRun, ErrRunEnded, ErrRunExpired, ErrRunDenied, ErrOutOfScope,
		ErrMalformedToken, ErrWrongToken, ErrTokenExpired, ErrUnknownRequest, ErrAlreadyDecided,
		ErrRequestExpired, ErrDigestMismatch, ErrBadTTL, ErrTTLOverCap, ErrTTLForCall, ErrBadScope, ErrBadAction,
		ErrNotReviewer, ErrSelfApproval, ErrBadCredentials, ErrReviewerExists, ErrUnknownReviewer,
		ErrBadReviewerName, ErrWeakPassword, ErrNoProcess, ErrPeerMismatch, ErrNoAnchor,
		ErrNotAncestor, ErrEventNotRecorded, ErrClosed, ErrUnknownValue}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
}

type stateSnapshot struct {
	Runs     []Run
	Pending  []Request
	Events   int
	Requests int
}

func snapshot(t *testing.T, e *env) stateSnapshot {
	t.Helper()
	ctx := context.Background()
	runs, err := e.s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := e.s.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	e.s.mu.Lock()
	e.s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM requests").Scan(&n)
	e.s.mu.Unlock()
	return stateSnapshot{Runs: runs, Pending: pending, Events: e.sink.count(), Requests: n}
}

func TestEventFailureChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()

	e.sink.setFail(errSinkDown)
	if _, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "agent"}); !errors.Is(err, ErrEventNotRecorded) || !errors.Is(err, errSinkDown) {
		t.Errorf("CreateRemote with the sink down: err = %v", err)
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("call-box", "ls"), nil); !errors.Is(err, ErrEventNotRecorded) {
		t.Errorf("Authorize with the sink down: err = %v", err)
	}
	if p, _ := e.s.Pending(ctx); len(p) != 0 {
		t.Errorf("a request whose event failed is pending: %+v", p)
	}
	e.sink.setFail(nil)

	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.sink.setFail(errSinkDown)
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrEventNotRecorded) {
		t.Fatalf("Decide with the sink down: err = %v", err)
	}
	if got, _ := e.s.Run(ctx, run.ID); got.State != RunPending {
		t.Errorf("run state %v after an unrecorded approval, want pending", got.State)
	}
	if err := e.s.EndRun(ctx, run.ID); !errors.Is(err, ErrEventNotRecorded) {
		t.Errorf("EndRun with the sink down: err = %v", err)
	}
	// Expiry cannot be refused: the waiter is told at once, the record is
	// retried until the sink takes it.
	e.clock.Advance(DefaultApprovalTimeout)
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrRequestExpired) {
		t.Errorf("Decide after the deadline: err = %v, want ErrRequestExpired", err)
	}
	e.sink.setFail(nil)
	e.clock.Advance(retryInterval)
	if o := recv(t, ch); o.res.Status != StatusExpired {
		t.Errorf("waiter: %+v %v, want expired", o.res, o.err)
	}
	if got, _ := e.s.Request(ctx, q.ID); got.Status != StatusExpired {
		t.Errorf("request status %v, want expired", got.Status)
	}
}

func TestPolicyModeFor(t *testing.T) {
	p := Policy{Rules: []Rule{
		{Target: "web", Account: "deploy", Mode: ModeRun},
		{Target: "web", Account: "root", Mode: ModeCall},
		{Target: "db", Mode: ModeRun},
		{Target: "db", Account: "postgres", Mode: ModeCall},
		{Target: "*", Account: "admin", Mode: ModeCall},
		{Target: "both", Account: "x", Mode: ModeRun},
		{Target: "both", Account: "x", Mode: ModeCall},
		{Target: "runonly", Mode: ModeRun},
		{Target: "runonly", Account: "x", Mode: ModeRun},
	}}
	for _, tc := range []struct {
		name, target, account string
		want                  Mode
	}{
		{"account rule run", "web", "deploy", ModeRun},
		{"account rule call", "web", "root", ModeCall},
		{"target rule", "db", "app", ModeRun},
		{"account call beats target run", "db", "postgres", ModeCall},
		{"wildcard call beats target run", "db", "admin", ModeCall},
		{"two rules on one account: call wins", "both", "x", ModeCall},
		{"run and run stay run", "runonly", "x", ModeRun},
		{"no rule: call", "web", "nobody", ModeCall},
		{"unknown target: call", "elsewhere", "deploy", ModeCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.ModeFor(tc.target, tc.account); got != tc.want {
				t.Errorf("ModeFor(%q, %q) = %v, want %v", tc.target, tc.account, got, tc.want)
			}
		})
	}
	if got := (Policy{}).ModeFor("a", "b"); got != ModeCall {
		t.Errorf("empty policy: %v, want call", got)
	}
	if err := (Policy{Rules: []Rule{{Target: "a"}}}).validate(); !errors.Is(err, ErrUnknownValue) {
		t.Errorf("rule without mode: err = %v, want ErrUnknownValue", err)
	}
}

// TestPolicyThroughAuthorize: the mode chosen decides what Authorize does.
func TestPolicyThroughAuthorize(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Policy = Policy{Rules: []Rule{{Target: "mixed", Mode: ModeRun}, {Target: "mixed", Account: "root", Mode: ModeCall}}}
	})
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, Action{Target: "mixed", Account: "deploy", Command: "ls", Timeout: time.Second})
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
	recv(t, ch)
	q, ch = e.authorize(ctx, run.ID, Action{Target: "mixed", Account: "root", Command: "ls", Timeout: time.Second})
	if q.Kind != KindCall {
		t.Fatalf("root on mixed: request %+v, want a call request", q)
	}
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny})
	recv(t, ch)
}

// TestManyWaiters: 1,000 actions of one pending run wait on one request;
// one decision releases them all.
func TestManyWaiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	const n = 1000
	var (
		wg      sync.WaitGroup
		asked   = make(chan RequestID, n)
		results = make(chan outcome, n)
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), func(q Request) { asked <- q.ID })
			results <- outcome{res, err}
		}()
	}
	first := <-asked
	for range n - 1 {
		if id := <-asked; id != first {
			t.Fatalf("waiters on %s and %s; want one request", first, id)
		}
	}
	if _, err := e.s.Decide(ctx, rv, first, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for o := range results {
		if o.err != nil || o.res.Status != StatusApproved {
			t.Fatalf("waiter: %+v, %v", o.res, o.err)
		}
	}
	if got, _ := e.s.Run(ctx, run.ID); got.Actions != n {
		t.Errorf("actions = %d, want %d", got.Actions, n)
	}
}

// TestDecisionsRaceExpiry: decisions arriving around the deadline either
// count (and the waiter is approved) or are refused as expired (and the
// waiter sees expired) — never both, never neither.
func TestDecisionsRaceExpiry(t *testing.T) {
	const n = 100
	e := newEnv(t, func(o *Options) { o.MaxPendingPerRun, o.MaxPendingPerRequester = n, n })
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.remoteRun()
	reqs := make([]Request, n)
	chans := make([]<-chan outcome, n)
	for i := range n {
		reqs[i], chans[i] = e.authorize(ctx, run.ID, act("call-box", "ls"))
	}
	e.clock.Advance(DefaultApprovalTimeout - time.Millisecond)
	decided := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, decided[i] = e.s.Decide(ctx, rv, reqs[i].ID, Decision{Verdict: Approve})
		}()
	}
	e.clock.Advance(time.Millisecond)
	wg.Wait()
	for i := range n {
		o := recv(t, chans[i])
		stored, _ := e.s.Request(ctx, reqs[i].ID)
		switch {
		case decided[i] == nil:
			if o.res.Status != StatusApproved || stored.Status != StatusApproved || stored.ConsumedAt.IsZero() {
				t.Errorf("request %d: decision counted but waiter %v, stored %v", i, o.res.Status, stored.Status)
			}
		case errors.Is(decided[i], ErrRequestExpired), errors.Is(decided[i], ErrAlreadyDecided):
			if o.res.Status != StatusExpired || stored.Status != StatusExpired {
				t.Errorf("request %d: decision refused but waiter %v, stored %v", i, o.res.Status, stored.Status)
			}
		default:
			t.Errorf("request %d: Decide: %v", i, decided[i])
		}
	}
}
