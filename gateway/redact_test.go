package gateway

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec"
)

// TestCommandRedaction: a command holding a credential runs as sent, but
// is stored and shown redacted everywhere, with its MAC; a reviewer may
// reveal the original while the request is pending (recorded); an
// account set to refuse such commands rejects them.
func TestCommandRedaction(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-none"].Accounts[s.User].OnSecret = config.OnSecretRefuse
	}})
	ctx := context.Background()
	const key = "AKIAIOSFODNN7EXAMPLE"
	command := "printf %s " + key + " | wc -c"
	shown := "printf %s [redacted:aws-access-key] | wc -c"

	// A call: the reviewer sees it redacted, reveals it (recorded), and
	// after the decision the original is gone.
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: command})
	ap := g.waitPending(1)[0]
	if ap.Command != shown || len(ap.Redactions) != 1 || ap.Redactions[0] != (api.Redaction{Rule: "aws-access-key", Offset: 10, Length: 20}) {
		t.Fatalf("the reviewer's view: %q %+v", ap.Command, ap.Redactions)
	}
	rc, err := g.reviewer.RevealCommand(ctx, ap.ID)
	if err != nil || rc.Command != command {
		t.Fatalf("reveal: %+v %v", rc, err)
	}
	if rev := g.auditEntries("command.revealed", ""); len(rev) != 1 || rev[0].Fields["reviewer"] != testReviewer || rev[0].Fields["approval_id"] != ap.ID {
		t.Errorf("command.revealed: %+v", rev)
	}
	if _, err := g.agent.RevealCommand(ctx, ap.ID); err == nil {
		t.Error("an agent revealed a command")
	}
	if _, err := g.reviewer.Decide(ctx, ap.ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: ap.Digest}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || !r.a.Success() || strings.TrimSpace(r.a.Stdout) != "20" {
		t.Fatalf("the command did not run as sent: %v %+v", r.err, r.a)
	}
	if r.a.Command != shown || len(r.a.Redactions) != 1 {
		t.Errorf("action object: %q %+v", r.a.Command, r.a.Redactions)
	}
	var apiErr *api.Error
	if _, err := g.reviewer.RevealCommand(ctx, ap.ID); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("reveal after the decision: %v, want 404", err)
	}

	// The record: redacted, with the MAC of the original.
	req := g.auditEntries("action.requested", r.a.ID)
	if len(req) != 1 || req[0].Fields["command"] != shown {
		t.Fatalf("action.requested: %+v", req)
	}
	mac, err := hex.DecodeString(req[0].Fields["command_hmac"].(string))
	if err != nil {
		t.Fatalf("command_hmac %v: %v", req[0].Fields["command_hmac"], err)
	}
	k, err := redact.LoadKey(filepath.Join(g.cfg.StateDir, redact.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !redact.CheckMAC(k, command, mac) || redact.CheckMAC(k, shown, mac) {
		want := redact.MAC(k, command)
		t.Errorf("command_hmac %x does not prove the original (%x)", mac, want)
	}
	if !strings.Contains(req[0].Fields["redactions"].(string), `"rule":"aws-access-key","offset":10,"length":20`) {
		t.Errorf("redactions: %v", req[0].Fields["redactions"])
	}
	for _, e := range g.auditEntries("", "") {
		if e.Kind == "approval.requested" && e.Fields["command"] != shown {
			t.Errorf("approval.requested: %+v", e)
		}
	}

	// Refuse mode: rejected, nothing run, the record redacted.
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-none", Command: "touch refused-" + key}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "aws-access-key at byte 14") || strings.Contains(a.Detail, key) {
		t.Fatalf("refuse mode: %v %+v", err, a)
	}
	if a.Command != "touch refused-[redacted:aws-access-key]" {
		t.Errorf("refused command shown as %q", a.Command)
	}
	g.verifyAudit()

	raw, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil || bytes.Contains(raw, []byte(key)) {
		t.Errorf("the audit API holds the key (%v)", err)
	}
	if strings.Contains(g.logs.String(), key) {
		t.Errorf("the log holds the key")
	}
	g.stop()
	for _, f := range []string{"audit.db", "audit.db-wal", "outputs.db", "outputs.db-wal", "state.db", "state.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(g.cfg.StateDir, f)); err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the key", f)
		}
	}
}
