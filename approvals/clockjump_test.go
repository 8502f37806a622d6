package approvals

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Lifetimes are bounded by elapsed time as well as by the wall clock:
// setting the system clock back must not lengthen a run, a request or a
// token (design: a run is bounded in time), and setting it forward may only
// shorten one. The fake clock moves wall and monotonic time separately.

// approvedRun returns a remote run in "run-box" approved for life.
func (e *env) approvedRun(rv Reviewer, life time.Duration) Run {
	e.t.Helper()
	ctx := context.Background()
	run, _ := e.remoteRun()
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, TTL: ttl(life)}); err != nil {
		e.t.Fatalf("Decide: %v", err)
	}
	if o := recv(e.t, ch); o.err != nil || o.res.Status != StatusApproved {
		e.t.Fatalf("Authorize = %+v, %v", o.res, o.err)
	}
	return run
}

func (e *env) wantRunEnded(id RunID, reason EndReason) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.s.Authorize(ctx, id, act("run-box", "ls"), func(Request) { e.t.Error("asked for approval in an ended run") }); !errors.Is(err, ErrRunExpired) {
		e.t.Errorf("Authorize: err = %v, want ErrRunExpired", err)
	}
	got, err := e.s.Run(ctx, id)
	if err != nil || got.State != RunExpired || got.EndReason != reason {
		e.t.Errorf("run = %v %v (%v), want expired %v", got.State, got.EndReason, err, reason)
	}
}

func TestClockSetBackDoesNotLengthenRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := e.approvedRun(e.reviewer("rita"), time.Hour)
	e.clock.Jump(-3 * time.Hour)
	e.clock.Advance(time.Hour - time.Second)
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); err != nil {
		t.Fatalf("Authorize before the hour is up: %v", err)
	}
	// By the wall clock, two hours remain; by elapsed time, none.
	e.clock.Advance(time.Second)
	e.wantRunEnded(run.ID, EndTTL)
}

func TestClockSetForwardEndsRunEarly(t *testing.T) {
	e := newEnv(t)
	run := e.approvedRun(e.reviewer("rita"), time.Hour)
	e.clock.Jump(2 * time.Hour)
	// No timer fired: the next use finds the wall-clock deadline passed.
	e.wantRunEnded(run.ID, EndTTL)
}

func TestClockSetBackDoesNotLengthenRunToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r, tok, err := e.s.CreateRemote(ctx, RemoteRun{Requester: "agent", TTL: ttl(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Minute)
	e.clock.Jump(-24 * time.Hour)
	// Approving the run re-arms its timers; the token keeps its deadline.
	q, ch := e.authorize(ctx, r.ID, act("run-box", "ls"))
	if _, err := e.s.Decide(ctx, e.reviewer("rita"), q.ID, Decision{Verdict: Approve, TTL: ttl(8 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	e.clock.Advance(30*time.Minute - time.Nanosecond)
	if _, err := e.s.ResolveRemote(ctx, tok); err != nil {
		t.Fatalf("ResolveRemote before expiry: %v", err)
	}
	e.clock.Advance(time.Nanosecond)
	if _, err := e.s.ResolveRemote(ctx, tok); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("ResolveRemote after an hour: err = %v, want ErrTokenExpired", err)
	}
	got, _ := e.s.Run(ctx, r.ID)
	if got.State != RunExpired || got.EndReason != EndTokenExpired {
		t.Errorf("run = %v %v, want expired token_expired", got.State, got.EndReason)
	}
}

func TestClockJumpsAndApprovalRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		jump time.Duration
	}{
		{"set back", -time.Hour},
		{"set forward", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			run, _ := e.remoteRun()
			q, ch := e.authorize(ctx, run.ID, act("call-box", "ls"))
			e.clock.Jump(tc.jump)
			if tc.jump > 0 {
				// Forward: by the wall clock the request is already out of
				// time; it is not offered, and a decision is refused.
				if p, _ := e.s.Pending(ctx); len(p) != 0 {
					t.Errorf("Pending after the clock moved past its deadline = %d requests", len(p))
				}
				if _, err := e.s.Decide(ctx, e.reviewer("rita"), q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrRequestExpired) {
					t.Errorf("Decide: err = %v, want ErrRequestExpired", err)
				}
			} else {
				e.clock.Advance(DefaultApprovalTimeout)
				if p, _ := e.s.Pending(ctx); len(p) != 0 {
					t.Errorf("Pending after the timeout = %d requests", len(p))
				}
			}
			if o := recv(t, ch); o.err != nil || o.res.Status != StatusExpired {
				t.Errorf("Authorize = %+v, %v; want expired", o.res, o.err)
			}
		})
	}
}

func TestClockSetBackDoesNotLengthenReviewerToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.reviewer("rita")
	acc := e.s.Accounts()
	tok, err := acc.IssueToken(ctx, "rita", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Jump(-6 * time.Hour)
	e.clock.Advance(time.Hour - time.Second)
	if _, err := acc.VerifyToken(ctx, tok); err != nil {
		t.Fatalf("VerifyToken before the hour is up: %v", err)
	}
	e.clock.Advance(time.Second)
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("VerifyToken after an hour: err = %v, want ErrBadCredentials", err)
	}
	// Nothing brings it back: not another login, not a restart, though
	// its wall-clock deadline is five hours ahead.
	e.reviewer("bob")
	if _, err := acc.IssueToken(ctx, "bob", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("VerifyToken after another login: err = %v, want ErrBadCredentials", err)
	}
	e.reopen()
	if _, err := e.s.Accounts().VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("VerifyToken after a restart: err = %v, want ErrBadCredentials", err)
	}
}

// Elapsed-time deadlines are forgotten with what they bound: a denied run,
// an expired one, a decided request. The map does not grow with the runs.
func TestDeadlinesDoNotAccumulate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	for range 5 {
		run, _ := e.remoteRun()
		q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
		if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny}); err != nil {
			t.Fatal(err)
		}
		recv(t, ch)
	}
	left := func() int {
		e.s.mu.Lock()
		defer e.s.mu.Unlock()
		return len(e.s.deadlines)
	}
	if n := left(); n != 0 {
		t.Errorf("%d elapsed-time deadlines left after 5 denied runs", n)
	}
	e.approvedRun(rv, time.Hour)
	run, _ := e.remoteRun()
	_, ch := e.authorize(ctx, run.ID, act("call-box", "ls"))
	e.clock.Advance(DefaultApprovalTimeout)
	recv(t, ch)
	e.clock.Advance(DefaultMaxRunTTL)
	if n := left(); n != 0 {
		t.Errorf("%d elapsed-time deadlines left after every run ended", n)
	}
}

// A restart forgets elapsed time; only the stored wall-clock deadlines
// remain. If the clock was set back while the gateway was down, a
// lifetime resumes with at most its whole length, not with the extra time.
func TestClockSetBackAcrossRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	run := e.approvedRun(e.reviewer("rita"), time.Hour)
	tok, err := e.s.Accounts().IssueToken(ctx, "rita", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Jump(-24 * time.Hour) // while the gateway is down
	e.open()
	e.clock.Advance(time.Hour - time.Second)
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); err != nil {
		t.Fatalf("Authorize within an hour of the restart: %v", err)
	}
	if _, err := e.s.Accounts().VerifyToken(ctx, tok); err != nil {
		t.Fatalf("VerifyToken within an hour of the restart: %v", err)
	}
	e.clock.Advance(time.Second)
	e.wantRunEnded(run.ID, EndTTL)
	if _, err := e.s.Accounts().VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("VerifyToken an hour after the restart: err = %v, want ErrBadCredentials", err)
	}
}
