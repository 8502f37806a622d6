package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// e2eRunRenews: an agent under airlock run (a local anchor that lives on)
// whose run approval ran out is not a dead end: airlock-ssh's next action
// asks for a renewal of the run — approvals list names the run it renews,
// in its table and in --json — and, approved, runs in the new run; the
// anchor process is the same.
func e2eRunRenews(t *testing.T, d *daemon) { runRenews(t, d, d) }

// TestReplicaRunRenews: with two replicas sharing PostgreSQL, an agent
// under airlock run through replica A renews its run, the renewal asked
// and approved through replica B.
func TestReplicaRunRenews(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	ds := replicas(t, s, pgtest.Shared(t).NewDatabase(t), 2, "run", "")
	runRenews(t, ds[0], ds[1])
}

// runRenews is e2eRunRenews with the agent on gateway a and the reviewer
// on gateway d (replicas of one state, or the same gateway).
func runRenews(t *testing.T, a, d *daemon) {
	airlock, _ := binaries(t)
	gate := filepath.Join(t.TempDir(), "go-on")
	var out lockedBuffer
	agent := a.agent(airlock + " run -- sh -c 'airlock-ssh box echo before; while [ ! -e " + gate + " ]; do sleep 0.1; done; airlock-ssh box echo after'")
	agent.Stdout, agent.Stderr = &out, &out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	first := d.pending(1)[0]
	// Long enough for the first action to finish on a busy machine: a
	// run's end cancels what it still runs.
	if _, errs, code := d.cli("approvals", "approve", first.ID, "--ttl", "6s"); code != 0 {
		t.Fatalf("approve --ttl 6s: %s", errs)
	}
	testkit.Eventually(t, func() bool { return strings.Contains(out.String(), "before\n") },
		"the first action to run before the run's approval runs out:\n%s", out.String())
	// The run's approval runs out (the gateway's timer ends it), then the
	// agent acts again.
	d.waitInactive(t, first.RunID)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	renewal := d.pending(1)[0]
	if renewal.Kind != "run" || renewal.Renews != first.RunID || renewal.RunID == first.RunID {
		t.Fatalf("renewal request = %+v; want a run request of a new run that renews %s", renewal, first.RunID)
	}
	if table, _, _ := d.cli("approvals", "list"); !strings.Contains(table, renewal.ID+" renews run "+first.RunID) {
		t.Errorf("approvals list does not say what the request renews:\n%s", table)
	}
	if show, _, _ := d.cli("approvals", "show", renewal.ID); !strings.Contains(show, "run "+first.RunID+": its approval ran out") {
		t.Errorf("approvals show does not say what the request renews:\n%s", show)
	}
	// airlock run keeps watching for a reviewer's revocation while the
	// renewal waits: it must follow the run to its renewal, not take the
	// old run's end for one and kill the agent.
	time.Sleep(2*revokePoll + time.Second)
	if _, errs, code := d.cli("approvals", "approve", renewal.ID); code != 0 {
		t.Fatalf("approve the renewal: %s", errs)
	}
	if err := waitBounded(t, agent); err != nil {
		t.Fatalf("agent: %v\n%s", err, out.String())
	}
	if got := out.String(); !strings.Contains(got, "before\n") || !strings.Contains(got, "after\n") {
		t.Errorf("agent output %q; want both actions to run", got)
	}
	if run := d.anyRun(t, renewal.RunID); run.Renews != first.RunID || run.Anchor == nil {
		t.Errorf("the renewal run = %+v; want one of the same anchor that renews %s", run, first.RunID)
	}
}

// waitInactive waits until run id is no longer active (its approval ran
// out: the gateway's timer ended it).
func (d *daemon) waitInactive(t *testing.T, id string) {
	t.Helper()
	testkit.EventuallyErr(t, func() error {
		got, errs, code := d.cli("runs", "list", "--json")
		if code != 0 {
			return testkit.Stop(errors.New("runs list: " + errs))
		}
		if strings.Contains(got, id) {
			return errors.New("the run is still active")
		}
		return nil
	}, "the run's approval to run out")
}

// TestMCPStdioRunRenews: an airlock mcp session whose run's approval ran
// out asks, at its next call, for a renewal that a reviewer approves,
// and the call then runs in the new run of the same airlock mcp process.
func TestMCPStdioRunRenews(t *testing.T) {
	t.Parallel()
	d := startMCPDaemon(t, mcpApprovalTimeout)
	cs, events, _ := startMCP(t, d.socket)
	call := func(command string) <-chan *sdk.CallToolResult {
		done := make(chan *sdk.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), execParams(map[string]any{"target": "box-run", "command": command}))
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		return done
	}
	done := call("echo first")
	events.Wait(t, api.StateWaitingApproval)
	first := d.pending(1)[0]
	// Long enough for the first call to finish on a busy machine: a run's
	// end cancels what it still runs.
	if _, errs, code := d.cli("approvals", "approve", first.ID, "--ttl", "6s"); code != 0 {
		t.Fatalf("approve --ttl 6s: %s", errs)
	}
	if a := mcptest.Structured[api.Action](t, <-done); !a.Success() {
		t.Fatalf("first call: %+v", a)
	}
	anchor := d.anyRun(t, first.RunID).Anchor
	d.waitInactive(t, first.RunID)

	done = call("echo renewed")
	wait := events.Wait(t, api.StateWaitingApproval)
	renewal := d.pending(1)[0]
	if renewal.Renews != first.RunID || renewal.ID != wait.ApprovalID || !strings.Contains(wait.Message, "renews run "+first.RunID) {
		t.Fatalf("renewal %+v, waiting event %+v; want a renewal of %s", renewal, wait, first.RunID)
	}
	if r := d.anyRun(t, renewal.RunID); r.Anchor == nil || anchor == nil || r.Anchor.PID != anchor.PID || r.Anchor.StartTime != anchor.StartTime {
		t.Errorf("the renewal's anchor %+v is not the session's, %+v", r.Anchor, anchor)
	}
	if _, errs, code := d.cli("approvals", "approve", renewal.ID); code != 0 {
		t.Fatalf("approve the renewal: %s", errs)
	}
	res := <-done
	if a := mcptest.Structured[api.Action](t, res); res.IsError || a.Stdout != "renewed\n" || a.RunID != renewal.RunID {
		t.Errorf("call after the renewal: %+v\n%s", a, mcptest.Text(res))
	}
	if e := d.waitAudit(t, "approval.requested", "", renewal.RunID); e["renews"] != first.RunID {
		t.Errorf("approval.requested of the renewal: %v; want renews %s", e, first.RunID)
	}
}

// anyRun returns run id as runs list --all shows it, whatever its state.
func (d *daemon) anyRun(t *testing.T, id string) api.Run {
	t.Helper()
	out, errs, code := d.cli("runs", "list", "--all", "--json")
	if code != 0 {
		t.Fatalf("runs list --all: %s", errs)
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("runs list --all --json: %v", err)
	}
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no run %s in %s", id, out)
	return api.Run{}
}
