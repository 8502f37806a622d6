package systemtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// faultExec answers the fault server's commands: "exit N", "signal",
// "missing" (close without a status), "drop" (cut TCP mid-command), "hang"
// (until the gateway's KILL, which it confirms), "echo WORD".
func faultExec(e *sshtest.Exec) {
	cmd, arg, _ := strings.Cut(e.Command, " ")
	switch cmd {
	case "exit":
		n, _ := strconv.Atoi(arg)
		e.ExitStatus(uint32(n))
	case "echo":
		e.Channel.Write([]byte(arg + "\n"))
		e.ExitStatus(0)
	case "signal":
		e.ExitSignal("TERM")
	case "missing":
	case "drop":
		e.Channel.Write([]byte("partial"))
		e.Drop()
	case "hang":
		select {
		case <-e.Signals:
			e.ExitSignal("KILL")
		case <-e.Done:
		}
	default:
		e.ExitStatus(127)
	}
}

// want is what an action must end as, derived from what was sent.
type want struct {
	outcome  string
	exitCode int // for "exited"
	signal   string
	stdout   string // for "exited" when not empty
	sshd     int    // which sshd (1, 2) authenticated it, 0 for none
	// deadline marks an action whose command outlives its deadline. On a
	// busy machine the deadline can pass before exec is sent (during the
	// handshake, authentication or while the session opens): then the
	// outcome names the phase it was in and says nothing started, which
	// is right. Whether sshd logged the login is then unknown.
	deadline bool
}

type loadReq struct {
	req  api.ActionRequest
	want want
}

// loadMix returns the i-th request of the mixed load.
func loadMix(r *rand.Rand, i int) loadReq {
	sshdTarget := func() (string, int) {
		if r.IntN(2) == 0 {
			return "sshd-1", 1
		}
		return "sshd-2", 2
	}
	n := r.IntN(100)
	switch {
	case n < 28:
		tg, s := sshdTarget()
		code := r.IntN(6)
		return loadReq{api.ActionRequest{Target: tg, Command: fmt.Sprintf("exit %d", code)}, want{outcome: "exited", exitCode: code, sshd: s}}
	case n < 48:
		tg, s := sshdTarget()
		tok := fmt.Sprintf("tok-%d", i)
		return loadReq{api.ActionRequest{Target: tg, Command: "echo " + tok}, want{outcome: "exited", stdout: tok + "\n", sshd: s}}
	case n < 50:
		tg, s := sshdTarget()
		return loadReq{api.ActionRequest{Target: tg, Command: "sleep 60", TimeoutS: deadlineS}, want{outcome: "timed_out", sshd: s, deadline: true}}
	case n < 53:
		tg, s := sshdTarget()
		return loadReq{api.ActionRequest{Target: tg, Command: "kill -TERM $$"}, want{outcome: "signaled", signal: "TERM", sshd: s}}
	case n < 58:
		return loadReq{api.ActionRequest{Target: "sshd-1-rotated", Command: "touch /tmp/airlock-must-not-exist"}, want{outcome: "host_key_mismatch"}}
	case n < 63:
		return loadReq{api.ActionRequest{Target: "sshd-2-stranger", Command: "exit 0"}, want{outcome: "auth_failed"}}
	case n < 66:
		return loadReq{api.ActionRequest{Target: "closed", Command: "exit 0"}, want{outcome: "dial_failed"}}
	case n < 69:
		return loadReq{api.ActionRequest{Target: "nowhere-" + strconv.Itoa(i), Command: "exit 0"}, want{outcome: "rejected"}}
	case n < 80:
		code := r.IntN(256)
		return loadReq{api.ActionRequest{Target: "fault", Command: fmt.Sprintf("exit %d", code)}, want{outcome: "exited", exitCode: code}}
	case n < 86:
		tok := fmt.Sprintf("f-%d", i)
		return loadReq{api.ActionRequest{Target: "fault", Command: "echo " + tok}, want{outcome: "exited", stdout: tok + "\n"}}
	case n < 89:
		return loadReq{api.ActionRequest{Target: "fault", Command: "signal"}, want{outcome: "signaled", signal: "TERM"}}
	case n < 92:
		return loadReq{api.ActionRequest{Target: "fault", Command: "missing"}, want{outcome: "exit_missing"}}
	case n < 98:
		return loadReq{api.ActionRequest{Target: "fault", Command: "drop"}, want{outcome: "connection_lost"}}
	default:
		return loadReq{api.ActionRequest{Target: "fault", Command: "hang", TimeoutS: deadlineS}, want{outcome: "timed_out", deadline: true}}
	}
}

// deadlineS is the timeout of the actions that must run into it: long
// enough for most handshakes under load to finish first, short enough to
// keep the run quick. Neither is assumed (see want.deadline).
const deadlineS = 3

