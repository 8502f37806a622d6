package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// storageBlock is a storage block for a PostgreSQL database.
func storageBlock(dsn string) string {
	return "storage {\n  postgres = \"" + dsn + "\"\n  lease = \"3s\"\n}\n"
}

// With a storage block, the whole flow runs on PostgreSQL: nothing of the
// state, the audit log or the outputs goes to SQLite files, and the log
// verifies from the database.
func TestPostgresStorage(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo hello; echo oops >&2"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "hello\n" || r.a.Stderr != "oops\n" {
		t.Fatalf("action: %+v %v", r.a, r.err)
	}
	got, err := g.reviewer.Action(context.Background(), r.a.ID)
	if err != nil || got.Stdout != "hello\n" {
		t.Errorf("GET action: %+v %v", got, err)
	}
	rep := g.verifyAudit()
	if rep.Entries < 8 {
		t.Errorf("only %d audit entries", rep.Entries)
	}
	for _, f := range []string{"state.db", "audit.db", "outputs.db"} {
		if _, err := os.Stat(filepath.Join(g.cfg.StateDir, f)); err == nil {
			t.Errorf("%s was created beside a PostgreSQL storage block", f)
		}
	}

	// A second gateway on the same database is refused, saying why.
	cfg := *g.cfg
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	cfg.Listen.Socket = filepath.Join(t.TempDir(), "agent.sock")
	_, err = New(context.Background(), Options{Config: &cfg})
	if err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("a second gateway on one database: %v", err)
	}
}

// PostgreSQL stopping under a gateway: actions fail closed (audit
// unavailable, nothing dialed), and once it is back the gateway takes
// actions again by itself.
func TestPostgresRestartFailsClosed(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	dsn, err := c.CreateDatabase("airlock")
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo up"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("before: %+v %v", r.a, r.err)
	}
	// The run is approved: its next actions need no reviewer.
	run := func() (*api.Action, error) {
		return g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo up"}, api.Events{})
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	a, err := run()
	if err == nil && a.Success() {
		t.Fatalf("an action ran with PostgreSQL down: %+v", a)
	}
	if err == nil && (a.Outcome != sshexec.AuditUnavailable || !strings.Contains(a.Detail, "nothing") || a.ExitCode != nil) {
		t.Errorf("with PostgreSQL down: %+v, want audit_unavailable and nothing run", a)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for {
		a, err := run()
		if err == nil && a.Success() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not take actions again after PostgreSQL came back: %+v %v", a, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	g.verifyAudit()
}
