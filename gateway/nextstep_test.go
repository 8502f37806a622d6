package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// TestTimedOutMayHaveRunInPart: a command the deadline killed on a real
// target, its end confirmed, may have done part of its work: its next step
// is to check (after_check), not to retry, and it says so without naming
// one client's flag. Read back, the action says the same.
func TestTimedOutMayHaveRunInPart(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo step one done; sleep 60", TimeoutS: 1})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.TimedOut || r.a.Termination != sshexec.Confirmed || r.a.Stdout != "step one done\n" {
		t.Fatalf("got %+v %v, want timed_out, its kill confirmed, with the output so far", r.a, r.err)
	}
	back, err := g.agent.Action(ctx, r.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]*api.Action{"answer": r.a, "read back": back} {
		step := a.NextStep
		if step == nil || step.Retry != api.RetryAfterCheck || step.Who != api.WhoAgent || !strings.Contains(step.Text, "may have run in part") ||
			strings.Contains(step.Text, "--timeout") || strings.Contains(step.Text, "timeout_s") {
			t.Fatalf("%s: next step %+v, want after_check by the agent, saying it may have run in part", name, step)
		}
		if got := api.NextStep(a); got != step.Text {
			t.Errorf("%s: the printed next step %q is not the object's %q", name, got, step.Text)
		}
	}
}
