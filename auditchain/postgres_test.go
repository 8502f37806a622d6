package auditchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/deploy/testkit"
	"golang.org/x/mod/sumdb/note"
)

// pgDB opens a database of its own on the package's PostgreSQL cluster.
func pgDB(t testing.TB) *sqldb.DB {
	t.Helper()
	c := pgtest.Shared(t)
	db, err := sqldb.OpenPostgres(context.Background(), sqldb.PostgresOptions{URL: c.NewDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// privatePG starts a PostgreSQL cluster of the test's own (one the test
// may stop or reconfigure) and opens a database on it.
func privatePG(t testing.TB) (*pgtest.Cluster, *sqldb.DB) {
	t.Helper()
	c := pgtest.Start(t)
	dsn, err := c.CreateDatabase("log")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.OpenPostgres(context.Background(), sqldb.PostgresOptions{URL: dsn, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return c, db
}

// replicaOptions are a replica's options: a state directory of its own,
// the shared database, and (after the first) the first one's key.
func replicaOptions(t testing.TB, db *sqldb.DB, keyFrom string) Options {
	t.Helper()
	o := DefaultOptions(t.TempDir())
	o.DB = db
	o.CheckpointInterval = -1
	if keyFrom != "" {
		copyKey(t, keyFrom, o)
	}
	return o
}

func copyKey(t testing.TB, from string, o Options) {
	t.Helper()
	os.MkdirAll(filepath.Dir(o.KeyPath), 0o700)
	for _, p := range [][2]string{{from, o.KeyPath}, {strings.TrimSuffix(from, ".key") + ".vkey", o.VerifierKeyPath}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Three replicas append at once to one log on PostgreSQL: one chain, one
// order, every entry once, checkpoints signed, and the whole verifies
// with the same verifier as a SQLite log, against each replica's own
// checkpoint file as outside evidence.
func TestPostgresReplicasShareOneChain(t *testing.T) {
	t.Parallel()
	db := pgDB(t)
	ctx := context.Background()
	first := replicaOptions(t, db, "")
	first.CheckpointEvery = 40
	logs := []*Log{openLog(t, first)}
	opts := []Options{first}
	for range 2 {
		o := replicaOptions(t, db, first.KeyPath)
		o.CheckpointEvery = 40
		logs = append(logs, openLog(t, o))
		opts = append(opts, o)
	}
	for _, l := range logs[1:] {
		if l.Origin() != logs[0].Origin() || l.VerifierKey() != logs[0].VerifierKey() {
			t.Fatalf("a replica has origin %q key %q, the first %q %q", l.Origin(), l.VerifierKey(), logs[0].Origin(), logs[0].VerifierKey())
		}
	}
	const writers, each = 4, 30
	var mu sync.Mutex
	seqs := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, len(logs)*writers*each)
	for r, l := range logs {
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("r%d-w%d-%d", r, w, i)
					ref, err := l.Append(ctx, Entry{Kind: KindActionRequested, ActionID: id, Fields: []Field{Str("command", "uptime"), Int("i", int64(i))}})
					if err != nil {
						errs <- fmt.Errorf("%s: %w", id, err)
						return
					}
					mu.Lock()
					if other, dup := seqs[ref.Seq]; dup {
						errs <- fmt.Errorf("seq %d given to both %s and %s", ref.Seq, other, id)
					}
					seqs[ref.Seq] = id
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, l := range logs {
		closeLog(t, l)
	}
	total := len(logs) * writers * each
	if len(seqs) != total {
		t.Fatalf("%d entries appended, want %d", len(seqs), total)
	}
	key, err := note.NewVerifier(logs[0].VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	var trusted []TrustedNote
	signedBy := 0
	for i, o := range opts {
		data, _ := os.ReadFile(o.CheckpointLogPath)
		notes, err := SplitNotes(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) > 1 { // beyond the final one at Close
			signedBy++
		}
		for j, n := range notes {
			trusted = append(trusted, TrustedNote{Source: fmt.Sprintf("replica%d", i), Index: j + 1, Note: n})
		}
	}
	rep, err := Verify(ctx, VerifyOptions{DB: db, Key: key, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Fatalf("the shared log does not verify: %+v", rep.Damage)
	}
	if rep.Entries <= int64(total) || rep.Checkpoints == 0 {
		t.Errorf("verified %d entries and %d checkpoints; want the %d appended plus checkpoint entries", rep.Entries, rep.Checkpoints, total)
	}
	if signedBy != 1 {
		t.Errorf("%d replicas signed periodic checkpoints; the signer lease allows one", signedBy)
	}
	// Every appended entry is in the log, at the seq its replica was told.
	r := NewReader(db)
	for seq, id := range seqs {
		rec, err := r.Entry(ctx, seq)
		if err != nil || rec.ActionID != id {
			t.Fatalf("entry %d: %v %q, want %q", seq, err, rec.ActionID, id)
		}
	}
}

// A replica must sign with the key of the replica that started the log.
func TestPostgresReplicaNeedsTheLogsKey(t *testing.T) {
	t.Parallel()
	db := pgDB(t)
	first := replicaOptions(t, db, "")
	l := openLog(t, first)
	defer closeLog(t, l)

	stranger := replicaOptions(t, db, "")
	if _, err := Open(context.Background(), stranger); err == nil || !strings.Contains(err.Error(), "copy keys/checkpoint.key") {
		t.Errorf("a replica without the log's key: %v", err)
	}
	if _, err := os.Stat(stranger.KeyPath); err == nil {
		t.Error("a replica without the log's key generated one")
	}
	other := replicaOptions(t, db, "")
	os.MkdirAll(filepath.Dir(other.KeyPath), 0o700)
	if err := createKey(other.KeyPath, l.Origin()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), other); err == nil || !strings.Contains(err.Error(), "not the shared log's") {
		t.Errorf("a replica with another key: %v", err)
	}
}

// The append-only guard holds on PostgreSQL, and a disabled guard or a
// rewritten entry is damage that Verify reports.
func TestPostgresTamper(t *testing.T) {
	t.Parallel()
	db := pgDB(t)
	ctx := context.Background()
	o := replicaOptions(t, db, "")
	o.CheckpointEvery = 5
	l := openLog(t, o)
	for i := range 12 {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	key, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE entries SET kind = 'x' WHERE seq = 3`,
		`DELETE FROM entries WHERE seq = 11`,
		`TRUNCATE checkpoints`,
		`DELETE FROM tree_hashes`,
		`UPDATE meta SET value = 'other' WHERE name = 'origin'`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the append-only guard", stmt, err)
		}
	}
	if rep, err := Verify(ctx, VerifyOptions{DB: db, Key: key}); err != nil || !rep.Intact() {
		t.Fatalf("before tampering: %v %+v", err, rep)
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE entries DISABLE TRIGGER entries_append_only`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE entries SET leaf = leaf || '\x00'::bytea WHERE seq = 7`); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, VerifyOptions{DB: db, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var schema, entry bool
	for _, d := range rep.Damage {
		schema = schema || d.Kind == DamageSchema && strings.Contains(d.Detail, "disabled trigger entries_append_only")
		entry = entry || d.Seq == 7
	}
	if !schema || !entry {
		t.Errorf("damage %+v; want the disabled trigger and entry 7", rep.Damage)
	}
	if _, err := Open(ctx, replicaOptions(t, db, o.KeyPath)); err == nil || !strings.Contains(err.Error(), "schema differs") {
		t.Errorf("opening a log whose guard is off: %v", err)
	}
}

// PostgreSQL restarting under a replica: appends fail while it is down
// (each told so) and succeed again once it is back, without reopening;
// the chain verifies.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	c, db := privatePG(t)
	ctx := context.Background()
	o := replicaOptions(t, db, "")
	l := openLog(t, o)
	for i := range 5 {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, testkit.Patience)
	_, err := l.Append(actx, sampleEntry(5))
	cancel()
	if err == nil {
		t.Fatal("an append succeeded with PostgreSQL down")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, func() error {
		_, err := l.Append(ctx, sampleEntry(6))
		return err
	}, "appends did not resume after PostgreSQL came back")
	closeLog(t, l)
	key, _ := ReadVerifierKey(o.VerifierKeyPath)
	rep, err := Verify(ctx, VerifyOptions{DB: db, Key: key})
	if err != nil || !rep.Intact() {
		t.Fatalf("after the restart: %v %+v", err, rep)
	}
}

// Two replicas finishing one action (its own replica, and a survivor that
// takes it for dead) leave exactly one action.finished entry: the second
// is refused, whichever comes second, even in one batch.
func TestPostgresOneOutcomePerAction(t *testing.T) {
	t.Parallel()
	db := pgDB(t)
	ctx := context.Background()
	a := openLog(t, replicaOptions(t, db, ""))
	defer closeLog(t, a)
	b := openLog(t, replicaOptions(t, db, a.opts.KeyPath))
	defer closeLog(t, b)
	finished := func(id, outcome string) Entry {
		return Entry{Kind: KindActionFinished, ActionID: id, Fields: []Field{Str("outcome", outcome)}}
	}
	if _, err := a.Append(ctx, Entry{Kind: KindActionConnecting, ActionID: "act-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, finished("act-1", "exited")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, finished("act-1", "interrupted")); !errors.Is(err, ErrAlreadyFinished) {
		t.Errorf("a second outcome from another replica: %v, want ErrAlreadyFinished", err)
	}
	// Many at once, from both replicas, for the same actions.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]int{}
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			id := fmt.Sprintf("act-many-%d", i/4)
			_, err := l.Append(ctx, finished(id, "interrupted"))
			if err != nil && !errors.Is(err, ErrAlreadyFinished) {
				t.Error(err)
			}
			if err == nil {
				mu.Lock()
				won[id]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range 10 {
		id := fmt.Sprintf("act-many-%d", i)
		recs, err := a.Reader().ActionEntries(ctx, id)
		if err != nil || len(recs) != 1 || won[id] != 1 {
			t.Errorf("%s: %d entries, %d appends succeeded (%v); want one", id, len(recs), won[id], err)
		}
	}
	// Other kinds are not limited.
	for range 2 {
		if _, err := b.Append(ctx, Entry{Kind: KindActionConnecting, ActionID: "act-1"}); err != nil {
			t.Error(err)
		}
	}
}
