package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec"
)

// TestSpentBudgetIsNotExpiry: a run approved for one action is refused
// at its second saying its action budget (1) is spent — not that it
// expired, not "fix the request" — with a reviewer as who acts next, in
// the action object (detail, next_step) and in the MCP text; the retry
// asks a reviewer for a new run that renews it.
func TestSpentBudgetIsNotExpiry(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	cs, _, run := connectHTTP(t, g)
	done := execAsync(t, cs, "true")
	g.decideNextWith("run", api.DecisionRequest{Decision: api.DecisionApprove, MaxActions: 1})
	<-done
	res, err := cs.CallTool(context.Background(), callParams("ssh_exec", map[string]any{"target": "box-run", "command": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	a, text := mcptest.Structured[api.Action](t, res), mcptest.Text(res)
	if a.Outcome != sshexec.Rejected || a.Detail != "the run's action budget (1) is spent" {
		t.Errorf("second action: %s %q; want rejected, the run's action budget (1) is spent", a.Outcome, a.Detail)
	}
	if s := a.NextStep; s == nil || s.Who != api.WhoReviewer || s.Retry != api.RetryYes || !strings.Contains(s.Text, "reviewer to approve a new run") {
		t.Errorf("next step %+v; want a retry that asks a reviewer for a new run", s)
	}
	for _, bad := range []string{"expired", "fix the request"} {
		if strings.Contains(text, bad) {
			t.Errorf("MCP text says %q:\n%s", bad, text)
		}
	}
	done = execAsync(t, cs, "true")
	if ap := g.decideNextWith("run", api.DecisionRequest{Decision: api.DecisionApprove}); ap.Renews != run.ID {
		t.Errorf("the retry asked for %+v; want a run that renews %s", ap, run.ID)
	}
	if res := <-done; res.IsError {
		t.Errorf("the action after the renewal: %s", mcptest.Text(res))
	}
}
