package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// detached starts an action with ?wait=false and returns its id.
func detached(t *testing.T, c *api.Client, req api.ActionRequest) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/actions?wait=false", req, &out); err != nil {
		t.Fatalf("POST /v1/actions?wait=false: %v", err)
	}
	return out.ID
}

// waitState polls an action until it reaches state or the timeout passes.
func waitState(t *testing.T, c *api.Client, id string, state api.State, timeout time.Duration) *api.Action {
	t.Helper()
	var a *api.Action
	err := testkit.PollErr(timeout, func() (err error) {
		if a, err = c.Action(context.Background(), id); err != nil {
			return testkit.Stop(fmt.Errorf("GET action %s: %w", id, err))
		}
		if a.State != state && a.State != api.StateFinished {
			return fmt.Errorf("action %s is %s, want %s", id, a.State, state)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sharedDir is a directory the sshd test account may write.
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "airlock-systemtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestKill9WithActionsInFlight: kill -9 of the gateway with 50 actions
// running; half of them on a real sshd whose commands have done their
// work, half on a server that has already sent exit status 0 the gateway
// did not get to record. After the restart every one is `interrupted` —
// none is reported as a success — and the chain and checkpoints verify.
func TestKill9WithActionsInFlight(t *testing.T) {
	const perTarget = 25
	s := sshtest.NewSSHD(t, sshtest.Options{})
	signer, keyFile := clientKey(t, s)
	release := make(chan struct{})
	var reported atomic.Int32
	fault := sshtest.NewFaultServerWithClient(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
		e.Channel.Write([]byte("did it\n"))
		select {
		case <-release:
		case <-e.Done:
			return
		}
		// The command is over and says so; the channel stays open for
		// the gateway's grace period, in which the gateway dies.
		e.ExitStatus(0)
		reported.Add(1)
		<-e.Done
	}}, signer)
	g := newGateway(t, config{
		credentials: map[string]string{"key": keyFile},
		targets: []target{
			{name: "sshd", address: s.Addr, hostKey: keyLine(s.HostKey), user: s.User, credential: "key", maxParallel: 64},
			{name: "fault", address: fault.Addr, hostKey: keyLine(fault.HostKey), user: "x", credential: "key", maxParallel: 64},
		},
	})
	rv := g.reviewer()
	agent, _ := g.remoteAgent()
	g.approveRun(agent, rv, "sshd")

	marks := sharedDir(t)
	var ids []string
	for i := range perTarget {
		ids = append(ids, detached(t, agent, api.ActionRequest{Target: "sshd", Command: fmt.Sprintf("touch %s/ran-%d; echo ran; sleep 30", marks, i), TimeoutS: 60}))
		ids = append(ids, detached(t, agent, api.ActionRequest{Target: "fault", Command: "work", TimeoutS: 60}))
	}
	for _, id := range ids {
		waitState(t, rv, id, api.StateRunning, testkit.Patience)
	}
	testkit.EventuallyErr(t, func() error {
		if m, _ := filepath.Glob(filepath.Join(marks, "ran-*")); len(m) != perTarget {
			return fmt.Errorf("%d of %d sshd commands ran", len(m), perTarget)
		}
		return nil
	}, "the sshd commands to run")
	close(release)
	testkit.Poll(testkit.Patience, func() bool { return reported.Load() >= perTarget })
	g.stop(syscall.SIGKILL)
	if reported.Load() != perTarget {
		t.Fatalf("%d of %d exit statuses sent before the kill", reported.Load(), perTarget)
	}

	g.start()
	rv = g.reviewer()
	for _, id := range ids {
		a, err := rv.Action(context.Background(), id)
		if err != nil {
			t.Fatalf("GET action %s after restart: %v", id, err)
		}
		if a.Outcome != sshexec.Interrupted || a.Success() {
			t.Errorf("action %s (%s): outcome %q exit %v after kill -9, want interrupted", id, a.Target, a.Outcome, a.ExitCode)
		}
	}
	outcomes, _ := finished(g.audit())
	for _, id := range ids {
		if got := outcomes[id]; len(got) != 1 || got[0] != "interrupted" {
			t.Errorf("action %s: audit outcomes %v, want exactly [interrupted]", id, got)
		}
	}
	g.verify()
	// The gateway's ends of the cut connections are gone; sshd's session
	// processes end with them.
	testkit.Eventually(t, func() bool { return len(s.SessionProcesses()) == 0 }, "sshd sessions to end after the gateway died")
	t.Logf("kill -9 with %d actions in flight: %d interrupted, 0 reported as success", len(ids), len(ids))
}

// oneSSHD is a gateway with one real sshd target "box".
func oneSSHD(t *testing.T, extra ...target) (*gw, *sshtest.SSHD, *api.Client) {
	t.Helper()
	s := sshtest.NewSSHD(t, sshtest.Options{})
	_, keyFile := clientKey(t, s)
	tg := append([]target{{name: "box", address: s.Addr, hostKey: keyLine(s.HostKey), user: s.User, credential: "key"}}, extra...)
	g := newGateway(t, config{credentials: map[string]string{"key": keyFile}, targets: tg})
	agent := g.agent()
	g.approveRun(agent, g.reviewer(), "box")
	return g, s, agent
}

// TestSSHDRestartMidCommand: sshd restarted (its sessions killed) while a
// command runs → connection_lost, and the next action works.
func TestSSHDRestartMidCommand(t *testing.T) {
	g, s, agent := oneSSHD(t)
	started := make(chan struct{})
	var once sync.Once
	done := make(chan *api.Action, 1)
	go func() {
		a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "echo started; sleep 30", TimeoutS: 60},
			api.Events{Output: func(string, []byte) { once.Do(func() { close(started) }) }})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	select {
	case <-started:
	case <-time.After(testkit.Patience):
		t.Fatal("the command did not start")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a == nil || a.Outcome != sshexec.ConnectionLost {
		t.Fatalf("after sshd restart: %+v, want connection_lost", a)
	}
	if a.Stdout != "started\n" {
		t.Errorf("stdout %q, want what came before the cut", a.Stdout)
	}
	b, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "echo again"}, api.Events{})
	if err != nil || !b.Success() || b.Stdout != "again\n" {
		t.Fatalf("action after the restart: %+v %v", b, err)
	}
	g.verify()
}

