package gateway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/opa/opatest"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
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

// TestPolicyGrantCoversARepeatNotAVariant: a reviewer approves a call
// with a grant; the same action again passes, recorded as covered by that
// approval's grant, and a variant asks again.
func TestPolicyGrantCoversARepeatNotAVariant(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].MaxGrant = 10 * time.Minute
	}})
	ctx := context.Background()
	req := api.ActionRequest{Target: "box-call", Command: "uname -s", TimeoutS: 30}

	// Over the account's bound: refused, nothing decided.
	res := g.runAsync(req)
	first := g.waitPending(1)[0]
	if first.MaxGrantS != 600 {
		t.Errorf("the pending call offers a grant of %ds, want 600", first.MaxGrantS)
	}
	if _, err := g.reviewer.Decide(ctx, first.ID, api.DecisionRequest{Decision: "approve", Digest: first.Digest, GrantS: 601}); err == nil || !strings.Contains(err.Error(), "max_grant") {
		t.Fatalf("a grant over max_grant: %v", err)
	}
	decided, err := g.reviewer.Decide(ctx, first.ID, api.DecisionRequest{Decision: "approve", Digest: first.Digest, GrantS: 300})
	if err != nil || decided.GrantUntil == nil {
		t.Fatalf("approve with a grant: %v %+v", err, decided)
	}
	if r := <-res; r.err != nil || !r.a.Success() || r.a.Approval.GrantUntil != nil {
		t.Fatalf("the approved action: %v %+v", r.err, r.a)
	}

	// The repeat: no one is asked, and it says which grant let it pass.
	a, err := g.agent.RunAction(ctx, req, api.Events{State: func(e api.StateEvent) {
		if e.State == api.StateWaitingApproval {
			t.Error("the repeat waited for a reviewer")
		}
	}})
	if err != nil || !a.Success() || a.Approval.ID != first.ID || a.Approval.GrantUntil == nil || !a.Approval.GrantUntil.Equal(*decided.GrantUntil) {
		t.Fatalf("repeat: %v %+v", err, a)
	}
	fin := g.auditEntries("action.finished", a.ID)
	if len(fin) != 1 || fin[0].Fields["approval_id"] != first.ID || fin[0].Fields["grant_until"] == nil {
		t.Errorf("the repeat's action.finished: %+v", fin)
	}
	if d := g.auditEntries("approval.decided", ""); !hasField(d, "grant_until") {
		t.Errorf("approval.decided does not record the grant: %+v", d)
	}

	// A variant (another timeout) asks again.
	variant := req
	variant.TimeoutS = 31
	res = g.runAsync(variant)
	g.decideNext("call", "deny", "not this one")
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
		t.Fatalf("variant: %v %+v", r.err, r.a)
	}
	g.verifyAudit()
}

// hasField reports whether one of the entries has field name.
func hasField(entries []auditEntry, name string) bool {
	for _, e := range entries {
		if e.Fields[name] != nil {
			return true
		}
	}
	return false
}

// TestPolicyQuotaStopsALoop: an agent looping inside an approved run is
// stopped by the account's per-run quota, with nothing dialed past it.
func TestPolicyQuotaStopsALoop(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-run"].Accounts[s.User].Quota = approvals.Quota{PerRun: 3}
	}})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("first: %v %+v", r.err, r.a)
	}
	var stopped *api.Action
	for i := 2; i <= 6 && stopped == nil; i++ {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "true"}, api.Events{})
		switch {
		case err != nil:
			t.Fatal(err)
		case a.Outcome == sshexec.Rejected:
			if i != 4 {
				t.Fatalf("action %d was the first refused, want the 4th", i)
			}
			stopped = a
		case !a.Success():
			t.Fatalf("action %d: %+v", i, a)
		}
	}
	if stopped == nil || !strings.Contains(stopped.Detail, "quota of 3 actions") || !strings.Contains(stopped.Detail, "quota.per_run") {
		t.Fatalf("the loop was not stopped by its quota: %+v", stopped)
	}
	if c := g.auditEntries("action.connecting", stopped.ID); len(c) != 0 {
		t.Error("the action past the quota was dialed")
	}
	g.verifyAudit()
}

