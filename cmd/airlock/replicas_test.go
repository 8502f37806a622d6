package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// replicas starts n airlock serve processes on one PostgreSQL database
// (mode on "box", with targetExtra in its block), the first one's keys
// copied to the others as an operator does. The reviewer account is made
// offline in the database.
func replicas(t *testing.T, s *sshtest.SSHD, dsn string, n int, mode, targetExtra string) []*daemon {
	t.Helper()
	var ds []*daemon
	for i := range n {
		cfgFile, state := writeConfig(t, s, mode)
		cfg, err := os.ReadFile(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg = []byte(strings.Replace(string(cfg), `target "box" {`, "target \"box\" {\n"+targetExtra, 1))
		if err := os.WriteFile(cfgFile, append(cfg, []byte("\nstorage {\n  postgres = \""+dsn+"\"\n  lease = \"3s\"\n}\n")...), 0o600); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
				t.Fatalf("reviewer add: %s", errs)
			}
		} else {
			gatewaytest.CopyKeys(t, ds[0].state, state)
		}
		ds = append(ds, startDaemon(t, cfgFile, state))
	}
	return ds
}

// kill -9 of a replica with actions in flight and an agent waiting for
// a reviewer: the survivors record its actions as interrupted once its
// lease ran out and expire the request nobody waits for any more; every
// action has exactly one outcome, and the one chain verifies.
func TestReplicaKilledMidAction(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	dsn := pgtest.Shared(t).NewDatabase(t)
	ds := replicas(t, s, dsn, 3, "call", "")
	a, b, c := ds[0], ds[1], ds[2]

	// Three actions through A, approved through B, running on the target.
	var agentOut bytes.Buffer
	agents := a.agent("airlock-ssh box sleep 120 & airlock-ssh box sleep 121 & airlock-ssh box sleep 122 & wait")
	agents.Stdout, agents.Stderr = &agentOut, &agentOut
	if err := agents.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-agents.Process.Pid, syscall.SIGKILL)
	for _, ap := range b.pending(3) {
		if _, errs, code := b.cli("approvals", "approve", ap.ID); code != 0 {
			t.Fatalf("approve through B: %s", errs)
		}
	}
	testkit.EventuallyErr(t, func() error {
		if n := len(c.auditEntries(t, "action.connecting", "", "")); n < 3 {
			return fmt.Errorf("%d actions connected, want 3; agents: %s", n, agentOut.String())
		}
		return nil
	}, "A's actions to connect")
	// And one agent of A waiting for a reviewer.
	waiter := a.agent("airlock-ssh box echo never")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-waiter.Process.Pid, syscall.SIGKILL)
	c.pending(1)

	a.signal(syscall.SIGKILL)

	// The survivors finish A's work once its lease (3s) ran out.
	var finished []map[string]any
	testkit.EventuallyErr(t, func() error {
		finished = c.auditEntries(t, "action.finished", "", "")
		if pending := b.pendingNow(t); len(finished) < 3 || len(pending) != 0 {
			return fmt.Errorf("%d outcomes, %d still pending", len(finished), len(pending))
		}
		return nil
	}, "after A was killed")
	for _, f := range finished {
		if f["outcome"] != "interrupted" || !strings.Contains(f["detail"].(string), "lease") {
			t.Errorf("outcome %v %q, want interrupted after the lease", f["outcome"], f["detail"])
		}
	}
	expired := false
	for _, e := range c.auditEntries(t, "approval.decided", "", "") {
		expired = expired || e["status"] == "expired" && e["command"] == "echo never"
	}
	if !expired {
		t.Errorf("the request A's agent waited for was not expired for A's stop: %v", c.auditEntries(t, "approval.decided", "", ""))
	}
	// Exactly one outcome per action, even with two survivors sweeping.
	time.Sleep(4 * time.Second) // another sweep round of each survivor
	out, errs, code := b.cli("audit", "export")
	if code != 0 {
		t.Fatalf("export: %s", errs)
	}
	outcomes := map[string]int{}
	for line := range strings.Lines(out) {
		if strings.Contains(line, `"kind":"action.finished"`) {
			id := line[strings.Index(line, `"action_id":"`)+13:]
			outcomes[id[:strings.Index(id, `"`)]]++
		}
	}
	for id, n := range outcomes {
		if n != 1 {
			t.Errorf("action %s has %d outcomes", id, n)
		}
	}
	if len(outcomes) != 3 {
		t.Errorf("%d actions have an outcome, want 3", len(outcomes))
	}
	for _, d := range []*daemon{b, c} {
		if out, errs, code := d.cli("audit", "verify"); code != 0 || !strings.HasPrefix(out, "intact") {
			t.Errorf("verify: %d %s %s", code, out, errs)
		}
	}
	// The survivors still take actions.
	runApproved(t, c, "echo after")
}

// pendingNow lists the pending approvals without waiting for any.
func (d *daemon) pendingNow(t *testing.T) []api.Approval {
	t.Helper()
	out, errs, code := d.cli("approvals", "list", "--json")
	if code != 0 {
		t.Fatalf("approvals list: %s", errs)
	}
	var list []api.Approval
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("approvals list --json: %v: %s", err, out)
	}
	return list
}
