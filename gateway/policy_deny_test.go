package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// TestPolicyDenyPatternsReadTheShellForm: a deny pattern is matched
// against the line as the shell reads it, not only as sent: quotes,
// backslashes, a second command or an sh -c string do not slip past
// ^terraform\s+destroy, and the refusal says which reading matched,
// with what looks like a credential hidden. A line that only mentions
// the words still goes to its reviewer.
func TestPolicyDenyPatternsReadTheShellForm(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].DenyPatterns = []*regexp.Regexp{regexp.MustCompile(`^terraform\s+destroy`)}
	}})
	ctx := context.Background()
	for _, tt := range []struct{ cmd, want string }{
		{`terraform destroy`, `the command matches the account's deny pattern "^terraform\\s+destroy"`},
		{`"terraform" destroy`, `the command, as the shell reads it ("terraform destroy"), matches the account's deny pattern "^terraform\\s+destroy"`},
		{`terra\form  destroy`, `the command, as the shell reads it ("terraform destroy"), matches`},
		{`ls && 'terraform' destroy`, `a command in it, as the shell reads it ("terraform destroy"), matches the account's deny pattern "^terraform\\s+destroy"`},
		{`sh -c 'cd /srv; env TF_LOG=1 terraform destroy -auto-approve'`, `a command in it, as the shell reads it ("terraform destroy -auto-approve"), matches`},
		{`'terraform' destroy -var token=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8`, `as the shell reads it ("terraform destroy -var token=`},
	} {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: tt.cmd}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, tt.want) {
			t.Errorf("%q: %v %s %q; want it refused saying %q", tt.cmd, err, a.Outcome, a.Detail, tt.want)
			continue
		}
		if strings.Contains(a.Detail, "ghp_A1b2") {
			t.Errorf("the refusal quotes the credential: %q", a.Detail)
		}
		if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
			t.Errorf("%q was dialed", tt.cmd)
		}
	}
	// Words in an argument are no command: a reviewer is asked.
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: `echo "terraform destroy"`})
	g.decideNext("call", "deny", "")
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
		t.Fatalf("echo: %v %+v", r.err, r.a)
	}
	g.verifyAudit()
}

// TestPolicyOPADuplicateKeysFailClosed: an answer that names a key twice
// ({"allow": false, "allow": true}) is no decision, and fail_closed
// refuses the request, naming the key. A real OPA never sends one, so a
// server stands in for it.
func TestPolicyOPADuplicateKeysFailClosed(t *testing.T) {
	t.Parallel()
	opa := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"decision_id": "d-1", "result": {"allow": false, "rule": "deny-all", "allow": true}}`)
	}))
	defer opa.Close()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.OPA = &config.OPA{URL: opa.URL + "/v1/data/airlock/decision", Timeout: 10 * time.Second, FailClosed: true}
	}})
	a, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-call", Command: "ls /"}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "fail_closed") || !strings.Contains(a.Detail, `"allow" twice`) {
		t.Fatalf("a duplicated key: %v %+v", err, a)
	}
	if rq := g.auditEntries("action.requested", a.ID); len(rq) != 1 || rq[0].Fields["opa_decision"] != "error" || rq[0].Fields["opa_fail_closed"] != true {
		t.Errorf("the error is not recorded: %+v", rq)
	}
	if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
		t.Error("the refused action was dialed")
	}
	g.verifyAudit()
}
