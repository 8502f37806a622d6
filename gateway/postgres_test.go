package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
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

	// Another replica without the replicas' keys is refused, saying what
	// to copy.
	cfg := replicaConfig(t, g.cfg)
	_, err = New(context.Background(), Options{Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "copy") {
		t.Errorf("a replica without the shared keys: %v", err)
	}
}

// replicaConfig is another replica's configuration beside g's: its own
// state directory, socket and HTTP port, the same storage.
func replicaConfig(t testing.TB, of *config.Config) *config.Config {
	t.Helper()
	cfg := *of
	dir := t.TempDir()
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Listen.Socket = filepath.Join(dir, "agent.sock")
	cfg.Listen.HTTP = "127.0.0.1:0"
	return &cfg
}

// addReplica starts another replica of g, with g's keys copied as an
// operator does (docs/high-availability.md).
func addReplica(t testing.TB, g *testGateway) *testGateway {
	t.Helper()
	cfg := replicaConfig(t, g.cfg)
	from, to := filepath.Join(g.cfg.StateDir, "keys"), filepath.Join(cfg.StateDir, "keys")
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(from, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return runGateway(t, cfg, gwOptions{})
}

// Three replicas on one database: an action raised through A is on B's
// and C's pending lists, approved through B, and run by A; its outcome
// is readable through C; each action gets one outcome, and the one chain
// verifies from any replica.
func TestPostgresReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	b, c := addReplica(t, a), addReplica(t, a)
	ctx := context.Background()

	res := a.runAsync(api.ActionRequest{Target: "box-call", Command: "echo from-a"})
	var pending []api.Approval
	deadline := time.Now().Add(patience)
	for len(pending) == 0 && time.Now().Before(deadline) {
		var err error
		if pending, err = c.reviewer.Approvals(ctx, "pending"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pending) != 1 || pending[0].Command != "echo from-a" {
		t.Fatalf("C's pending list: %+v", pending)
	}
	if _, err := b.reviewer.Decide(ctx, pending[0].ID, api.DecisionRequest{Decision: "approve", Digest: pending[0].Digest}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "from-a\n" || r.a.Approval.DecidedBy != testReviewer {
		t.Fatalf("A's action after B's approval: %+v %v", r.a, r.err)
	}
	got, err := c.reviewer.Action(ctx, r.a.ID)
	if err != nil || got.Outcome != sshexec.Exited || got.Stdout != "from-a\n" {
		t.Errorf("the action through C: %+v %v", got, err)
	}
	if n := len(c.auditEntries("action.finished", r.a.ID)); n != 1 {
		t.Errorf("%d outcomes of %s, want 1", n, r.a.ID)
	}
	c.verifyAudit()
	b.verifyAudit()
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

// A target's max_parallel holds across replicas: with one slot, actions
// through two replicas never overlap on the target (each takes a lock
// directory there and would fail, exit 99, finding it taken).
func TestPostgresMaxParallelAcrossReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	one := func(cfg *config.Config) { cfg.Targets["box-run"].MaxParallel = 1 }
	a := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn), mutate: one})
	b := addReplica(t, a)
	dir := fmt.Sprintf("/tmp/airlock-slot-%d", time.Now().UnixNano())
	cmd := "mkdir " + dir + " || exit 99; sleep 0.3; rmdir " + dir
	// Approve each replica's run once (its agent is this process, through
	// that replica's socket).
	for _, g := range []*testGateway{a, b} {
		res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
		g.decideNext("run", "approve", "")
		if r := <-res; r.err != nil || !r.a.Success() {
			t.Fatalf("first action: %+v %v", r.a, r.err)
		}
	}
	var wg sync.WaitGroup
	for i := range 6 {
		g := a
		if i%2 == 1 {
			g = b
		}
		wg.Go(func() {
			ac, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: cmd}, api.Events{})
			if err != nil || !ac.Success() {
				t.Errorf("action %d: %+v %v (exit 99: two actions ran at once on a one-slot target)", i, ac, err)
			}
		})
	}
	wg.Wait()
}
