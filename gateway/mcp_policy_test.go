package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
)

// TestMCPPolicyInView: an agent sees the account's policy before it acts
// (GET /v1/targets and list_targets, text and structured), and a call
// answered while it waits for a reviewer — and its log message — says why
// one is asked: the run's first approval, then the class the account
// escalates, with the command.
func TestMCPPolicyInView(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{extraConfig: "mcp {\n  max_wait = \"1s\"\n}\n", mutate: func(c *config.Config) {
		a := c.Targets["box-run"].Accounts[s.User]
		a.Escalate, a.Refuse, a.AllowUnreviewed = []classify.Class{classify.Destructive}, []classify.Class{classify.Forbidden}, []classify.Class{classify.ReadOnly}
	}})
	ctx := context.Background()
	ts, err := g.agent.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := api.AccountPolicy{Escalate: []string{"destructive", "privileged"}, Refuse: []string{"forbidden"}, AllowUnreviewed: []string{"read_only"},
		MaxTransferBytes: config.DefaultMaxTransfer, ApprovalTimeoutS: 20}
	if diff := cmp.Diff(want, ts[0].Accounts[0].AccountPolicy); ts[0].Name != "box-run" || diff != "" {
		t.Errorf("GET /v1/targets: %s account policy (-want +got):\n%s", ts[0].Name, diff)
	}

	cs, events, _ := connectHTTP(t, g)
	res, err := cs.CallTool(ctx, callParams("list_targets", map[string]any{}))
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %+v", err, res)
	}
	if got := mcptest.Structured[mcp.TargetList](t, res).Targets[0].Accounts[0].AccountPolicy; !cmp.Equal(want, got) {
		t.Errorf("list_targets structured policy %+v, want %+v", got, want)
	}
	line := "box-run account " + s.User + ", default account: approval per run; asks a call approval for destructive, privileged; refuses forbidden; runs unreviewed read_only; reviewer decides within 20s"
	if !strings.Contains(mcptest.Text(res), line) {
		t.Errorf("list_targets text lacks %q:\n%s", line, mcptest.Text(res))
	}

	// The run's first command waits for the run's approval; then a
	// destructive one waits for a call approval of its own.
	for _, step := range []struct{ command, kind, why string }{
		{"touch /tmp/airlock-policy-view", "run", "approval mode run: the run is not approved yet"},
		{"rm -f /tmp/airlock-policy-view", "call", "destructive: rm -f /tmp/airlock-policy-view"},
	} {
		res, err := cs.CallTool(ctx, callParams("ssh_exec", map[string]any{"target": "box-run", "command": step.command}))
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", step.command, err, mcptest.Text(res))
		}
		held := mcptest.Structured[mcp.ActionResult](t, res)
		if ev := events.Wait(t, api.StateWaitingApproval); !strings.Contains(ev.Message, step.why) {
			t.Errorf("%s: the waiting log message does not say why: %q", step.command, ev.Message)
		}
		if held.State != api.StateWaitingApproval || !strings.HasPrefix(held.Approval.Why, step.why) || !strings.Contains(mcptest.Text(res), "because: "+step.why) {
			t.Errorf("%s: state %s, why %q, text:\n%s", step.command, held.State, held.Approval.Why, mcptest.Text(res))
		}
		g.decideNext(step.kind, "approve", "")
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_action", Arguments: map[string]any{"action_id": held.ID, "wait_s": 60}})
		if done := mcptest.Structured[mcp.ActionResult](t, res); err != nil || !done.Success() || done.Approval.Why != held.Approval.Why {
			t.Errorf("%s: after approval: %v %+v", step.command, err, done)
		}
	}
}
