package approvals

import (
	"context"
	"errors"
	"testing"
	"time"
)

// approveFirst raises run id's first run request with an action on
// run-box, approves it with ttl and returns once the action passed.
func (e *env) approveFirst(rv Reviewer, id RunID, d Decision) {
	e.t.Helper()
	ctx := context.Background()
	q, ch := e.authorize(ctx, id, act("run-box", "ls"))
	if q.ID == "" {
		e.t.Fatalf("no run request raised: %+v", recv(e.t, ch))
	}
	if _, err := e.s.Decide(ctx, rv, q.ID, d); err != nil {
		e.t.Fatal(err)
	}
	if o := recv(e.t, ch); o.err != nil || o.res.Status != StatusApproved {
		e.t.Fatalf("first action: %+v, %v", o.res, o.err)
	}
}

// localAgent starts an agent process (pid 30, node) under sshd and its
// helper (pid 60) and returns the helper's peer.
func (e *env) localAgent() Peer {
	e.procs.add(10, 1, 10, "sshd", 0)
	e.procs.add(30, 10, 30, "node", 1000)
	e.procs.add(60, 30, 60, "airlock-ssh", 1000)
	return Peer{PID: 60, UID: 1000}
}

// TestRenewRemote: a remote run whose TTL passed is renewed for the same
// token at its agent's next action: a new pending run names the run it
// renews, so does its run request, and once approved the same token acts
// in it with a fresh TTL. A denied renewal stays denied.
func TestRenewRemote(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	first, tok := e.remoteRun()
	e.approveFirst(rv, first.ID, Decision{Verdict: Approve, TTL: ttl(time.Minute)})
	e.clock.Advance(time.Minute)

	// Reading and authenticating the token renews nothing.
	if _, got, err := e.s.CheckRemote(ctx, tok); err != nil || got.ID != first.ID || !got.Renewable() {
		t.Fatalf("CheckRemote past the TTL = %s renewable %v, %v; want the expired run, renewable", got.ID, got.Renewable(), err)
	}
	second, err := e.s.ResolveRemote(ctx, tok)
	if err != nil {
		t.Fatalf("ResolveRemote past the TTL: %v", err)
	}
	if second.ID == first.ID || second.Renews != first.ID || second.State != RunPending || second.Requester != first.Requester {
		t.Fatalf("renewal = %+v; want a new pending run of %q that renews %s", second, first.Requester, first.ID)
	}
	if again, err := e.s.ResolveRemote(ctx, tok); err != nil || again.ID != second.ID {
		t.Fatalf("second resolve = %s, %v; want the same renewal %s (one per run)", again.ID, err, second.ID)
	}
	q, ch := e.authorize(ctx, second.ID, act("run-box", "ls"))
	if q.Kind != KindRun || q.Renews != first.ID {
		t.Fatalf("renewal request = kind %v renews %q; want a run request that renews %s", q.Kind, q.Renews, first.ID)
	}
	pending, err := e.s.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Renews != first.ID {
		t.Fatalf("Pending = %+v, %v; want the renewal request, naming %s", pending, err, first.ID)
	}
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve, TTL: ttl(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch); o.err != nil || o.res.Status != StatusApproved {
		t.Fatalf("action after the renewal: %+v, %v", o.res, o.err)
	}
	if got, err := e.s.ResolveRemote(ctx, tok); err != nil || got.ID != second.ID || got.State != RunApproved {
		t.Fatalf("token after the renewal acts in %s (%v), %v; want %s approved", got.ID, got.State, err, second.ID)
	}

	// The renewal runs out too and is renewed again; this time denied.
	e.clock.Advance(time.Minute)
	third, err := e.s.ResolveRemote(ctx, tok)
	if err != nil || third.Renews != second.ID {
		t.Fatalf("second renewal = %+v, %v; want one that renews %s", third, err, second.ID)
	}
	q, ch = e.authorize(ctx, third.ID, act("run-box", "ls"))
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny, Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch); o.res.Status != StatusDenied {
		t.Fatalf("action of a denied renewal: %+v, %v; want denied", o.res, o.err)
	}
	if _, err := e.s.ResolveRemote(ctx, tok); !errors.Is(err, ErrRunDenied) {
		t.Fatalf("resolve after a denied renewal: %v; want ErrRunDenied (no new request)", err)
	}
	if n := len(e.mustPending(t)); n != 0 {
		t.Errorf("%d requests pending after the denial; want none", n)
	}
}

