package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec"
)

// execAsync calls ssh_exec on cs and returns a channel with its result.
func execAsync(t *testing.T, cs *sdk.ClientSession, command string) <-chan *sdk.CallToolResult {
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), callParams("ssh_exec", map[string]any{"target": "box-run", "command": command}))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	return done
}

// TestMCPRunRenewsPastItsTTL: an MCP session over Streamable HTTP whose
// run's approval ran out is not a dead end. Its next call waits for a
// reviewer to approve a new run that names the one it renews (the API's
// approval object, the waiting event, the audit entry), then runs against
// the real sshd in the same session with the same token; the agent still
// reads its earlier actions. A denied renewal tells the agent not to
// retry without a human, and the next call asks nobody.
func TestMCPRunRenewsPastItsTTL(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	g := startGateway(t, sharedSSHD(t), gwOptions{options: func(o *Options) { o.clock = clk },
		mutate: func(c *config.Config) { c.Approval.RunTTL = time.Minute }})
	cs, l, run := connectHTTP(t, g)
	done := execAsync(t, cs, "echo first")
	g.decideNext("run", "approve", "")
	first := mcptest.Structured[api.Action](t, <-done)
	if !first.Success() || first.RunID != run.ID {
		t.Fatalf("first action: %+v", first)
	}
	l.Wait(t, api.StateWaitingApproval) // the first run's

	clk.Advance(time.Minute) // the run approval's TTL
	done = execAsync(t, cs, "echo renewed")
	wait := l.Wait(t, api.StateWaitingApproval)
	ap := g.decideNext("run", "approve", "")
	if ap.Renews != run.ID || ap.RunID == run.ID || ap.Run == nil || ap.Run.Renews != run.ID {
		t.Errorf("renewal request = run %s renews %q (run view %+v); want a new run that renews %s", ap.RunID, ap.Renews, ap.Run, run.ID)
	}
	if wait.ApprovalID != ap.ID || !strings.Contains(wait.Message, "renews run "+run.ID) {
		t.Errorf("the agent waited for %+v; want %s, saying it renews %s", wait, ap.ID, run.ID)
	}
	res := <-done
	renewed := mcptest.Structured[api.Action](t, res)
	if res.IsError || renewed.Stdout != "renewed\n" || renewed.RunID != ap.RunID {
		t.Fatalf("action after the renewal: %+v\n%s", renewed, mcptest.Text(res))
	}
	var requested bool
	for _, e := range g.auditEntries("approval.requested", "") {
		if e.Fields["approval_id"] == ap.ID {
			requested = e.Fields["renews"] == run.ID
		}
	}
	if !requested {
		t.Errorf("approval.requested of %s does not name the run it renews, %s", ap.ID, run.ID)
	}
	// The earlier run's actions are still the agent's to read.
	if res, err := cs.CallTool(context.Background(), callParams("get_action", map[string]any{"action_id": first.ID})); err != nil || res.IsError {
		t.Errorf("get_action of the action before the renewal: %v %s", err, mcptest.Text(res))
	}

	// Denied: the agent is told not to retry without a human, and its
	// next call is refused without asking anyone.
	clk.Advance(time.Minute)
	done = execAsync(t, cs, "echo again")
	g.decideNext("run", "deny", "stop here")
	res = <-done
	if a := mcptest.Structured[api.Action](t, res); a.Outcome != sshexec.Denied || a.NextStep == nil || a.NextStep.Who != api.WhoReviewer || !strings.Contains(mcptest.Text(res), "do not retry without asking a human") {
		t.Errorf("denied renewal: %+v\n%s", a, mcptest.Text(res))
	}
	// Over HTTP the token of a denied run no longer opens the session.
	if res, err := cs.CallTool(context.Background(), callParams("ssh_exec", map[string]any{"target": "box-run", "command": "echo after"})); err == nil {
		t.Errorf("a call after a denied renewal was let in: %s", mcptest.Text(res))
	}
	if p, err := g.reviewer.Approvals(context.Background(), "pending"); err != nil || len(p) != 0 {
		t.Errorf("pending after the denial: %v, %v; want none", p, err)
	}
	g.verifyAudit()
}

// TestRevokedRunNeverRenews: a run a reviewer ended stays refused for its
// token, with a reviewer as who to ask, and no renewal is requested.
func TestRevokedRunNeverRenews(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	cs, _, run := connectHTTP(t, g)
	done := execAsync(t, cs, "true")
	g.decideNext("run", "approve", "")
	<-done
	if err := g.reviewer.EndRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), callParams("ssh_exec", map[string]any{"target": "box-run", "command": "true"}))
	if err == nil && !res.IsError {
		t.Fatalf("a call after the run was revoked ran: %s", mcptest.Text(res))
	}
	if p, err := g.reviewer.Approvals(context.Background(), "pending"); err != nil || len(p) != 0 {
		t.Errorf("pending after the revocation: %v, %v; want none", p, err)
	}
}

// TestRevokedAgentsRunNeverRenews: a run whose approval ran out is not
// renewed once the agent token it was created with is revoked; the call
// is rejected saying why, and its next step names who can act instead of
// blaming the request.
func TestRevokedAgentsRunNeverRenews(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	g := startGateway(t, sharedSSHD(t), gwOptions{options: func(o *Options) { o.clock = clk },
		mutate: func(c *config.Config) { c.Approval.RunTTL = time.Minute }})
	cs, _, _ := connectHTTP(t, g) // its agent is "test-agent"
	done := execAsync(t, cs, "true")
	g.decideNext("run", "approve", "")
	<-done
	clk.Advance(time.Minute)
	if _, err := g.srv.eng.Admin().RevokeAgent(context.Background(), "test-agent", "operator"); err != nil {
		t.Fatal(err)
	}
	res := <-execAsync(t, cs, "true")
	a := mcptest.Structured[api.Action](t, res)
	if a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "may not be renewed") || !strings.Contains(a.Detail, "revoked") {
		t.Errorf("call after the agent's revocation: %+v", a)
	}
	if s := a.NextStep; s == nil || s.Who != api.WhoOperator || s.Retry != api.RetryNo || strings.Contains(mcptest.Text(res), "fix the request") {
		t.Errorf("next step %+v\n%s", s, mcptest.Text(res))
	}
	if p, err := g.reviewer.Approvals(context.Background(), "pending"); err != nil || len(p) != 0 {
		t.Errorf("pending: %v, %v; want no renewal asked", p, err)
	}
}
