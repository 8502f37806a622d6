package approvals

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"
)

// grantPolicy allows grants of up to 10 minutes on call-box.
func grantPolicy(o *Options) {
	o.Policy = Policy{Rules: []Rule{{Target: "run-box", Mode: ModeRun}, {Target: "call-box", Mode: ModeCall, MaxGrant: 10 * time.Minute}}}
}

func TestGrantCoversTheSameActionAndNothingElse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	a := act("call-box", "systemctl restart app")

	q, done := e.authorize(ctx, run.ID, a)
	decided, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, Grant: 5 * time.Minute})
	if err != nil {
		t.Fatalf("Decide with a grant: %v", err)
	}
	if want := e.clock.Now().Add(5 * time.Minute); !decided.GrantUntil.Equal(want) {
		t.Fatalf("GrantUntil = %v, want %v", decided.GrantUntil, want)
	}
	if o := recv(t, done); o.err != nil || o.res.Status != StatusApproved || !o.res.GrantUntil.IsZero() {
		t.Fatalf("the approved action: %+v, %v (the first use is the approval itself, not its grant)", o.res, o.err)
	}

	// The same action again: covered, named by the granting approval.
	q2, done := e.authorize(ctx, run.ID, a)
	if q2.ID != "" {
		t.Fatalf("a repeat inside the grant raised request %s", q2.ID)
	}
	o := recv(t, done)
	if o.err != nil || o.res.Status != StatusApproved || o.res.RequestID != q.ID || o.res.Reviewer != "alice" || !o.res.GrantUntil.Equal(decided.GrantUntil) {
		t.Fatalf("repeat: %+v, %v; want covered by %s", o.res, o.err, q.ID)
	}

	// Variants are not covered: another command, timeout, input, or run.
	variants := map[string]func() (RunID, Action){
		"command": func() (RunID, Action) { b := a; b.Command += " "; return run.ID, b },
		"timeout": func() (RunID, Action) { b := a; b.Timeout = 2 * time.Minute; return run.ID, b },
		"stdin":   func() (RunID, Action) { b := a; b.Stdin = &Stdin{Size: 1}; return run.ID, b },
		"run":     func() (RunID, Action) { r2, _ := e.remoteRun(); return r2.ID, a },
	}
	for name, v := range variants {
		id, b := v()
		cctx, cancel := context.WithCancel(ctx)
		q3, done := e.authorize(cctx, id, b)
		if q3.ID == "" {
			t.Errorf("variant %s: not asked (%+v)", name, recv(t, done))
		}
		cancel()
		recv(t, done)
	}

	// A restart keeps it; past it, a reviewer is asked again.
	e.reopen()
	if q5, done := e.authorize(ctx, run.ID, a); q5.ID != "" || recv(t, done).res.RequestID != q.ID {
		t.Fatal("the grant did not cover a repeat after a restart")
	}
	e.clock.Advance(5*time.Minute + time.Second)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if q4, _ := e.authorize(cctx, run.ID, a); q4.ID == "" {
		t.Fatal("a repeat after the grant ended was not asked")
	}
}

func TestGrantBoundedByPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	for _, c := range []struct {
		name   string
		target string
		d      Decision
	}{
		{"over the bound", "call-box", Decision{Verdict: Approve, Grant: 11 * time.Minute}},
		{"negative", "call-box", Decision{Verdict: Approve, Grant: -time.Minute}},
		{"with a denial", "call-box", Decision{Verdict: Deny, Grant: time.Minute}},
		{"on a run approval", "run-box", Decision{Verdict: Approve, Grant: time.Minute}},
	} {
		cctx, cancel := context.WithCancel(ctx)
		q, done := e.authorize(cctx, run.ID, act(c.target, "uptime"))
		if _, err := e.s.Decide(ctx, rv, q.ID, c.d); !errors.Is(err, ErrGrantNotAllowed) {
			t.Errorf("%s: Decide = %v, want ErrGrantNotAllowed", c.name, err)
		}
		if got, _ := e.s.Request(ctx, q.ID); got.Status != StatusPending {
			t.Errorf("%s: the refused decision changed the request to %s", c.name, got.Status)
		}
		cancel()
		recv(t, done)
	}
	// An account without max_grant allows none.
	e2 := newEnv(t)
	rv2 := e2.reviewer("bob")
	run2, _ := e2.remoteRun()
	q, done := e2.authorize(ctx, run2.ID, act("call-box", "uptime"))
	if _, err := e2.s.Decide(ctx, rv2, q.ID, Decision{Verdict: Approve, Grant: time.Minute}); !errors.Is(err, ErrGrantNotAllowed) {
		t.Fatalf("grant without a policy bound: %v", err)
	}
	if _, err := e2.s.Decide(ctx, rv2, q.ID, Decision{Verdict: Deny}); err != nil {
		t.Fatal(err)
	}
	recv(t, done)
}

func TestGrantDoesNotOutliveItsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	a := act("call-box", "uptime")
	e.grant(rv, run.ID, a, 10*time.Minute)
	if err := e.s.Revoke(ctx, rv, run.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	_, done := e.authorize(ctx, run.ID, a)
	if o := recv(t, done); o.err == nil {
		t.Fatalf("a grant let an action of an ended run through: %+v", o.res)
	}
}

func TestQuotaPerRunAndRollingWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run, _ := e.remoteRun()
	other, _ := e.remoteRun()
	perRun := Quota{PerRun: 3}
	for i := range 3 {
		if err := e.s.TakeQuota(ctx, run.ID, "box", "deploy", perRun); err != nil {
			t.Fatalf("action %d: %v", i+1, err)
		}
	}
	var qe *QuotaError
	if err := e.s.TakeQuota(ctx, run.ID, "box", "deploy", perRun); !errors.As(err, &qe) || qe.Of != "run" || qe.Limit != 3 {
		t.Fatalf("4th action of the run: %v, want the run's quota", err)
	}
	if err := e.s.TakeQuota(ctx, run.ID, "box", "other", perRun); err != nil {
		t.Fatalf("another account of the same run: %v", err)
	}
	if err := e.s.TakeQuota(ctx, other.ID, "box", "deploy", perRun); err != nil {
		t.Fatalf("another run: %v", err)
	}

	// The window counts every run's actions on the account, survives a
	// restart, and frees places as it rolls on.
	win := Quota{PerWindow: 5, Window: time.Hour}
	// 4 counted on box/deploy so far: 3 of run, 1 of other (the refused
	// one did not count).
	if err := e.s.TakeQuota(ctx, other.ID, "box", "deploy", win); err != nil {
		t.Fatalf("5th in the window: %v", err)
	}
	e.reopen()
	if err := e.s.TakeQuota(ctx, other.ID, "box", "deploy", win); !errors.As(err, &qe) || qe.Of != "window" {
		t.Fatalf("6th in the window after a restart: %v, want the window's quota", err)
	}
	if want := e.clock.Now().Add(time.Hour); !qe.Next.Equal(want) {
		t.Errorf("Next = %v, want %v", qe.Next, want)
	}
	e.clock.Advance(time.Hour + time.Second)
	if err := e.s.TakeQuota(ctx, other.ID, "box", "deploy", win); err != nil {
		t.Fatalf("after the window rolled on: %v", err)
	}
}

func TestUnreviewedNeedsAUsableRunAndStaysInItsLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	a := act("call-box", "uptime")
	a.Unreviewed = true
	res, err := e.s.Authorize(ctx, run.ID, a, func(Request) { t.Error("a reviewer was asked") })
	if err != nil || res.Status != StatusApproved || !res.Unreviewed || res.RequestID != "" {
		t.Fatalf("unreviewed: %+v, %v", res, err)
	}
	// Redacted or escalated: a reviewer is asked all the same.
	for _, b := range []Action{{Escalation: "policy"}, {Redactions: []Redaction{{Rule: "x", Length: 1}}}} {
		b.Target, b.Account, b.Command, b.Timeout, b.Unreviewed = a.Target, a.Account, a.Command, a.Timeout, true
		cctx, cancel := context.WithCancel(ctx)
		if q, _ := e.authorize(cctx, run.ID, b); q.ID == "" {
			t.Errorf("%+v passed unreviewed", b)
		}
		cancel()
	}
	if err := e.s.Revoke(ctx, rv, run.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Authorize(ctx, run.ID, a, nil); err == nil {
		t.Fatal("an ended run's unreviewed action passed")
	}
	// An agent limited to run-box gets nothing unreviewed on call-box,
	// and an approved run's scope holds as well.
	ag, tok, err := e.s.AddAgent(ctx, "ci-bot", []Scope{{Target: "run-box"}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ag, err = e.s.VerifyAgent(ctx, tok); err != nil {
		t.Fatal(err)
	}
	limited, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: ag.Subject(), Agent: &ag})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Authorize(ctx, limited.ID, a, nil); !errors.Is(err, ErrOutOfScope) {
		t.Errorf("unreviewed outside the agent's limits: %v", err)
	}
	scoped, _ := e.remoteRun()
	q, done := e.authorize(ctx, scoped.ID, act("run-box", "ls"))
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, Scope: []Scope{{Target: "run-box"}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, done)
	other := act("other-box", "uptime")
	other.Unreviewed = true
	if _, err := e.s.Authorize(ctx, scoped.ID, other, nil); !errors.Is(err, ErrOutOfScope) {
		t.Errorf("unreviewed outside the approved run's scope: %v", err)
	}
}

func TestGrantShrinksWithThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	a := act("call-box", "uptime")
	q := e.grant(rv, run.ID, a, 10*time.Minute)
	e.clock.Advance(3 * time.Minute)
	// max_grant lowered to 5m: the grant ends 5m after the decision.
	e.s.SetPolicy(Policy{Rules: []Rule{{Target: "call-box", Mode: ModeCall, MaxGrant: 5 * time.Minute}}})
	_, done := e.authorize(ctx, run.ID, a)
	if o := recv(t, done); o.err != nil || !o.res.GrantUntil.Equal(q.RequestedAt.Add(5*time.Minute)) {
		t.Fatalf("covered until %v (%v), want the lowered bound", o.res.GrantUntil, o.err)
	}
	e.clock.Advance(2*time.Minute + time.Second)
	cctx, cancel := context.WithCancel(ctx)
	if q2, _ := e.authorize(cctx, run.ID, a); q2.ID == "" {
		t.Error("covered past the lowered bound")
	}
	cancel()
	// Grants switched off: nothing is covered.
	e.s.SetPolicy(Policy{Rules: []Rule{{Target: "call-box", Mode: ModeCall}}})
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	if q3, _ := e.authorize(cctx, run.ID, a); q3.ID == "" {
		t.Error("covered with grants switched off")
	}
}

