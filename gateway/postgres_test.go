package gateway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec"
)

// storageBlock is a storage block for a PostgreSQL database.
func storageBlock(dsn string) string {
	return "storage {\n  postgres = \"" + dsn + "\"\n  lease = \"3s\"\n}\n"
}

// With a storage block, the whole flow runs on PostgreSQL: nothing of the
// state, the audit log or the outputs goes to SQLite files, and the log
// verifies from the database.
// succeeds is nil for an action that ran and succeeded, else what it
// ended as: the condition of a wait for actions to be taken again.
func succeeds(a *api.Action, err error) error {
	if err != nil {
		return err
	}
	if !a.Success() {
		return fmt.Errorf("%s: %s", a.Outcome, a.Detail)
	}
	return nil
}

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
	return runReplica(t, g, replicaConfig(t, g.cfg))
}

// runReplica starts a replica of g with cfg, g's keys copied.
func runReplica(t testing.TB, g *testGateway, cfg *config.Config) *testGateway {
	t.Helper()
	gatewaytest.CopyKeys(t, g.cfg.StateDir, cfg.StateDir)
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
	pending := c.waitPending(1)
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
	testkit.EventuallyErr(t, func() error {
		return succeeds(run())
	}, "the gateway to take actions again after PostgreSQL came back")
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

// cutOff drops every packet to the PostgreSQL server at addr (host:port)
// with nftables until the returned func heals it (and at the end of the
// test). It needs root; elsewhere the test is skipped (CI runs as root).
func cutOff(t *testing.T, host string, port int) (heal func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cutting a network path with nftables needs root")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nft is missing: %v (.ci/test-deps installs nftables)", err)
		}
		t.Skipf("nft is missing: %v", err)
	}
	table := fmt.Sprintf("airlock_test_%d", os.Getpid())
	run := func(args ...string) error {
		out, err := exec.Command(nft, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	rules := fmt.Sprintf(`table ip %s {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr %s tcp dport %d drop
		ip saddr %s tcp sport %d drop
	}
}`, table, host, port, host, port)
	f := filepath.Join(t.TempDir(), "cut.nft")
	if err := os.WriteFile(f, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run("-f", f); err != nil {
		t.Fatal(err)
	}
	healed := false
	heal = func() {
		if !healed {
			healed = true
			if err := run("delete", "table", "ip", table); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(heal)
	return heal
}

// One replica cut off from PostgreSQL (nftables drops its packets): it
// cancels its in-flight action and takes no new one; the other replica
// records that action as interrupted once the lease ran out, and nothing
// has two outcomes. Healed, the cut replica joins again and works.
func TestPostgresReplicaCutOff(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	if _, err := c.CreateDatabase("airlock"); err != nil {
		t.Fatal(err)
	}
	// B reaches the server at its usual address, A at the second one:
	// the cut is A's alone.
	b := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(c.DSN("airlock"))})
	cfg := replicaConfig(t, b.cfg)
	st := *cfg.Storage
	st.Postgres = c.DSNVia(pgtest.AltHost, "airlock")
	cfg.Storage = &st
	a := runReplica(t, b, cfg)
	ctx := context.Background()
	for _, g := range []*testGateway{a, b} {
		res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
		g.decideNext("run", "approve", "")
		if r := <-res; r.err != nil || !r.a.Success() {
			t.Fatalf("first action: %+v %v", r.a, r.err)
		}
	}
	long := a.runAsync(api.ActionRequest{Target: "box-run", Command: "sleep 60"})
	var inflight string
	testkit.Eventually(t, func() bool {
		for _, e := range b.auditEntries("action.connecting", "") {
			if len(b.auditEntries("action.finished", e.ActionID)) == 0 {
				inflight = e.ActionID
			}
		}
		return inflight != ""
	}, "the long action to connect")
	heal := cutOff(t, pgtest.AltHost, c.Port)

	// A cancels its action and refuses new ones without dialing.
	r := <-long
	if r.err == nil && r.a.Success() {
		t.Fatalf("the action of the cut replica went on: %+v", r.a)
	}
	if a2, err := a.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo cut"}, api.Events{}); err == nil && (a2.Success() || a2.Outcome != sshexec.AuditUnavailable) {
		t.Errorf("the cut replica took an action: %+v", a2)
	}
	// B finishes A's action once A's lease ran out.
	testkit.EventuallyErr(t, func() error {
		if fin := b.auditEntries("action.finished", inflight); len(fin) != 1 || fin[0].Fields["outcome"] != "interrupted" {
			return fmt.Errorf("action.finished entries %+v, want one interrupted", fin)
		}
		return nil
	}, "B to finish the cut replica's action")
	heal()
	// A comes back by itself; nothing has two outcomes.
	testkit.EventuallyErr(t, func() error {
		return succeeds(a.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo back"}, api.Events{}))
	}, "the replica to take actions again after the cut healed")
	seen := map[string]int{}
	for _, e := range b.auditEntries("action.finished", "") {
		seen[e.ActionID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("action %s has %d outcomes", id, n)
		}
	}
	b.verifyAudit()
}

// PostgreSQL restarted under load with two replicas: while it is down
// actions fail closed (an outcome that says so, never a success that did
// not happen), both replicas take actions again by themselves once it is
// back, and in the log every action that connected has one outcome.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	dsn, err := c.CreateDatabase("airlock")
	if err != nil {
		t.Fatal(err)
	}
	a := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	b := addReplica(t, a)
	for _, g := range []*testGateway{a, b} {
		res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
		g.decideNext("run", "approve", "")
		if r := <-res; r.err != nil || !r.a.Success() {
			t.Fatalf("first action: %+v %v", r.a, r.err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[sshexec.Outcome]int{}
	for i := range 4 {
		g := []*testGateway{a, b}[i%2]
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				want := fmt.Sprintf("w%d-%d", i, n)
				ac, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: "echo " + want}, api.Events{})
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if ac.Success() && ac.Stdout != want+"\n" {
					t.Errorf("a success with the wrong output: %+v", ac)
				}
				mu.Lock()
				outcomes[ac.Outcome]++
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // some load before the fault
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the fault lasts a while
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Both replicas take actions again by themselves.
	for _, g := range []*testGateway{a, b} {
		testkit.EventuallyErr(t, func() error {
			return succeeds(g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: "echo back"}, api.Events{}))
		}, "a replica to take actions again")
	}
	stop()
	wg.Wait()
	for o := range outcomes {
		switch o {
		case sshexec.Exited, sshexec.AuditUnavailable, sshexec.Cancelled, sshexec.Interrupted:
		default:
			t.Errorf("%d actions ended %s under the restart", outcomes[o], o)
		}
	}
	if outcomes[sshexec.AuditUnavailable] == 0 {
		t.Logf("no action met the restart (outcomes %v)", outcomes)
	}
	// Outcomes recorded late land once the database is back: wait until
	// every action that connected has one, then check there is one each.
	testkit.EventuallyErr(t, func() error {
		fin := map[string]int{}
		for _, e := range a.auditEntries("action.finished", "") {
			fin[e.ActionID]++
		}
		missing := 0
		for _, e := range a.auditEntries("action.connecting", "") {
			if fin[e.ActionID] == 0 {
				missing++
			}
		}
		for id, n := range fin {
			if n != 1 {
				return testkit.Stop(fmt.Errorf("action %s has %d outcomes", id, n))
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d actions that connected have no outcome", missing)
		}
		return nil
	}, "every action that connected to have one outcome")
	a.verifyAudit()
}

// A remote run works through any replica: created through A with an agent
// token issued on A, its first action through B waits for a reviewer on
// A's page, later actions pass through either, and ending it through B
// ends it for A too.
func TestPostgresRemoteRunThroughAnyReplica(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	b := addReplica(t, a)
	ctx := context.Background()
	run, err := a.agentClient(t, "ci-agent").CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	viaA, viaB := api.NewHTTPClient(a.base, run.Token), api.NewHTTPClient(b.base, run.Token)
	ch := make(chan actionResult, 1)
	go func() {
		ac, err := viaB.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo via-b"}, api.Events{})
		ch <- actionResult{a: ac, err: err}
	}()
	a.decideNext("run", "approve", "")
	if r := <-ch; r.err != nil || r.a.Stdout != "via-b\n" || r.a.RunID != run.ID {
		t.Fatalf("first action through B: %+v %v", r.a, r.err)
	}
	for _, c := range []*api.Client{viaA, viaB} {
		if ac, err := c.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo again"}, api.Events{}); err != nil || !ac.Success() {
			t.Fatalf("a later action: %+v %v", ac, err)
		}
	}
	if err := viaB.EndRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if ac, err := viaA.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "true"}, api.Events{}); err != nil || ac.Outcome != sshexec.Rejected {
		t.Errorf("an action through A of the run ended through B: %+v %v", ac, err)
	}
}
