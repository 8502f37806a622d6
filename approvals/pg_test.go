package approvals

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// TestSchemasMatch: the state tables have the same columns, of matching
// types, on SQLite (migrated to the latest version) and on PostgreSQL
// (its migrations applied): a migration added to one engine and not the
// other fails here.
func TestSchemasMatch(t *testing.T) {
	ctx := context.Background()
	lite, err := openDB(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg := pgDB(t)
	if err := migratePG(ctx, pg); err != nil {
		t.Fatal(err)
	}
	liteTypes := map[string]string{"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea"}
	tables := []string{"runs", "requests", "quota_uses", "reviewers", "reviewer_tokens", "agents", "admin_events"}
	for _, tb := range tables {
		var want, got []string
		rows, err := lite.QueryContext(ctx, `SELECT name, type, "notnull" OR pk > 0 FROM pragma_table_info(?) ORDER BY name`, tb)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ string
			var notnull bool
			rows.Scan(&name, &typ, &notnull)
			want = append(want, name+" "+liteTypes[strings.ToUpper(typ)]+map[bool]string{true: " not null"}[notnull])
		}
		rows.Close()
		rows, err = pg.QueryContext(ctx, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? ORDER BY column_name`, tb)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ, null string
			rows.Scan(&name, &typ, &null)
			got = append(got, name+" "+typ+map[bool]string{true: " not null"}[null == "NO"])
		}
		rows.Close()
		if len(want) == 0 || !slices.Equal(want, got) {
			t.Errorf("table %s:\n SQLite     %v\n PostgreSQL %v", tb, want, got)
		}
	}
}

// Two replicas' stores on one PostgreSQL database: a request raised by an
// agent of A and decided through B wakes A's waiting agent (a call
// request and a run request), the pending list of either shows it, and
// when A is taken for dead, B expires what A's agents waited for.
func TestReplicasShareDecisions(t *testing.T) {
	db := pgDB(t)
	on := func(name string) func(*Options) {
		return func(o *Options) {
			o.DB = db
			o.Replica = func() string { return name }
		}
	}
	a := newEnv(t, on("replica-a"))
	b := newEnv(t, on("replica-b"))
	ctx := context.Background()
	rv := b.reviewer("rita")
	run, _ := a.remoteRun()

	q, ch := a.authorize(ctx, run.ID, act("call-box", "uptime"))
	seen, err := b.s.Pending(ctx)
	if err != nil || len(seen) != 1 || seen[0].ID != q.ID {
		t.Fatalf("B's pending list: %+v %v; want A's request %s", seen, err, q.ID)
	}
	if _, err := b.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch); o.err != nil || o.res.Status != StatusApproved || o.res.Reviewer != "rita" {
		t.Fatalf("A's agent after B's decision: %+v %v", o.res, o.err)
	}
	// A run request, and a second decision through A refused.
	q, ch = a.authorize(ctx, run.ID, act("run-box", "df"))
	if _, err := b.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny, Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch); o.err != nil || o.res.Status != StatusDenied {
		t.Fatalf("A's agent after B's denial: %+v %v", o.res, o.err)
	}
	if _, err := a.s.Decide(ctx, a.reviewer("rita"), q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("deciding again through A: %v, want ErrAlreadyDecided", err)
	}

	// A's agent waits; A dies (its store stops without expiring anything).
	run2, _ := a.remoteRun()
	q, _ = a.authorize(ctx, run2.ID, act("call-box", "reboot"))
	a.s.Close()
	if got, _ := b.s.Request(ctx, q.ID); got.Status != StatusPending {
		t.Fatalf("A's request after A stopped: %v, want still pending", got.Status)
	}
	b2 := newEnv(t, on("replica-c")) // a replica starting meanwhile leaves it alone
	if got, _ := b2.s.Request(ctx, q.ID); got.Status != StatusPending {
		t.Errorf("a starting replica expired another replica's request: %v", got.Status)
	}
	if err := b.s.ExpireRequestsOf(ctx, "replica-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.s.Request(ctx, q.ID); got.Status != StatusExpired || !strings.Contains(got.Reason, "replica") {
		t.Errorf("after B expired A's requests: %v %q", got.Status, got.Reason)
	}
}

// A local run's anchor is looked for only where it lives: a replica on
// another host (a pid space where that pid means nothing, or is another
// process) neither ends the run at its start nor when it decides the
// run's request; the run's own host still does when the anchor exits.
func TestLocalRunsStayWithTheirHost(t *testing.T) {
	db := pgDB(t)
	on := func(name, host string) func(*Options) {
		return func(o *Options) {
			o.DB, o.Host = db, host
			o.Replica = func() string { return name }
		}
	}
	a := newEnv(t, on("replica-a", "host-a"))
	a.procs.add(100, 1, 100, "airlock", 1000)
	ctx := context.Background()
	run, err := a.s.RegisterAnchor(ctx, Peer{PID: 100, UID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	q, ch := a.authorize(ctx, run.ID, act("run-box", "uptime"))
	// B's process table has no pid 100: the anchor is not B's to check.
	b := newEnv(t, on("replica-b", "host-b"))
	if got, _ := b.s.Run(ctx, run.ID); got.State.Terminal() {
		t.Fatalf("a replica on another host ended the run at its start: %+v", got)
	}
	if _, err := b.s.Decide(ctx, b.reviewer("rita"), q.ID, Decision{Verdict: Approve}); err != nil {
		t.Fatalf("deciding through another host: %v", err)
	}
	if o := recv(t, ch); o.err != nil || o.res.Status != StatusApproved {
		t.Fatalf("the agent on A: %+v %v", o.res, o.err)
	}
	b.reopen()
	if got, _ := b.s.Run(ctx, run.ID); got.State != RunApproved {
		t.Errorf("after B restarted, the run is %v", got.State)
	}
	// On its own host, the anchor's exit still ends it.
	a.procs.kill(100)
	testkit.Eventually(t, func() bool {
		got, _ := a.s.Run(ctx, run.ID)
		return got.State == RunEnded && got.EndReason == EndAnchorExited
	}, "the anchor's exit did not end the run on its host")
}

// A decision whose notification never came (it was committed while the
// waiting replica was not listening, here: written without one) still
// wakes the waiting agent: each replica polls its waiters' requests.
func TestPollingWakesWithoutNotification(t *testing.T) {
	db := pgDB(t)
	a := newEnv(t, func(o *Options) {
		o.DB = db
		o.Replica = func() string { return "replica-a" }
	})
	ctx := context.Background()
	run, _ := a.remoteRun()
	q, ch := a.authorize(ctx, run.ID, act("call-box", "uptime"))
	if _, err := db.ExecContext(ctx, `UPDATE requests SET status = ?, decided_by = ?, decided_at = ? WHERE id = ?`,
		StatusApproved.String(), "rita", a.clock.Now().UnixNano(), string(q.ID)); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, ch); o.err != nil || o.res.Status != StatusApproved || o.res.Reviewer != "rita" {
		t.Fatalf("the waiting agent: %+v %v", o.res, o.err)
	}
}