// TestPolicyUnreviewedReadOnly: an account that lets read_only commands
// through unreviewed runs them with no reviewer, recorded as such; a
// mutating command still asks.
func TestPolicyUnreviewedReadOnly(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	secretFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secretFile, []byte("unreviewed-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("secret \"tok\" {\n  file = %q\n  accounts = [\"box-call\"]\n}\n", secretFile)
	g := startGateway(t, s, gwOptions{extraConfig: extra, mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].AllowUnreviewed = []classify.Class{classify.ReadOnly}
	}})
	ctx := context.Background()
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "uptime"}, api.Events{})
	if err != nil || !a.Success() || a.Approval.Mode != api.ModeUnreviewed || a.Approval.DecidedBy != "" {
		t.Fatalf("read-only: %v %+v", err, a)
	}
	if rq := g.auditEntries("action.requested", a.ID); len(rq) != 1 || rq[0].Fields["unreviewed"] != true {
		t.Errorf("action.requested: %+v", rq)
	}
	if fin := g.auditEntries("action.finished", a.ID); len(fin) != 1 || fin[0].Fields["approval_mode"] != "unreviewed" {
		t.Errorf("action.finished: %+v", fin)
	}
	// A mutating command, a gateway-held secret (which a read-only
	// program could print in a form the mask misses) and what looks like
	// a credential all still ask.
	for _, req := range []api.ActionRequest{
		{Target: "box-call", Command: "touch /tmp/airlock-unreviewed-test"},
		{Target: "box-call", Command: "base64", Secret: "tok"},
		{Target: "box-call", Command: "echo ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"},
		{Target: "box-call", Command: "echo \"x\tghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8\" | base64"},
	} {
		res := g.runAsync(req)
		ap := g.decideNext("call", "deny", "")
		if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
			t.Fatalf("%q: %v %+v", req.Command, r.err, r.a)
		}
		if strings.Contains(ap.ClassReason+ap.Command, "ghp_A1b2") {
			t.Errorf("the credential shows: %q / %q", ap.Command, ap.ClassReason)
		}
	}
	g.verifyAudit()
}

// opaPolicy refuses destructive and stronger commands on box-run only.
const opaPolicy = `package airlock

default decision := {"allow": true, "rule": "default-allow"}

decision := {"allow": false, "rule": "box-run-no-destructive", "reason": "box-run takes no destructive commands"} if {
	input.resource.properties.target == "box-run"
	input.action.name in {"destructive", "privileged", "forbidden"}
	input.subject.type == "agent"
}
`

// TestPolicyOPADeniesAClassOnOneTarget: a real OPA server refuses
// destructive commands on one target; elsewhere its allow changes
// nothing a reviewer decides; when it is gone the gateway fails closed.
func TestPolicyOPADeniesAClassOnOneTarget(t *testing.T) {
	t.Parallel()
	srv := opatest.Start(t, map[string]string{"airlock.rego": opaPolicy})
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.OPA = &config.OPA{URL: srv.URL + "/v1/data/airlock/decision", Timeout: 10 * time.Second, FailClosed: true}
	}})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "ls /"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() {
		t.Fatalf("read-only on box-run: %v %+v", r.err, r.a)
	}
	if rq := g.auditEntries("action.requested", r.a.ID); len(rq) != 1 || rq[0].Fields["opa_decision"] != "allow" || rq[0].Fields["opa_rule"] != "default-allow" {
		t.Errorf("the allow is not recorded: %+v", rq)
	}
	// Refused on box-run, inside the approved run, with nothing dialed.
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "rm -f /tmp/airlock-opa-test"}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "rule box-run-no-destructive") || !strings.Contains(a.Detail, "takes no destructive") {
		t.Fatalf("destructive on box-run: %v %+v", err, a)
	}
	if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
		t.Error("the refused action was dialed")
	}
	if rq := g.auditEntries("action.requested", a.ID); len(rq) != 1 || rq[0].Fields["opa_decision"] != "deny" || rq[0].Fields["opa_rule"] != "box-run-no-destructive" {
		t.Errorf("the deny is not recorded: %+v", rq)
	}
	// Allowed on box-call: it still waits for its reviewer, who denies.
	res = g.runAsync(api.ActionRequest{Target: "box-call", Command: "rm -f /tmp/airlock-opa-test"})
	g.decideNext("call", "deny", "")
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
		t.Fatalf("destructive on box-call: %v %+v", r.err, r.a)
	}
	// OPA gone: refused, said so.
	srv.Kill()
	a, err = g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "ls /"}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "fail_closed") {
		t.Fatalf("OPA gone: %v %+v", err, a)
	}
	if rq := g.auditEntries("action.requested", a.ID); len(rq) != 1 || rq[0].Fields["opa_decision"] != "error" || rq[0].Fields["opa_fail_closed"] != true {
		t.Errorf("the error is not recorded: %+v", rq)
	}
	g.verifyAudit()
}

