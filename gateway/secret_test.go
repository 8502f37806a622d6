package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
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
	ap := g.decideNext("run", "approve", "")
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
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-tail", Secret: "db-password", Command: `cat`}, api.Events{})
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
