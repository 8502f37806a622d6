package mcp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/sshexec"
)

func TestSummary(t *testing.T) {
	t.Parallel()
	long := ""
	for i := range 500 {
		long += fmt.Sprintf("line %d\n", i)
	}
	for _, tt := range []struct {
		name   string
		action func(a *api.Action)
		want   []string
		absent []string
	}{
		{"success", func(a *api.Action) {}, []string{"exited with status 0 on box as deploy (action act_test)", "run approval granted by alice", "stdout:\nout\n", "stderr:\nerr"}, []string{"next:"}},
		{"failure", func(a *api.Action) { a.ExitCode = exitCode(2) }, []string{"exited with status 2", "next: the command ran and failed"}, nil},
		{"denied with a reason", func(a *api.Action) {
			a.Outcome, a.Detail, a.ExitCode, a.Stdout, a.Stderr, a.StdoutBytes, a.StderrBytes = sshexec.Denied, "a reviewer denied the call (alice)", nil, "", "", 0, 0
			a.Approval.Decision, a.Approval.Reason = "deny", "not on a Friday"
		}, []string{"denied: a reviewer denied the call (alice) on box as deploy", `call approval denied by alice ("not on a Friday")`, `next: the reviewer's reason: "not on a Friday"; do not retry without asking a human`}, []string{"stdout"}},
		{"rejected", func(a *api.Action) {
			a.Outcome, a.Detail, a.ExitCode, a.Stdout, a.Stderr, a.StdoutBytes, a.StderrBytes = sshexec.Rejected, `unknown target "nosuch" (targets: box)`, nil, "", "", 0, 0
			a.Target, a.Approval = "nosuch", api.ApprovalInfo{}
		}, []string{`rejected: unknown target "nosuch" (targets: box) (action act_test)`, "next: fix the request"}, []string{"on nosuch"}},
		{"policy tail", func(a *api.Action) { a.StdoutBytes, a.StdoutTruncated = 102404, true }, []string{"[stdout truncated: the command wrote 102404 bytes, 4 were returned"}, nil},
		{"policy none", func(a *api.Action) { a.Stdout, a.StdoutTruncated = "", true }, []string{"stdout: 4 bytes, none returned"}, nil},
		{"binary", func(a *api.Action) { a.Stdout, a.StdoutEncoding = "AAEC", api.EncodingBase64 }, []string{"stdout: 4 bytes of binary output (base64 in the structured result)"}, []string{"AAEC"}},
		{"in flight", func(a *api.Action) {
			a.Outcome, a.State, a.FinishedAt, a.ExitCode = 0, api.StateWaitingApproval, nil, nil
		}, []string{"waiting_approval: still in flight (make deploy) on box as deploy"}, []string{"next:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := finished(sshexec.Exited, exitCode(0))
			a.Approval.Mode = "run"
			if strings.HasPrefix(tt.name, "denied") {
				a.Approval.Mode = "call"
			}
			tt.action(a)
			got := mcp.Summary(&mcp.ActionResult{Action: *a})
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.absent {
				if strings.Contains(got, w) {
					t.Errorf("summary has %q:\n%s", w, got)
				}
			}
		})
	}
}