// notStartedByDeadline is what an action whose deadline passed before exec
// was sent may end as: the phase it was in, nothing started.
var notStartedByDeadline = map[string]bool{"dial_failed": true, "handshake_failed": true, "session_failed": true, "timed_out": true}

// started reports whether the action's command was sent to the target.
func started(a *api.Action) bool { return a.Termination != sshexec.NotStarted }

// check compares an action with what it must be.
func (w want) check(a *api.Action) error {
	if w.deadline && !started(a) {
		if !notStartedByDeadline[a.Outcome.String()] {
			return fmt.Errorf("outcome %q (%s) before exec, want one of a deadline passing before the command started", a.Outcome, a.Detail)
		}
		if a.Success() {
			return fmt.Errorf("reported as success")
		}
		return nil
	}
	if a.Outcome.String() != w.outcome {
		return fmt.Errorf("outcome %q (%s), want %q", a.Outcome, a.Detail, w.outcome)
	}
	if a.State != api.StateFinished {
		return fmt.Errorf("state %q, want finished", a.State)
	}
	switch w.outcome {
	case "exited":
		if a.ExitCode == nil || *a.ExitCode != w.exitCode {
			return fmt.Errorf("exit code %v, want %d", a.ExitCode, w.exitCode)
		}
		if w.stdout != "" && a.Stdout != w.stdout {
			return fmt.Errorf("stdout %q, want %q", a.Stdout, w.stdout)
		}
	case "signaled":
		if a.Signal != w.signal {
			return fmt.Errorf("signal %q, want %q", a.Signal, w.signal)
		}
	}
	if w.outcome != "exited" && a.Success() {
		return fmt.Errorf("reported as success")
	}
	return nil
}

// loadBed is two real sshd targets and a fault server behind one gateway,
// with targets for every failure the load mixes in.
type loadBed struct {
	g            *gw
	sshd1, sshd2 *sshtest.SSHD
	fault        *sshtest.FaultServer
	socket, http *api.Client
	rv           *api.Client
}

func newLoadBed(t *testing.T, maxParallel int) *loadBed {
	t.Helper()
	s1 := sshtest.NewSSHD(t, sshtest.Options{})
	s2 := sshtest.NewSSHD(t, sshtest.Options{})
	signer, keyFile := clientKey(t, s1, s2)
	_, strangerFile := clientKey(t) // authorized nowhere
	fault := sshtest.NewFaultServerWithClient(t, sshtest.FaultOptions{Exec: faultExec}, signer)
	g := newGateway(t, config{
		credentials: map[string]string{"key": keyFile, "stranger": strangerFile},
		targets: []target{
			{name: "sshd-1", address: s1.Addr, hostKey: keyLine(s1.HostKey), user: s1.User, credential: "key", maxParallel: maxParallel},
			{name: "sshd-2", address: s2.Addr, hostKey: keyLine(s2.HostKey), user: s2.User, credential: "key", maxParallel: maxParallel},
			{name: "sshd-1-rotated", address: s1.Addr, hostKey: keyLine(sshtest.NewKey().PublicKey()), user: s1.User, credential: "key", maxParallel: maxParallel},
			{name: "sshd-2-stranger", address: s2.Addr, hostKey: keyLine(s2.HostKey), user: s2.User, credential: "stranger", maxParallel: maxParallel},
			{name: "closed", address: closedAddr(t), hostKey: keyLine(s1.HostKey), user: s1.User, credential: "key", maxParallel: maxParallel},
			{name: "fault", address: fault.Addr, hostKey: keyLine(fault.HostKey), user: "fault", credential: "key", maxParallel: maxParallel},
		},
	})
	b := &loadBed{g: g, sshd1: s1, sshd2: s2, fault: fault, rv: g.reviewer()}
	b.socket = g.agent()
	b.http, _ = g.remoteAgent()
	g.approveRun(b.socket, b.rv, "sshd-1")
	g.approveRun(b.http, b.rv, "sshd-2")
	return b
}

// loadResult sums up a load run.
type loadResult struct {
	requests  int
	byOutcome map[string]int
	elapsed   time.Duration
	failures  []string
	ids       map[string]want
	accepted  [3]int // sshd logins the requests must have caused
	// mayAccept counts the actions whose deadline passed before exec on
	// an sshd target: sshd may or may not have logged their login.
	mayAccept [3]int
	// beforeExec counts the deadline actions that ended before exec.
	beforeExec int
}

