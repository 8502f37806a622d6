package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// A fake process table:
//
//	1 systemd ─ 10 sshd ─ 20 bash ─ 30 node (agent) ─ 40 bash ─ 50 timeout ─ 60 airlock-ssh
//	                                                  └ 41 bash ─ 61 airlock-ssh
//	          └ 11 node (second agent) ─ 62 airlock-ssh
func agentTree(fi *fakeInspector) {
	fi.add(10, 1, 10, "sshd", 0)
	fi.add(20, 10, 20, "bash", 1000)
	fi.add(30, 20, 30, "node", 1000)
	fi.add(40, 30, 40, "bash", 1000)
	fi.add(41, 30, 41, "bash", 1000)
	fi.add(50, 40, 50, "timeout", 1000)
	fi.add(60, 50, 60, "airlock-ssh", 1000)
	fi.add(61, 41, 61, "airlock-ssh", 1000)
	fi.add(11, 1, 11, "node", 1000)
	fi.add(62, 11, 62, "airlock-ssh", 1000)
}

// Wrappers that only change how a tool runs (time, ionice, chrt, flock,
// taskset, nice, stdbuf) are not the agent: the walk goes past them.
func TestTransparentWrappersDoNotAnchor(t *testing.T) {
	e := newEnv(t)
	e.procs.add(10, 1, 10, "sshd", 0)
	e.procs.add(30, 10, 30, "node", 1000)
	pid := 30
	for i, w := range []string{"bash", "time", "ionice", "chrt", "flock", "taskset", "nice", "stdbuf"} {
		e.procs.add(100+i, pid, uint64(100+i), w, 1000)
		pid = 100 + i
	}
	e.procs.add(200, pid, 200, "airlock-ssh", 1000)
	r, err := e.s.ResolveLocal(context.Background(), Peer{PID: 200, UID: 1000})
	if err != nil || r.Anchor.ID.PID != 30 {
		t.Fatalf("anchor %v, %v; want the agent, node 30", r.Anchor, err)
	}
}