// actionPolicy is the airlock-action policy of TestPolicyJudgesAirlockActionVerbs,
// on the target and in the gateway's copy alike. DIR is a directory of
// the test's.
const actionPolicy = `
verb "status" {
  argv  = ["/bin/echo", "status of", "{service}"]
  param "service" { enum = ["web", "worker"] }
  class = "read_only"
}
verb "wipe" {
  argv = ["/bin/rm", "-f", "{file}"]
  param "file" { path_under = "DIR/data" }
}
`

// TestPolicyJudgesAirlockActionVerbs: an account whose forced command is
// airlock-action is judged by the verbs of its policy (the gateway holds
// a copy): a declared read_only verb passes inside an approved run, a
// verb that runs rm escalates, and a request naming no verb, or a shell
// line, is refused before anything is dialed. Through a real sshd and a
// real airlock-action.
func TestPolicyJudgesAirlockActionVerbs(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	keyFile, polFile, dir := airlockActionAccount(t, s, actionPolicy)
	victim := filepath.Join(dir, "data", "lock")
	if err := os.WriteFile(victim, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{clientKey: keyFile, mutate: func(c *config.Config) {
		p, err := policy.Load(polFile)
		if err != nil {
			t.Fatal(err)
		}
		a := c.Targets["box-run"].Accounts[s.User]
		a.ActionPolicy, a.ActionPolicyFile = p, polFile
		a.Escalate = []classify.Class{classify.Destructive}
	}})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "status web"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "status of web\n" || r.a.Class != "read_only" {
		t.Fatalf("status web: %v %+v", r.err, r.a)
	}
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "status worker"}, api.Events{})
	if err != nil || !a.Success() || a.Approval.Mode != "run" {
		t.Fatalf("status worker inside the run: %v %+v", err, a)
	}
	// wipe runs rm: destructive, so a call approval of its own.
	res = g.runAsync(api.ActionRequest{Target: "box-run", Command: "wipe " + victim})
	ap := g.decideNext("call", "approve", "")
	if ap.Class != "destructive" || !strings.Contains(ap.ClassReason, "verb wipe of the action policy runs /bin/rm -f") || !strings.Contains(ap.Escalation, "inside approved run") {
		t.Errorf("the reviewer saw %q: %q / %q", ap.Class, ap.ClassReason, ap.Escalation)
	}
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("wipe: %v %+v", r.err, r.a)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Errorf("the approved wipe did not run: %v", err)
	}
	// No verb, or a shell line: refused with nothing dialed.
	for _, cmd := range []string{"reboot", "status web; rm -rf /", "wipe /etc/passwd", "status db", "status ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"} {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: cmd}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "airlock-action policy") {
			t.Errorf("%q: %v %s %q", cmd, err, a.Outcome, a.Detail)
			continue
		}
		if strings.Contains(a.Detail, "ghp_A1b2") {
			t.Errorf("the refusal quotes the credential: %q", a.Detail)
		}
		if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
			t.Errorf("%q was dialed", cmd)
		}
	}
	g.verifyAudit()
}

// airlockActionAccount gives the shared sshd's account a key forced to a
// freshly built airlock-action with policySrc (DIR in it is a directory
// of the test's, with a data directory the login user may write), and
// returns the key file, the policy file and DIR.
func airlockActionAccount(t *testing.T, s *sshtest.SSHD, policySrc string) (keyFile, polFile, dir string) {
	t.Helper()
	dir = sshtest.SafeDir(t)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "data"), 0o777)
	polFile = filepath.Join(dir, "action.hcl")
	if err := os.WriteFile(polFile, []byte(strings.ReplaceAll(policySrc, "DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "airlock-action")
	build := exec.Command("go", "build", "-o", bin, "../cmd/airlock-action")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	keyFile = filepath.Join(t.TempDir(), "action_ed25519")
	pub, err := sshtest.GenerateKeyFile(keyFile, "ed25519", "")
	if err != nil {
		t.Fatal(err)
	}
	line, err := deploy.AuthorizedKeysLine(pub, deploy.LineOptions{Target: "box-action", Account: s.User, Command: bin + " --policy " + polFile})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Authorize(line); err != nil {
		t.Fatal(err)
	}
	return keyFile, polFile, dir
}
