package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
)

// TestMCPHTTPAnswersBeforeTheHostGivesUp: the TypeScript SDK with its
// default request timeout and no wait_s, over /mcp, gets ssh_exec's answer
// by mcp.max_wait with the action waiting for its reviewer; its cancel of
// that answered request leaves the approval pending, and get_action
// follows the action to its end once a reviewer approves.
func TestMCPHTTPAnswersBeforeTheHostGivesUp(t *testing.T) {
	t.Parallel()
	cmd := mcptest.WaitClient(t, "http") // skips or fails before a gateway starts
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: "mcp {\n  max_wait = \"2s\"\n}\n"})
	run, err := g.agentClient(t, "test-agent").CreateRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cmd.Args = append(cmd.Args, g.base+"/mcp", run.Token)
	mcptest.RunWaitClient(t, cmd, reviewerOf(g))
}

// reviewerOf is g's reviewer as mcptest.RunWaitClient drives it.
func reviewerOf(g *testGateway) mcptest.Reviewer {
	pending := func(id string) (api.Approval, bool) {
		list, err := g.reviewer.Approvals(context.Background(), "pending")
		if err != nil {
			g.t.Fatal(err)
		}
		i := slices.IndexFunc(list, func(a api.Approval) bool { return a.ID == id })
		if i < 0 {
			return api.Approval{}, false
		}
		return list[i], true
	}
	return mcptest.Reviewer{
		Pending: func(id string) bool {
			_, ok := pending(id)
			return ok
		},
		Approve: func(id string) {
			a, _ := pending(id)
			if _, err := g.reviewer.Decide(context.Background(), id, api.DecisionRequest{Decision: api.DecisionApprove, Digest: a.Digest}); err != nil {
				g.t.Errorf("approve %s: %v", id, err)
			}
		},
	}
}