func TestLocalAnchorChoice(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	ctx := context.Background()
	r1, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Anchor.ID != (ProcessID{30, 30}) || r1.Requester != "user1000" || r1.Explicit {
		t.Errorf("anchor %v requester %q explicit %v; want node 30", r1.Anchor.ID, r1.Requester, r1.Explicit)
	}
	wantChain := []int{20, 10, 1}
	var gotChain []int
	for _, p := range r1.Anchor.Chain {
		gotChain = append(gotChain, p.ID.PID)
	}
	if diff := cmp.Diff(wantChain, gotChain); diff != "" {
		t.Errorf("anchor chain (-want +got):\n%s", diff)
	}
	// Another tool call of the same agent, through another shell: same run.
	r2, err := e.s.ResolveLocal(ctx, Peer{PID: 61, UID: 1000})
	if err != nil || r2.ID != r1.ID {
		t.Errorf("second shell of the same agent: run %s, %v; want %s", r2.ID, err, r1.ID)
	}
	// A second agent process is another run.
	r3, err := e.s.ResolveLocal(ctx, Peer{PID: 62, UID: 1000})
	if err != nil || r3.ID == r1.ID || r3.Anchor.ID.PID != 11 {
		t.Errorf("second agent: run %s anchor %v, %v; want a new run anchored at 11", r3.ID, r3.Anchor, err)
	}
	if diff := cmp.Diff([]string{"run.created", "run.created"}, e.sink.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestLocalCallerErrors(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	e.procs.add(70, 1, 70, "bash", 1000)
	e.procs.add(71, 70, 71, "airlock-ssh", 1000)
	e.procs.add(80, 30, 5, "airlock-ssh", 1000) // started before its "parent": pid 30 was reused
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		peer Peer
		want error
	}{
		{"peer gone", Peer{PID: 999, UID: 1000}, ErrNoProcess},
		{"uid differs: pid reused after connect", Peer{PID: 60, UID: 1001}, ErrPeerMismatch},
		{"parent pid reused", Peer{PID: 80, UID: 1000}, ErrNoProcess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.s.ResolveLocal(ctx, tc.peer); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if n := e.sink.count(); n != 0 {
		t.Errorf("%d events for refused callers", n)
	}
}

func TestExplicitAnchorWins(t *testing.T) {
	e := newEnv(t)
	// 1 ─ 100 airlock (run) ─ 110 python (agent) ─ 120 sh ─ 130 airlock-ssh
	e.procs.add(100, 1, 100, "airlock", 1000)
	e.procs.add(110, 100, 110, "python3", 1000)
	e.procs.add(120, 110, 120, "sh", 1000)
	e.procs.add(130, 120, 130, "airlock-ssh", 1000)
	e.procs.add(140, 1, 140, "airlock-ssh", 1000)
	ctx := context.Background()
	reg, err := e.s.RegisterAnchor(ctx, Peer{PID: 100, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !reg.Explicit || reg.Anchor.ID.PID != 100 {
		t.Fatalf("registered run %+v", reg)
	}
	again, err := e.s.RegisterAnchor(ctx, Peer{PID: 100, UID: 1000})
	if err != nil || again.ID != reg.ID {
		t.Errorf("registering twice: %s, %v; want %s", again.ID, err, reg.ID)
	}
	got, err := e.s.ResolveLocal(ctx, Peer{PID: 130, UID: 1000})
	if err != nil || got.ID != reg.ID {
		t.Errorf("descendant resolves to %s, %v; want the explicit run %s", got.ID, err, reg.ID)
	}
	// The registered process itself (airlock mcp makes its own requests).
	if got, err := e.s.ResolveLocal(ctx, Peer{PID: 100, UID: 1000}); err != nil || got.ID != reg.ID {
		t.Errorf("anchor itself resolves to %s, %v", got.ID, err)
	}
	// A process outside the tree is not admitted to the run: it gets a
	// run of its own (anchored at itself, its parent being init).
	if got, err := e.s.ResolveLocal(ctx, Peer{PID: 140, UID: 1000}); err != nil || got.ID == reg.ID || got.Anchor.ID.PID != 140 {
		t.Errorf("outsider: run %s anchored at %v, %v; want a run of its own", got.ID, got.Anchor, err)
	}
}

// A walk with no agent below init anchors at the topmost process of the
// caller's uid (a cron job, a service, a detached script) instead of
// refusing it.
func TestAnchorWithoutAnAgentAncestor(t *testing.T) {
	e := newEnv(t)
	e.procs.add(70, 1, 70, "bash", 1000)
	e.procs.add(71, 70, 71, "airlock-ssh", 1000)
	e.procs.add(80, 1, 80, "airlock-ssh", 1000)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		peer   Peer
		anchor int
	}{
		{"only shells up to init", Peer{PID: 71, UID: 1000}, 70},
		{"init's own child", Peer{PID: 80, UID: 1000}, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.s.ResolveLocal(ctx, tc.peer)
			if err != nil || got.Anchor.ID.PID != tc.anchor || got.Requester != "user1000" {
				t.Errorf("run anchored at %v for %q, %v; want pid %d for user1000", got.Anchor, got.Requester, err, tc.anchor)
			}
		})
	}
}

// An agent that is pid 1 of the gateway's pid namespace (a container's
// init, with the gateway in the container) anchors its own run.
func TestCallerThatIsInit(t *testing.T) {
	e := newEnv(t)
	e.procs.add(1, 0, 1, "agent", 1000)
	got, err := e.s.ResolveLocal(context.Background(), Peer{PID: 1, UID: 1000})
	if err != nil || got.Anchor.ID.PID != 1 {
		t.Fatalf("run anchored at %v, %v; want the caller, pid 1", got.Anchor, err)
	}
}

// The anchor walk never crosses into another user's process: a process
// of another uid (su, sudo, a setuid wrapper, a daemon) ends it, so a run
// and its requester are always the caller's own user's, and an explicit
// anchor of another user is never inherited.
func TestAnchorWalkStopsAtAnotherUser(t *testing.T) {
	e := newEnv(t)
	// 1 ─ 200 sshd (root) ─ 210 bash (alice) ─ 220 su (root) ─ 230 sh (bob) ─ 240 airlock-ssh (bob)
	e.procs.add(200, 1, 200, "sshd", 0)
	e.procs.add(210, 200, 210, "bash", 1001)
	e.procs.add(220, 210, 220, "su", 0)
	e.procs.add(230, 220, 230, "sh", 1002)
	e.procs.add(240, 230, 240, "airlock-ssh", 1002)
	// 1 ─ 300 airlock run (alice) ─ 310 sudo (root) ─ 320 python3 (bob) ─ 330 airlock-ssh (bob)
	e.procs.add(300, 1, 300, "airlock", 1001)
	e.procs.add(310, 300, 310, "sudo", 0)
	e.procs.add(320, 310, 320, "python3", 1002)
	e.procs.add(330, 320, 330, "airlock-ssh", 1002)
	ctx := context.Background()

	run, err := e.s.ResolveLocal(ctx, Peer{PID: 240, UID: 1002})
	if err != nil {
		t.Fatal(err)
	}
	if run.Anchor.ID.PID != 230 || run.Anchor.UID != 1002 || run.Requester != "user1002" {
		t.Errorf("su chain: anchored at %d (uid %d) for %q; want bob's sh 230 for user1002, never su", run.Anchor.ID.PID, run.Anchor.UID, run.Requester)
	}
	if got := run.Anchor.Chain; len(got) == 0 || got[0].ID.PID != 220 {
		t.Errorf("the reviewer's chain %v does not show su and above", got)
	}

	alice, err := e.s.RegisterAnchor(ctx, Peer{PID: 300, UID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := e.s.ResolveLocal(ctx, Peer{PID: 330, UID: 1002})
	if err != nil {
		t.Fatal(err)
	}
	if bob.ID == alice.ID || bob.Anchor.ID.PID != 320 || bob.Requester != "user1002" {
		t.Errorf("sudo under alice's explicit run: run %s anchored at %d for %q; want bob's own run at 320", bob.ID, bob.Anchor.ID.PID, bob.Requester)
	}
	if found, err := e.s.FindLocal(ctx, Peer{PID: 330, UID: 1002}); err != nil || found.ID != bob.ID {
		t.Errorf("FindLocal: %s, %v; want bob's run %s", found.ID, err, bob.ID)
	}
}

// A run request whose anchor exits is withdrawn at once, recorded, and
// cannot be approved: there is no process left to act.
func TestAnchorExitWithdrawsItsPendingRequest(t *testing.T) {
	e := newEnv(t)
	e.sink.seen = make(chan EventKind, 16)
	agentTree(e.procs)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	drain(e.sink.seen)
	for _, pid := range []int{60, 50, 40, 61, 41, 30} {
		e.procs.kill(pid)
	}
	waitKind(t, e.sink.seen, EventRunEnded)
	if o := recv(t, ch); !errors.Is(o.err, ErrRunEnded) {
		t.Errorf("the waiting action: %+v %v, want ErrRunEnded", o.res, o.err)
	}
	if got, _ := e.s.Request(ctx, q.ID); got.Status != StatusWithdrawn || !strings.Contains(got.Reason, "anchor_exited") {
		t.Errorf("request after its anchor exited: %v %q", got.Status, got.Reason)
	}
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("approving it: %v, want ErrWithdrawn", err)
	}
}

func TestAnchorDeathAndPidReuse(t *testing.T) {
	e := newEnv(t)
	e.sink.seen = make(chan EventKind, 16)
	agentTree(e.procs)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
	recv(t, ch)
	drain(e.sink.seen)

	// The agent exits; its helper processes with it.
	for _, pid := range []int{60, 50, 40, 61, 41, 30} {
		e.procs.kill(pid)
	}
	waitKind(t, e.sink.seen, EventRunEnded)
	got, _ := e.s.Run(ctx, run.ID)
	if got.State != RunEnded || got.EndReason != EndAnchorExited {
		t.Errorf("run after anchor exit: %v %v", got.State, got.EndReason)
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunEnded) {
		t.Errorf("action in the ended run: err = %v, want ErrRunEnded", err)
	}

	// The same pids come back for a new agent with the same argv: a new
	// run, pending, not the approved one.
	e.procs.add(30, 20, 300, "node", 1000)
	e.procs.add(40, 30, 400, "bash", 1000)
	e.procs.add(60, 40, 600, "airlock-ssh", 1000)
	again, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == run.ID || again.State != RunPending || again.Anchor.ID != (ProcessID{30, 300}) {
		t.Errorf("after pid reuse: run %s state %v anchor %v; want a new pending run", again.ID, again.State, again.Anchor.ID)
	}
}

// TestAnchorCheckedOnUse: even if the exit is not (yet) noticed by the
// watcher, an action checks the anchor's pid and start time itself.
func TestAnchorCheckedOnUse(t *testing.T) {
	fi := &silentInspector{newFakeInspector()}
	e := newEnv(t, func(o *Options) { o.Inspector = fi })
	agentTree(fi.fakeInspector)
	ctx := context.Background()
	run, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	fi.kill(30)
	fi.add(30, 20, 999, "node", 1000) // reused at once
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunEnded) {
		t.Errorf("action after anchor exit: err = %v, want ErrRunEnded", err)
	}
}

// silentInspector never reports exits, like a watcher that lags.
type silentInspector struct{ *fakeInspector }

func (silentInspector) Wait(ctx context.Context, _ ProcessID) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestDeniedAnchorStaysRefused(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	ctx := context.Background()
	rv := e.reviewer("rita")
	run, _ := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny})
	recv(t, ch)
	// The refusal names the run (for the refused request to carry), as
	// FindLocal shows it.
	if got, err := e.s.ResolveLocal(ctx, Peer{PID: 61, UID: 1000}); !errors.Is(err, ErrRunDenied) || got.ID != run.ID {
		t.Errorf("same agent after denial: run %q err = %v, want run %s and ErrRunDenied", got.ID, err, run.ID)
	}
	e.reopen()
	if _, err := e.s.ResolveLocal(ctx, Peer{PID: 61, UID: 1000}); !errors.Is(err, ErrRunDenied) {
		t.Errorf("same agent after denial and restart: err = %v, want ErrRunDenied", err)
	}
}

func TestRestartEndsRunsOfDeadAnchors(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	ctx := context.Background()
	dead, _ := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	live, _ := e.s.ResolveLocal(ctx, Peer{PID: 62, UID: 1000})
	e.s.Close()
	e.procs.kill(30)
	e.open()
	if got, _ := e.s.Run(ctx, dead.ID); got.State != RunEnded || got.EndReason != EndAnchorExited {
		t.Errorf("run of a dead anchor after restart: %v %v", got.State, got.EndReason)
	}
	if got, err := e.s.ResolveLocal(ctx, Peer{PID: 62, UID: 1000}); err != nil || got.ID != live.ID {
		t.Errorf("live anchor after restart: %s, %v; want %s", got.ID, err, live.ID)
	}
	// And its watcher is running again.
	e.sink.mu.Lock()
	e.sink.seen = make(chan EventKind, 4)
	e.sink.mu.Unlock()
	e.procs.kill(11)
	waitKind(t, e.sink.seen, EventRunEnded)
}

func drain(ch chan EventKind) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func waitKind(t *testing.T, ch <-chan EventKind, want EventKind) {
	t.Helper()
	deadline := time.After(testkit.Patience)
	for {
		select {
		case k := <-ch:
			if k == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %v event", want)
		}
	}
}

// FindLocal finds a caller's run for reading and never creates one.
func TestFindLocalCreatesNothing(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	ctx := context.Background()
	if _, err := e.s.FindLocal(ctx, Peer{PID: 60, UID: 1000}); !errors.Is(err, ErrUnknownRun) {
		t.Fatalf("FindLocal before any action: err = %v, want ErrUnknownRun", err)
	}
	if n := e.sink.count(); n != 0 {
		t.Fatalf("FindLocal recorded %d events", n)
	}
	r, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// Another shell of the same agent finds the same run.
	got, err := e.s.FindLocal(ctx, Peer{PID: 61, UID: 1000})
	if err != nil || got.ID != r.ID {
		t.Errorf("FindLocal = %s, %v; want %s", got.ID, err, r.ID)
	}
	// A second agent process has none.
	if _, err := e.s.FindLocal(ctx, Peer{PID: 62, UID: 1000}); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("second agent: err = %v, want ErrUnknownRun", err)
	}
	if diff := cmp.Diff([]string{"run.created"}, e.sink.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestLocalWalkStopsAtTheAnchor: resolving a caller of a known run reads
// the processes from the caller up to its anchor and none above, while no
// run of the caller's uid was registered; once one was, the walk goes up
// the whole own chain, where a registered anchor further up holds the
// caller. A new run still shows reviewers the whole way up.
func TestLocalWalkStopsAtTheAnchor(t *testing.T) {
	e := newEnv(t)
	agentTree(e.procs)
	ctx := context.Background()
	r1, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil || len(r1.Anchor.Chain) != 3 {
		t.Fatalf("first resolve: %v, chain %v; want the chain above node 30 up to pid 1", err, r1.Anchor)
	}
	e.procs.statted()
	if r, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000}); err != nil || r.ID != r1.ID {
		t.Fatalf("second resolve: %s, %v; want %s", r.ID, err, r1.ID)
	}
	got := e.procs.statted()
	for _, pid := range []int{60, 50, 40, 30} {
		if got[pid] == 0 {
			t.Errorf("pid %d, between the caller and its anchor, was not read (reads %v)", pid, got)
		}
	}
	for _, pid := range []int{20, 10, 1} {
		if got[pid] != 0 {
			t.Errorf("pid %d, above the anchor, was read (reads %v)", pid, got)
		}
	}
	// bash 20, above the agent, registers a run (as airlock run does):
	// the nearest registered anchor now holds the caller.
	explicit, err := e.s.RegisterAnchor(ctx, Peer{PID: 20, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	e.procs.statted()
	r, err := e.s.ResolveLocal(ctx, Peer{PID: 60, UID: 1000})
	if err != nil || r.ID != explicit.ID {
		t.Errorf("resolve under a registered anchor: run %s, %v; want the registered run %s", r.ID, err, explicit.ID)
	}
	if got := e.procs.statted(); got[20] == 0 {
		t.Errorf("the walk stopped below the registered anchor (reads %v)", got)
	}
}
