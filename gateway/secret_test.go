package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestSecretDeliveredOnStdin: a gateway-held secret reaches a real sshd
// command on its standard input, and its value is nowhere else — not in
// the audit log, the output store, their WAL files, the state database,
// the logs, any API answer, the live stream or the agent's result.
func TestSecretDeliveredOnStdin(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	value := "pw-" + rand.Text()
	secretFile := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(secretFile, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf(`secret "db-password" {
  file     = %q
  accounts = ["box-run/%s", "box-tail"]
}
`, secretFile, s.User)
	g := startGateway(t, s, gwOptions{extraConfig: extra})
	ctx := context.Background()

	// The command reads the secret, proves it got it (its digest), and
	// then writes it out on both streams, as a careless script would.
	var live bytes.Buffer
	var mu sync.Mutex
	ch := make(chan actionResult, 1)
	go func() {
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Secret: "db-password",
			Command: `v=$(cat); printf '%s' "$v" | sha256sum | cut -c1-64; echo "echo: $v"; echo "err: $v" >&2; printf '%s%s' "$v" "$v"`},
			api.Events{Output: func(stream string, p []byte) {
				mu.Lock()
				live.Write(p)
				mu.Unlock()
			}})
		ch <- actionResult{a: a, err: err}
	}()
	ap := g.decideNext("call", "approve", "") // a secret is always asked on its own
	if ap.Secret != "db-password" || ap.StdinBytes != 0 {
		t.Errorf("the reviewer's view: secret %q, stdin %d bytes", ap.Secret, ap.StdinBytes)
	}
	r := <-ch
	if r.err != nil || !r.a.Success() {
		t.Fatalf("action: %v %+v", r.err, r.a)
	}
	sum := sha256.Sum256([]byte(value))
	wantOut := hex.EncodeToString(sum[:]) + "\necho: [secret db-password]\n[secret db-password][secret db-password]"
	if r.a.Stdout != wantOut || r.a.Stderr != "err: [secret db-password]\n" {
		t.Errorf("output:\n%q\n%q\nwant\n%q", r.a.Stdout, r.a.Stderr, wantOut)
	}
	if r.a.Secret != "db-password" || r.a.SecretReplacements != 4 || r.a.StdinBytes != 0 || r.a.StdinSHA256 != "" {
		t.Errorf("action object: secret %q, %d replacements, stdin %d %q", r.a.Secret, r.a.SecretReplacements, r.a.StdinBytes, r.a.StdinSHA256)
	}
	if r.a.StdoutBytes != int64(len(wantOut)) {
		t.Errorf("stdout_bytes %d, want the replaced output's %d", r.a.StdoutBytes, len(wantOut))
	}
	req := g.auditEntries("action.requested", r.a.ID)
	if len(req) != 1 || req[0].Fields["secret"] != "db-password" || req[0].Fields["secret_grant"] != "box-run/"+s.User || req[0].Fields["stdin_sha256"] != nil {
		t.Errorf("action.requested: %+v", req)
	}
	if fin := g.auditEntries("action.finished", r.a.ID); len(fin) != 1 || fin[0].Fields["secret_replacements"] != float64(4) {
		t.Errorf("action.finished: %+v", fin)
	}

	// A tail account, and every way the agent and a reviewer read back.
	res := g.runAsync(api.ActionRequest{Target: "box-tail", Secret: "db-password", Command: `cat`})
	g.decideNext("call", "approve", "")
	tail := <-res
	a, err := tail.a, tail.err
	if err != nil || !a.Success() || a.Stdout != "[secret db-password]\n" {
		t.Fatalf("tail account: %v %+v", err, a)
	}
	answers := g.readBack(t, r.a.ID, a.ID)
	for _, b := range answers {
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("an API answer holds the secret's value: %s", b)
		}
	}
	if !strings.Contains(string(answers[0]), "[secret db-password]") {
		t.Errorf("the agent's result lacks the replacement mark: %s", answers[0])
	}

	// Refusals name the problem and send nothing.
	for _, tt := range []struct {
		req  api.ActionRequest
		want string
	}{
		{api.ActionRequest{Target: "box-call", Secret: "db-password", Command: "cat"}, "not granted to account"},
		{api.ActionRequest{Target: "box-run", Secret: "nope", Command: "cat"}, `no secret "nope"`},
		{api.ActionRequest{Target: "box-run", Secret: "db-password", Stdin: "eA==", Command: "cat"}, "cannot both be sent"},
	} {
		a, err := g.agent.RunAction(ctx, tt.req, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, tt.want) {
			t.Errorf("%+v: %v %s %q, want rejected: %s", tt.req, err, a.Outcome, a.Detail, tt.want)
		}
	}
	g.verifyAudit()

	mu.Lock()
	streamed := live.String()
	mu.Unlock()
	if strings.Contains(streamed, value) || !strings.Contains(streamed, "[secret db-password]") {
		t.Errorf("the live stream: %q", streamed)
	}
	if strings.Contains(g.logs.String(), value) {
		t.Errorf("the gateway's log holds the secret's value")
	}
	// Every file of the state directory, WAL files included: while the
	// gateway runs, and once it stopped and checkpointed them.
	running := scanForValue(t, g.cfg.StateDir, value, "running")
	for _, f := range []string{"audit.db", "audit.db-wal", "outputs.db", "outputs.db-wal", "state.db"} {
		if !running[f] {
			t.Errorf("no %s was read (files: %v)", f, running)
		}
	}
	g.stop()
	scanForValue(t, g.cfg.StateDir, value, "stopped")
}