// runLoad sends n mixed requests, parallel at a time, alternating the
// socket and HTTP transports, and checks each answer.
func (b *loadBed) runLoad(t *testing.T, seed uint64, n, parallel int) *loadResult {
	t.Helper()
	res := &loadResult{byOutcome: map[string]int{}, ids: map[string]want{}}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for w := range parallel {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				lr := loadMix(r, i)
				c := b.socket
				if i%2 == 1 {
					c = b.http
				}
				a, err := c.RunAction(ctx, lr.req, api.Events{})
				mu.Lock()
				res.requests++
				switch {
				case err != nil:
					res.failures = append(res.failures, fmt.Sprintf("%d %+v: %v", i, lr.req, err))
				default:
					res.byOutcome[a.Outcome.String()]++
					if cerr := lr.want.check(a); cerr != nil {
						res.failures = append(res.failures, fmt.Sprintf("%d %s %+v: %v", i, a.ID, lr.req, cerr))
					}
					if _, dup := res.ids[a.ID]; dup {
						res.failures = append(res.failures, fmt.Sprintf("action id %s answered twice", a.ID))
					}
					w := lr.want
					if w.deadline && !started(a) {
						// Recorded as what it was: the audit must agree.
						w.outcome = a.Outcome.String()
						res.mayAccept[w.sshd]++
						res.beforeExec++
					} else {
						res.accepted[w.sshd]++
					}
					res.ids[a.ID] = w
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// TestLoadMixedOutcomes: many actions, 32 at a time, across two real sshd
// and a fault server, with every outcome the targets can produce; each
// action has exactly one terminal outcome that matches what happened, the
// audit holds exactly the requests made with contiguous seqs and verifies,
// and the gateway process is back to its resting goroutines and file
// descriptors afterwards, with bounded peak memory.
func TestLoadMixedOutcomes(t *testing.T) {
	n, parallel := 2000, 32
	if soak() {
		n = 10000
	}
	b := newLoadBed(t, 16)
	g := b.g

	// Warm up, then take the resting figures.
	warm := b.runLoad(t, 1, 64, parallel)
	if len(warm.failures) > 0 {
		t.Fatalf("warm-up: %d failures, first: %s", len(warm.failures), warm.failures[0])
	}
	g.settle(procStats{fds: 1 << 30, goroutines: 1 << 30}, 0, 0)
	time.Sleep(500 * time.Millisecond)
	base := g.stats()
	acc1, acc2 := b.sshd1.Accepted(), b.sshd2.Accepted()

	res := b.runLoad(t, 2, n, parallel)
	t.Logf("load: %d actions, %d in parallel, in %s (%.0f actions/s); outcomes %v",
		res.requests, parallel, res.elapsed.Round(time.Millisecond), float64(res.requests)/res.elapsed.Seconds(), res.byOutcome)
	for i, f := range res.failures {
		if i >= 20 {
			t.Errorf("… and %d more", len(res.failures)-20)
			break
		}
		t.Error(f)
	}
	if res.requests != n {
		t.Errorf("%d requests answered, want %d", res.requests, n)
	}

	if res.beforeExec > 0 {
		t.Logf("%d actions meant to time out had their deadline pass before exec (a busy machine)", res.beforeExec)
	}

	// One connection per action: each sshd logged one login per action
	// that got past authentication there, no more. An action whose
	// deadline cut its authentication may or may not have been logged.
	for i, got := range []int{b.sshd1.Accepted() - acc1, b.sshd2.Accepted() - acc2} {
		lo, hi := res.accepted[i+1], res.accepted[i+1]+res.mayAccept[i+1]
		if got < lo || got > hi {
			t.Errorf("sshd-%d accepted %d logins, want %d to %d (one per action)", i+1, got, lo, hi)
		}
	}
	if strings.Contains(b.sshd1.Log(), "airlock-must-not-exist") {
		t.Error("a command sent to the rotated-key target reached sshd")
	}

	after, ok := g.settle(base, 8, 15*time.Second)
	t.Logf("gateway process: fds %d → %d, goroutines %d → %d, VmHWM %d MiB", base.fds, after.fds, base.goroutines, after.goroutines, after.hwmKiB>>10)
	if !ok {
		t.Errorf("the gateway did not return to rest: fds %d → %d, goroutines %d → %d", base.fds, after.fds, base.goroutines, after.goroutines)
	}
	if limit := 512 << 10; after.hwmKiB > limit {
		t.Errorf("gateway peak RSS %d KiB, over %d KiB", after.hwmKiB, limit)
	}

	// The audit: every request made is there once, with its one outcome.
	es := g.audit()
	outcomes, requested := finished(es)
	total := res.requests + warm.requests + 2 // + the two approval actions
	if requested != total {
		t.Errorf("audit holds %d action.requested entries, want %d (requests made)", requested, total)
	}
	for id, w := range res.ids {
		got := outcomes[id]
		if len(got) != 1 || got[0] != w.outcome {
			t.Errorf("action %s: audit outcomes %v, want exactly [%s]", id, got, w.outcome)
		}
	}
	if len(outcomes) != total {
		t.Errorf("audit holds outcomes for %d actions, want %d", len(outcomes), total)
	}
	g.verify()
	t.Logf("audit: %d entries, %d actions, verify OK", len(es), requested)
}
