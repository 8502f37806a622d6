package main

import (
	"os"
	"slices"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
)

// TestMCPStdioAnswersBeforeTheHostGivesUp: the TypeScript SDK with its
// default request timeout and no wait_s, through `airlock mcp`, gets
// ssh_exec's answer by mcp.max_wait with the action waiting for its
// reviewer. The bridge's stream to the gateway outlives the call (the
// socket cancels an action whose stream closes), the host's cancel of the
// answered request leaves the approval pending, and get_action follows the
// action to its end once a reviewer approves.
func TestMCPStdioAnswersBeforeTheHostGivesUp(t *testing.T) {
	t.Parallel()
	cmd := mcptest.WaitClient(t, "stdio") // skips or fails before a gateway starts
	d := startMCPDaemonWith(t, mcpApprovalTimeout, "mcp {\n  max_wait = \"2s\"\n}\n")
	airlock, _ := binaries(t)
	cmd.Args = append(cmd.Args, airlock, "mcp")
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket, "AIRLOCK_CONFIG="+d.cfgFile, "XDG_DATA_HOME="+t.TempDir())
	mcptest.RunWaitClient(t, cmd, mcptest.Reviewer{
		Pending: func(id string) bool {
			return slices.ContainsFunc(d.pendingNow(t), func(a api.Approval) bool { return a.ID == id })
		},
		Approve: func(id string) {
			if _, errs, code := d.cli("approvals", "approve", id); code != 0 {
				t.Errorf("approve %s: %s", id, errs)
			}
		},
	})
}