// readBack is every answer the agent and a reviewer get about the actions
// ids: each action, each of its streams, and then the whole audit log.
// The agent's view of ids[0] comes first.
func (g *testGateway) readBack(t *testing.T, ids ...string) [][]byte {
	t.Helper()
	ctx := context.Background()
	var answers [][]byte
	for _, id := range ids {
		for _, c := range []*api.Client{g.agent, g.reviewer} {
			got, err := c.Action(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			answers = append(answers, b)
			for _, stream := range []string{"stdout", "stderr", "stdin"} {
				if p, err := c.Output(ctx, id, stream, 0, 1<<20); err == nil {
					b, _ := json.Marshal(p)
					answers = append(answers, b)
				}
			}
		}
	}
	raw, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	return append(answers, raw)
}

// scanForValue reads every file under dir (sockets aside) and fails t for
// each that holds value, saying when it looked; it returns the names of
// the files it read.
func scanForValue(t *testing.T, dir, value, when string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		seen[filepath.Base(path)] = true
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s: %s holds the secret's value", when, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// secretBlock writes value (and a line end) to a file of its own and
// returns a secret block named name that grants it to accounts.
func secretBlock(t *testing.T, name, value string, accounts ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(accounts)
	return fmt.Sprintf("secret %q {\n  file     = %q\n  accounts = %s\n}\n", name, file, list)
}

// TestSecretAlwaysAskedOnItsOwn: an action that asks for a gateway-held
// secret is covered by nothing but its own call approval — not an
// approved run, not allow_unreviewed covering its class, not a grant —
// and the reviewer sees the command, the secret's name and why; the
// agent, while it waits, is told why too. Approved, it runs.
func TestSecretAlwaysAskedOnItsOwn(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	value := "pw-" + rand.Text()
	g := startGateway(t, s, gwOptions{extraConfig: secretBlock(t, "s1", value, "box-run", "box-call"), mutate: func(c *config.Config) {
		c.Targets["box-run"].Accounts[s.User].AllowUnreviewed = []classify.Class{classify.ReadOnly}
		c.Targets["box-call"].Accounts[s.User].MaxGrant = 10 * time.Minute
	}})
	ctx := context.Background()

	// An approved run, whose read-only commands pass unreviewed.
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "touch " + dir + "/run-marker"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("first action: %v %+v", r.err, r.a)
	}
	if a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "base64 /etc/hostname"}, api.Events{}); err != nil || !a.Success() || a.Approval.Mode != api.ModeUnreviewed {
		t.Fatalf("read-only without a secret: %v %+v", err, a)
	}

	// The same class with the secret: its own call approval, inside the
	// approved run, whose card says what and why.
	for _, cmd := range []string{"base64", "tr a-z A-Z", "head -c 15; cat >&2"} {
		res := g.runAsync(api.ActionRequest{Target: "box-run", Command: cmd, Secret: "s1"})
		ap := g.decideNext("call", "approve", "")
		if ap.Command != cmd || ap.Secret != "s1" || ap.MaxGrantS != 0 ||
			!strings.Contains(ap.Escalation, "inside approved run "+ap.RunID+", it receives the gateway-held secret s1") ||
			!strings.Contains(ap.Escalation, "no run approval, grant or allow_unreviewed covers it") {
			t.Errorf("%q: the reviewer saw command %q, secret %q, grant %ds, escalation %q", cmd, ap.Command, ap.Secret, ap.MaxGrantS, ap.Escalation)
		}
		r := <-res
		if r.err != nil || !r.a.Success() || r.a.Approval.Mode != api.ModeCall || r.a.Approval.ID != ap.ID {
			t.Fatalf("%q approved: %v %+v", cmd, r.err, r.a)
		}
		if !toldWhy(r.states, "secret s1") {
			t.Errorf("%q: the agent was not told why it waits: %+v", cmd, r.states)
		}
		if rq := g.auditEntries("action.requested", r.a.ID); len(rq) != 1 || !strings.Contains(fmt.Sprint(rq[0].Fields["escalation"]), "secret s1") {
			t.Errorf("%q: action.requested: %+v", cmd, rq)
		}
	}

	// A call account that allows grants: none is offered or taken for a
	// secret, on the page or through the API, and a repeat asks again.
	req := api.ActionRequest{Target: "box-call", Command: "rev", Secret: "s1"}
	res = g.runAsync(req)
	q := g.waitPending(1)[0]
	page := uiPage(t, uiClient(t, g.base), g.base+"/ui/pending")
	if !strings.Contains(page, "it receives the gateway-held secret s1") || strings.Contains(page, "let this exact action repeat") {
		t.Errorf("the pending page does not say why, or offers a grant:\n%s", page)
	}
	if _, err := g.reviewer.Decide(ctx, q.ID, api.DecisionRequest{Decision: "approve", Digest: q.Digest, GrantS: 300}); err == nil || !strings.Contains(err.Error(), "no grant covers an action that uses a gateway-held secret") {
		t.Fatalf("a grant on a secret's action: %v", err)
	}
	if d, err := g.reviewer.Decide(ctx, q.ID, api.DecisionRequest{Decision: "approve", Digest: q.Digest}); err != nil || d.GrantUntil != nil {
		t.Fatalf("approve: %v %+v", err, d)
	}
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("approved: %v %+v", r.err, r.a)
	}
	res = g.runAsync(req)
	g.decideNext("call", "deny", "")
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
		t.Fatalf("the repeat: %v %+v", r.err, r.a)
	}
	if strings.Contains(g.logs.String(), value) {
		t.Error("the gateway's log holds the secret's value")
	}
	g.verifyAudit()
}

// toldWhy reports whether the agent, waiting, was told a reason holding
// want.
func toldWhy(states []api.StateEvent, want string) bool {
	for _, s := range states {
		if s.State == api.StateWaitingApproval && strings.Contains(s.Reason, want) && strings.Contains(s.Message, want) {
			return true
		}
	}
	return false
}

// uiPage reads the page at u with c, the client of a reviewer's session.
func uiPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, %v", u, res.StatusCode, err)
	}
	return string(b)
}
