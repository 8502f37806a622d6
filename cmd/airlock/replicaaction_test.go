package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/outcome"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// actionIDsOf lists the ids of the actions with an entry of kind in the
// audit log, read through d.
func actionIDsOf(t *testing.T, d *daemon, kind string) []string {
	t.Helper()
	out, errs, code := d.cli("audit", "export")
	if code != 0 {
		t.Fatalf("audit export: %s", errs)
	}
	var ids []string
	for line := range strings.Lines(out) {
		var e struct {
			Kind     string `json:"kind"`
			ActionID string `json:"action_id"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == kind {
			ids = append(ids, e.ActionID)
		}
	}
	return ids
}

// exitOf runs an agent command to its end and returns its exit status
// and what it printed on stdout and stderr.
func exitOf(t *testing.T, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

// An agent's action runs on replica A, which is killed (SIGKILL) while
// it runs. Replica B on the same host shows it running on A before the
// kill, and its `airlock-ssh --action` follows it to the outcome B
// records once A's lease ran out: interrupted. The agent's own helper
// says where to ask; A's socket is gone, and the helper says so and
// where else to ask. Another run of the host (under airlock run) is told
// there is no such action, as for one that does not exist.
func TestReplicaKilledActionThroughSurvivor(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	dsn := pgtest.Shared(t).NewDatabase(t)
	ds := replicas(t, s, dsn, 2, "run", "")
	a, b := ds[0], ds[1]

	var agentOut bytes.Buffer
	agent := a.agent("airlock-ssh box sleep 120")
	agent.Stdout, agent.Stderr = &agentOut, &agentOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-agent.Process.Pid, syscall.SIGKILL)
	if _, errs, code := b.cli("approvals", "approve", b.pending(1)[0].ID); code != 0 {
		t.Fatalf("approve through B: %s", errs)
	}
	var id string
	testkit.EventuallyErr(t, func() error {
		if ids := actionIDsOf(t, b, "action.connecting"); len(ids) == 1 {
			id = ids[0]
			return nil
		}
		return fmt.Errorf("no action connected; agent: %s", agentOut.String())
	}, "A's action to connect")

	// Through B, the agent sees it running on A: an --action that stops
	// following (a signal) reports where it stands.
	code, outs, errs := exitOf(t, b.agent("timeout --preserve-status -s INT 2 airlock-ssh --action "+id))
	if want := "still in flight (running, on gateway replica " + hostname(t) + "/"; code != 255 || !strings.Contains(errs, want) {
		t.Fatalf("A's running action through B: %d %s %s\nwant: %s", code, outs, errs, want)
	}
	var followOut, followErr bytes.Buffer
	follow := b.agent("airlock-ssh --json --action " + id)
	follow.Stdout, follow.Stderr = &followOut, &followErr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-follow.Process.Pid, syscall.SIGKILL)

	a.signal(syscall.SIGKILL)

	// B's follower ends with the outcome B records after A's lease.
	err := follow.Wait()
	var got api.Action
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 || json.Unmarshal(followOut.Bytes(), &got) != nil ||
		got.Outcome != outcome.Interrupted || !strings.Contains(got.Detail, "lease") || got.ID != id {
		t.Fatalf("airlock-ssh --action through B across A's death: %v\n%s\n%s", err, followOut.String(), followErr.String())
	}
	// The agent's helper lost A mid-action: it says how to ask.
	agent.Wait()
	if want := "`airlock-ssh --action " + id + "` shows the recorded result once the gateway answers again, or through another gateway replica on this host (--socket)"; !strings.Contains(agentOut.String(), want) {
		t.Errorf("the agent's helper when A died: %s\nwant it to say: %s", agentOut.String(), want)
	}
	code, _, errs = exitOf(t, b.agent("airlock-ssh --action "+id))
	if code != 255 || !strings.Contains(errs, "airlock-ssh: interrupted: ") || !strings.Contains(errs, "(action "+id+")") {
		t.Errorf("airlock-ssh --action through B after the takeover: %d %s", code, errs)
	}
	code, _, errs = exitOf(t, a.agent("airlock-ssh --action "+id))
	if code != 255 || !strings.Contains(errs, "cannot reach the gateway at "+a.socket) || !strings.Contains(errs, "another gateway replica on this host (--socket)") {
		t.Errorf("airlock-ssh --action through dead A: %d %s", code, errs)
	}

	// Another run learns nothing of it.
	airlock, _ := binaries(t)
	_, _, theirs := exitOf(t, b.agent(airlock+" run -- airlock-ssh --action "+id))
	_, _, none := exitOf(t, b.agent(airlock+" run -- airlock-ssh --action act_doesnotexist"))
	helperLine := func(s string) string { _, l, _ := strings.Cut(s, "airlock-ssh: "); return l }
	if !strings.Contains(theirs, "airlock-ssh: no action "+id+" of this agent") ||
		strings.ReplaceAll(helperLine(theirs), id, "ID") != strings.ReplaceAll(helperLine(none), "act_doesnotexist", "ID") {
		t.Errorf("another run's --action: %s\nfor none: %s", theirs, none)
	}
}

// hostname is this host's name, as replica ids begin.
func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// An action whose gateway died (SIGKILL) while it waited for a reviewer
// never connected and gets no outcome: after the restart, --action says
// so and that nothing was run, instead of calling it in flight.
func TestActionLeftWithoutOutcome(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "call")
	if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	d := startDaemon(t, cfgFile, state)
	waiter := d.agent("airlock-ssh box echo never")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-waiter.Process.Pid, syscall.SIGKILL)
	d.pending(1)
	ids := actionIDsOf(t, d, "action.requested")
	if len(ids) != 1 {
		t.Fatalf("%d actions requested, want 1", len(ids))
	}
	d.signal(syscall.SIGKILL)
	waiter.Wait()
	d.start()

	code, _, errs := exitOf(t, d.agent("airlock-ssh --action "+ids[0]))
	if want := "airlock-ssh: action " + ids[0] + " has no outcome (requested): no outcome was recorded, and none will be: the gateway that took the action stopped before it connected; nothing was run"; code != 255 || !strings.Contains(errs, want) {
		t.Errorf("--action after the restart: %d %s\nwant: %s", code, errs, want)
	}
}
