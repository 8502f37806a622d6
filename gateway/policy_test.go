package gateway

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// TestPolicyEscalatesInsideARun: inside an approved run, read-only
// commands pass, a destructive one waits for its own call approval, a
// forbidden one and a denied pattern are rejected with nothing dialed.
func TestPolicyEscalatesInsideARun(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		a := c.Targets["box-run"].Accounts[s.User]
		a.Escalate = []classify.Class{classify.Destructive}
		a.Refuse = []classify.Class{classify.Forbidden}
		a.DenyPatterns = []*regexp.Regexp{regexp.MustCompile(`^terraform\s+destroy`)}
	}})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "ls /"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() || r.a.Class != "read_only" {
		t.Fatalf("first action: %v %+v", r.err, r.a)
	}
	// Read-only: covered by the run.
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "cat /etc/hostname | wc -c"}, api.Events{})
	if err != nil || !a.Success() || a.Approval.Mode != "run" {
		t.Fatalf("read-only inside the run: %v %+v", err, a)
	}
	// Destructive: a call approval of its own, which says why.
	res = g.runAsync(api.ActionRequest{Target: "box-run", Command: "true && rm -f /tmp/airlock-escalation-test"})
	ap := g.decideNext("call", "approve", "")
	if ap.Class != "destructive" || !strings.Contains(ap.Escalation, "inside approved run "+ap.RunID+", the account's policy escalates destructive commands") || !strings.Contains(ap.ClassReason, `"rm -f /tmp/airlock-escalation-test"`) {
		t.Errorf("the reviewer saw class %q, escalation %q, reason %q", ap.Class, ap.Escalation, ap.ClassReason)
	}
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Approval.Mode != "call" {
		t.Fatalf("escalated action: %v %+v", r.err, r.a)
	}
	if req := g.auditEntries("action.requested", r.a.ID); len(req) != 1 || req[0].Fields["class"] != "destructive" || req[0].Fields["escalation"] == nil {
		t.Errorf("action.requested: %+v", req)
	}
	// Forbidden and denied: rejected before anything is dialed.
	for _, tt := range []struct{ cmd, want string }{
		{"echo '* * * * * id' >> /etc/cron.d/x", "refuses forbidden"},
		{"terraform destroy -auto-approve", "deny pattern"},
	} {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: tt.cmd}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, tt.want) {
			t.Errorf("%q: %v %s %q", tt.cmd, err, a.Outcome, a.Detail)
			continue
		}
		if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
			t.Errorf("%q was dialed", tt.cmd)
		}
	}
	// Nothing is pending: read-only and refused commands asked no one.
	if pending, _ := g.reviewer.Approvals(ctx, "pending"); len(pending) != 0 {
		t.Errorf("pending approvals: %+v", pending)
	}
	g.verifyAudit()
}