// Setting the system clock back does not lengthen a grant, before or
// after a restart.
func TestClockSetBackDoesNotLengthenGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	a := act("call-box", "uptime")
	e.grant(rv, run.ID, a, 5*time.Minute)
	e.clock.Jump(-3 * time.Hour)
	e.clock.Advance(5*time.Minute - time.Second)
	if _, done := e.authorize(ctx, run.ID, a); recv(t, done).res.GrantUntil.IsZero() {
		t.Fatal("not covered within the grant")
	}
	e.clock.Advance(time.Second)
	cctx, cancel := context.WithCancel(ctx)
	if q2, _ := e.authorize(cctx, run.ID, a); q2.ID == "" {
		t.Error("covered past the grant's length after the clock was set back")
	}
	cancel()

	// After a restart: a second grant, the clock set back, then a
	// restart; what remains is bounded by the grant's length.
	run2, _ := e.remoteRun()
	e.grant(rv, run2.ID, a, 5*time.Minute)
	e.clock.Jump(-time.Hour)
	e.reopen()
	e.clock.Advance(5 * time.Minute)
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	if q3, _ := e.authorize(cctx, run2.ID, a); q3.ID == "" {
		t.Error("covered for more than the grant's length after a restart")
	}
}

// grant raises a call request for a in run, approves it with a grant of
// d, and lets the approved action through; it returns the decided
// request.
func (e *env) grant(rv Reviewer, run RunID, a Action, d time.Duration) Request {
	e.t.Helper()
	q, done := e.authorize(context.Background(), run, a)
	decided, err := e.s.Decide(context.Background(), rv, q.ID, Decision{Verdict: Approve, Grant: d})
	if err != nil {
		e.t.Fatal(err)
	}
	recv(e.t, done)
	return decided
}

// A put's request keeps its transfer for reviewers across a restart, and
// its approval covers those bytes only.
func TestTransferRequestRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run, _ := e.remoteRun()
	sum := sha256.Sum256([]byte("port: 8080\n"))
	a := Action{Target: "call-box", Account: "deploy", Command: "put /srv/app/config.yml", Timeout: time.Minute,
		Stdin: &Stdin{Size: 11, SHA256: sum}, Transfer: &Transfer{Direction: "put", Path: "/srv/app/config.yml", Mode: 0o640}}
	q, done := e.authorize(ctx, run.ID, a)
	e.reopen()
	got, err := e.s.Request(ctx, q.ID)
	if err != nil || got.Transfer == nil || *got.Transfer != *a.Transfer || got.Stdin == nil || got.Stdin.SHA256 != sum || got.Digest != DigestOf(run.ID, a) {
		t.Fatalf("the request after a restart: %+v %v", got, err)
	}
	recv(t, done) // the restart ended the wait
	// Other bytes are another digest: that approval does not cover them.
	b := a
	b.Stdin = &Stdin{Size: 11, SHA256: sha256.Sum256([]byte("port: 9090\n"))}
	if DigestOf(run.ID, b) == got.Digest {
		t.Fatal("a swapped payload has the approved digest")
	}
}

// TestSecretActionNeverCoveredButByItsCall: an action that uses a
// gateway-held secret asks a call approval of its own inside an approved
// run, even with Unreviewed set, and a grant on it is refused.
func TestSecretActionNeverCoveredButByItsCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, grantPolicy)
	ctx := context.Background()
	rv := e.reviewer("alice")
	run, _ := e.remoteRun()
	q, done := e.authorize(ctx, run.ID, act("run-box", "true"))
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, done); o.err != nil || o.res.Status != StatusApproved {
		t.Fatalf("the run's first action: %+v %v", o.res, o.err)
	}
	for _, target := range []string{"run-box", "call-box"} {
		a := act(target, "base64")
		a.Secret, a.Unreviewed = "db", true
		q, done := e.authorize(ctx, run.ID, a)
		if q.ID == "" || q.Kind != KindCall || q.Secret != "db" {
			t.Fatalf("%s: not asked on its own: %+v %+v", target, q, recv(t, done))
		}
		if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, Grant: time.Minute}); !errors.Is(err, ErrGrantNotAllowed) {
			t.Fatalf("%s: a grant on a secret's action: %v", target, err)
		}
		if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
			t.Fatal(err)
		}
		if o := recv(t, done); o.err != nil || o.res.Status != StatusApproved || o.res.Mode != ModeCall || o.res.Unreviewed {
			t.Fatalf("%s: approved: %+v %v", target, o.res, o.err)
		}
	}
}