// TestHostKeyRotated: the target's host key changes → host_key_mismatch,
// and sshd saw no login and ran nothing.
func TestHostKeyRotated(t *testing.T) {
	g, s, agent := oneSSHD(t)
	if err := s.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	before := s.Accepted()
	marks := sharedDir(t)
	for range 5 {
		a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "touch " + marks + "/ran"}, api.Events{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != sshexec.HostKeyMismatch {
			t.Fatalf("outcome %q (%s), want host_key_mismatch", a.Outcome, a.Detail)
		}
	}
	if got := s.Accepted() - before; got != 0 {
		t.Errorf("sshd accepted %d logins after the rotation, want 0", got)
	}
	if _, err := os.Stat(filepath.Join(marks, "ran")); err == nil {
		t.Error("a command ran on the target with the rotated key")
	}
	g.verify()
}

// mountTmpfs mounts a tmpfs of size at dir (creating it), unmounting it
// when the test ends; it skips the test when mount is not permitted.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; this variant is not a peer CI must have")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs not permitted here (%v: %s); this variant is not a peer CI must have", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// TestAuditUnavailable: the state directory's file system fills up under
// the running gateway → audit_unavailable and nothing dialed; once there is
// room again, actions run and are recorded. A read-only file system (it
// cannot be remounted read-only while SQLite holds its files open) keeps
// the gateway from starting at all.
func TestAuditUnavailable(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	_, keyFile := clientKey(t, s)
	dir := t.TempDir()
	mountTmpfs(t, filepath.Join(dir, "state"), "16m")
	g := newGatewayAt(t, dir, config{credentials: map[string]string{"key": keyFile},
		targets: []target{{name: "box", address: s.Addr, hostKey: keyLine(s.HostKey), user: s.User, credential: "key"}}})
	agent := g.agent()
	g.approveRun(agent, g.reviewer(), "box")
	marks := sharedDir(t)

	t.Run("output store full", func(t *testing.T) {
		// Room for the audit entries, not for 4 MiB of output that does
		// not compress: the command runs, its output cannot be stored.
		filler := fill(t, g.state, 512<<10)
		defer os.Remove(filler)
		mark := filepath.Join(marks, "output-full")
		a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box",
			Command: "touch " + mark + "; head -c 4194304 /dev/urandom"}, api.Events{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != sshexec.AuditUnavailable || !strings.Contains(a.Detail, "the output could not be stored; the command may have run (its outcome was exited)") {
			t.Fatalf("outcome %q (%s), want audit_unavailable saying the command may have run", a.Outcome, a.Detail)
		}
		if _, err := os.Stat(mark); err != nil {
			t.Errorf("the command did not run (%v): \"may have run\" is right, but this test meant it to", err)
		}
		// The output's failed write may have taken the room the outcome
		// needed; once there is room again, the outcome is recorded.
		os.Remove(filler)
		var got []string
		testkit.Poll(testkit.Patience, func() bool {
			outcomes, _ := finished(g.audit())
			got = outcomes[a.ID]
			return len(got) > 0
		})
		if len(got) != 1 || got[0] != "audit_unavailable" {
			t.Errorf("the action is recorded as %v, want one audit_unavailable", got)
		}
		b, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "echo room again"}, api.Events{})
		if err != nil || !b.Success() || b.Stdout != "room again\n" {
			t.Fatalf("after freeing the disk: %+v %v", b, err)
		}
		t.Logf("output store full: %s (%s); recorded; the next action ran", a.Outcome, a.Detail)
		g.verify()
	})

	t.Run("full", func(t *testing.T) {
		filler := fill(t, g.state, 0)
		before := s.Accepted()
		const n = 20
		unavailable := 0
		for i := range n {
			a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: fmt.Sprintf("touch %s/full-%d", marks, i)}, api.Events{})
			if err != nil {
				t.Fatalf("action %d: %v", i, err)
			}
			if a.Outcome == sshexec.AuditUnavailable {
				unavailable++
			} else {
				t.Errorf("action %d on a full disk: outcome %q (%s), want audit_unavailable", i, a.Outcome, a.Detail)
			}
		}
		m, _ := filepath.Glob(filepath.Join(marks, "full-*"))
		if got := s.Accepted() - before; got != 0 || len(m) != 0 {
			t.Errorf("on a full disk sshd accepted %d logins and %d commands ran, want 0", got, len(m))
		}
		if !g.healthy() {
			t.Error("the gateway is not healthy on a full disk")
		}
		t.Logf("full disk: %d of %d audit_unavailable, 0 dialed", unavailable, n)

		os.Remove(filler)
		a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "echo room again"}, api.Events{})
		if err != nil || !a.Success() {
			t.Fatalf("after freeing the disk: %+v %v", a, err)
		}
		outcomes, requested := finished(g.audit())
		if got := outcomes[a.ID]; len(got) != 1 || got[0] != "exited" {
			t.Errorf("the action after recovery is recorded as %v", got)
		}
		t.Logf("after freeing the disk: the next action ran and is recorded (%d actions in the audit)", requested)
		g.verify()
	})

	t.Run("read-only", func(t *testing.T) {
		g.stop(syscall.SIGTERM)
		if out, err := exec.Command("mount", "-o", "remount,ro", g.state).CombinedOutput(); err != nil {
			t.Skipf("remount read-only: %v: %s", err, out)
		}
		defer exec.Command("mount", "-o", "remount,rw", g.state).Run()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, binary(t, "airlock"), "serve", "--config", g.cfgFile).CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("airlock serve kept running on a read-only state directory:\n%s", out)
		}
		if err == nil {
			t.Fatalf("airlock serve exited 0 on a read-only state directory:\n%s", out)
		}
		t.Logf("airlock serve on a read-only state directory: %v: %s", err, gatewaytest.Tail(strings.TrimSpace(string(out)), 300))
	})
}

// fill writes a file into dir until the file system has at most leave
// bytes free (0: to the last byte) and returns its path.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if leave > 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if n := int64(st.Bavail)*st.Bsize - leave; n > 0 {
			if _, err := f.Write(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		return filler
	}
	buf := make([]byte, 1<<20)
	for _, n := range []int{1 << 20, 4096, 1} { // to the last byte
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return filler
}