func (e *env) mustPending(t *testing.T) []Request {
	t.Helper()
	p, err := e.s.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expiredLocal starts a local agent whose run was approved for a minute,
// a minute ago, and returns its helper's peer and that run.
func (e *env) expiredLocal(rv Reviewer) (Peer, Run) {
	e.t.Helper()
	peer := e.localAgent()
	first, err := e.s.ResolveLocal(context.Background(), peer)
	if err != nil {
		e.t.Fatal(err)
	}
	e.approveFirst(rv, first.ID, Decision{Verdict: Approve, TTL: ttl(time.Minute)})
	e.clock.Advance(time.Minute)
	return peer, first
}

// TestRenewLocal: a local anchor's run whose TTL passed is renewed for
// the same anchor process, whose next actions resolve to the renewal; a
// restart keeps the anchor on the renewal.
func TestRenewLocal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	peer, first := e.expiredLocal(rv)
	second, err := e.s.ResolveLocal(ctx, peer)
	if err != nil || second.Renews != first.ID || second.State != RunPending || second.Anchor.ID != first.Anchor.ID {
		t.Fatalf("renewal = %+v, %v; want a pending run of the same anchor that renews %s", second, err, first.ID)
	}
	if got, err := e.s.FindLocal(ctx, peer); err != nil || got.ID != second.ID {
		t.Fatalf("FindLocal = %s, %v; want the renewal %s", got.ID, err, second.ID)
	}
	e.reopen()
	rv = e.reviewer("rita") // a reviewer is the store's that verified it
	if got, err := e.s.ResolveLocal(ctx, peer); err != nil || got.ID != second.ID {
		t.Fatalf("after a restart the anchor's run = %s, %v; want the renewal %s", got.ID, err, second.ID)
	}
	e.approveFirst(rv, second.ID, Decision{Verdict: Approve})
	if got, err := e.s.ResolveLocal(ctx, peer); err != nil || got.ID != second.ID || got.State != RunApproved {
		t.Fatalf("after approval = %s %v, %v", got.ID, got.State, err)
	}
}

// TestWhatNeverRenews: every end but an approval running out is final,
// and so is a run whose agent changed: the agent is refused as before,
// and no run is made.
func TestWhatNeverRenews(t *testing.T) {
	for _, tc := range []struct {
		name string
		// end ends or changes the run after its approval; local says the
		// run is the local agent's.
		end   func(e *env, rv Reviewer, id RunID)
		local bool
		want  error
	}{
		{"revoked by a reviewer", func(e *env, rv Reviewer, id RunID) {
			e.s.Revoke(context.Background(), rv, id, "no more")
		}, false, ErrRunEnded},
		{"closed by its agent", func(e *env, rv Reviewer, id RunID) {
			e.s.EndRun(context.Background(), id)
		}, false, ErrRunEnded},
		{"token expired", func(e *env, rv Reviewer, id RunID) { e.clock.Advance(2 * time.Hour) }, false, ErrTokenExpired},
		{"agent token revoked after the TTL", nil, false, ErrRunExpired},
		{"local, revoked by a reviewer", func(e *env, rv Reviewer, id RunID) {
			e.s.Revoke(context.Background(), rv, id, "no more")
		}, true, ErrRunEnded},
		{"local, anchor now runs another executable", func(e *env, rv Reviewer, id RunID) {
			e.clock.Advance(time.Minute)
			e.procs.mu.Lock()
			p := e.procs.procs[30]
			p.Exe, p.ExeSHA256 = "/usr/bin/python3", "00"
			e.procs.procs[30] = p
			e.procs.mu.Unlock()
		}, true, ErrRunExpired},
		{"local, anchor's executable replaced", func(e *env, rv Reviewer, id RunID) {
			e.clock.Advance(time.Minute)
			e.procs.mu.Lock()
			p := e.procs.procs[30]
			p.ExeSHA256 = "ff"
			e.procs.procs[30] = p
			e.procs.mu.Unlock()
		}, true, ErrRunExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			rv := e.reviewer("rita")
			var resolve func() (Run, error)
			if tc.local {
				peer := e.localAgent()
				resolve = func() (Run, error) { return e.s.ResolveLocal(ctx, peer) }
			} else {
				a, _, err := e.s.AddAgent(ctx, "bot", nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, tok, err := e.s.CreateRemote(ctx, RemoteRun{Requester: a.Subject(), Agent: &a, TTL: ttl(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				resolve = func() (Run, error) { return e.s.ResolveRemote(ctx, tok) }
				if tc.end == nil {
					tc.end = func(e *env, rv Reviewer, id RunID) {
						e.clock.Advance(time.Minute)
						if _, err := e.s.RevokeAgent(ctx, string(a.ID), "ops"); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			run, err := resolve()
			if err != nil {
				t.Fatal(err)
			}
			e.approveFirst(rv, run.ID, Decision{Verdict: Approve, TTL: ttl(time.Minute)})
			tc.end(e, rv, run.ID)
			got, err := resolve()
			if !errors.Is(err, tc.want) {
				t.Errorf("resolve: run %s, err %v; want %v", got.ID, err, tc.want)
			}
			if got.Renews != "" {
				t.Errorf("resolve gave renewal %s of %s; want none", got.ID, got.Renews)
			}
			all, err := e.s.RecentRuns(ctx, 10)
			if err != nil || len(all) != 1 {
				t.Errorf("runs = %d, %v; want only the first", len(all), err)
			}
		})
	}
}

// TestDeadAnchorNeverRenews: after its anchor exited, another process of
// the same user gets a first run of its own, not a renewal.
func TestDeadAnchorNeverRenews(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rv := e.reviewer("rita")
	_, first := e.expiredLocal(rv)
	e.procs.kill(60)
	e.procs.kill(30)
	e.procs.add(31, 10, 31, "node", 1000)
	e.procs.add(61, 31, 61, "airlock-ssh", 1000)
	got, err := e.s.ResolveLocal(ctx, Peer{PID: 61, UID: 1000})
	if err != nil || got.ID == first.ID || got.Renews != "" {
		t.Fatalf("new process's run = %+v, %v; want a first run, no renewal", got, err)
	}
}
