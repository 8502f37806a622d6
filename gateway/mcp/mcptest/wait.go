package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
)

// Reviewer is what RunWaitClient needs of the gateway's reviewer side.
type Reviewer struct {
	// Pending reports whether the approval request is still waiting for
	// a decision.
	Pending func(approvalID string) bool
	// Approve approves it.
	Approve func(approvalID string)
}

// RunWaitClient runs cmd (WaitClient against a gateway whose mcp.max_wait
// is a few seconds) and checks that a host with the SDK's default request
// timeout and no wait_s is never left without its action: ssh_exec on
// box-call answers in flight (waiting_approval, the action id, why a
// reviewer is asked, how to follow it); the host's cancel of that
// answered request leaves the reviewer's request pending; once it is
// approved, get_action follows the action to its success.
func RunWaitClient(t testing.TB, cmd *exec.Cmd, rv Reviewer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(stdout, &out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var held mcp.ActionResult
	for sc.Scan() {
		var s struct {
			Step       string          `json:"step"`
			Structured json.RawMessage `json:"structured"`
		}
		json.Unmarshal(sc.Bytes(), &s)
		switch s.Step {
		case "held":
			json.Unmarshal(s.Structured, &held)
		case "cancelled_after_answer":
			if held.Approval.ID == "" {
				break
			}
			if !rv.Pending(held.Approval.ID) {
				t.Errorf("the host's cancel of the answered call withdrew approval %s", held.Approval.ID)
				break
			}
			rv.Approve(held.Approval.ID)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	steps := Steps(t, out.Bytes())
	h := Step(t, steps, "held")
	if h.Thrown || h.IsError || held.ID == "" || held.State != api.StateWaitingApproval || held.Outcome.Valid() ||
		held.Approval.Why == "" || held.Follow == nil || held.Follow.ActionID != held.ID {
		t.Errorf("held: the call did not answer in flight: %+v", h)
	}
	for _, want := range []string{held.ID, "waiting for a human reviewer", "because: " + held.Approval.Why, "get_action"} {
		if !strings.Contains(h.Text, want) {
			t.Errorf("held: the text lacks %q:\n%s", want, h.Text)
		}
	}
	f := Step(t, steps, "followed")
	var done mcp.ActionResult
	json.Unmarshal(f.Structured, &done)
	if f.Thrown || f.IsError || done.ID != held.ID || !done.Success() || done.Stdout != "waited-for-a-human\n" || done.Approval.Why != held.Approval.Why {
		t.Errorf("followed: %+v", f)
	}
	if _, ok := steps["closed"]; !ok {
		t.Error("the client did not close cleanly")
	}
}
