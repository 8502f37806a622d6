package auditchain

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/tlog"
)

// An append on PostgreSQL is answered only once a synchronous commit
// covers it: the batch's own commit does not wait for the disk (the chain
// lock passes on sooner), so the barrier after it must. A server that
// cannot make commits durable (here: it waits for a synchronous standby
// that never comes) gets an append answered "outcome unknown", never
// success, although the batch is in its tables.
//
// Then the server loses that batch (as a crash before its flush would;
// simulated by deleting it): the replica takes the database's head, since
// it never confirmed the batch, and goes on. A loss of an entry it did
// confirm fails the log closed.
func TestPostgresAppendAnsweredWhenDurable(t *testing.T) {
	t.Parallel()
	_, db := privatePG(t)
	ctx := context.Background()
	o := replicaOptions(t, db, "")
	o.WriteTimeout = time.Second
	o.CheckpointEvery = -1
	l := openLog(t, o)
	for i := range 3 {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	standby := func(names string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `ALTER SYSTEM SET synchronous_standby_names = '`+names+`'`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // backends take the reload at their next command
	}
	standby("nobody")
	_, err := l.Append(ctx, sampleEntry(3))
	standby("")
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("an append the server could not make durable: %v, want ErrOutcomeUnknown", err)
	}
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM entries`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("entries in the tables: %d %v, want 4 (the batch committed locally)", n, err)
	}

	// The server loses entry 3, which nobody confirmed.
	truncate(t, db, 3)
	ref, err := l.Append(ctx, sampleEntry(4))
	if err != nil || ref.Seq != 3 {
		t.Fatalf("after the database lost an unconfirmed entry: %+v %v, want seq 3", ref, err)
	}
	key, _ := ReadVerifierKey(o.VerifierKeyPath)
	if rep, err := Verify(ctx, VerifyOptions{DB: db, Key: key}); err != nil || !rep.Intact() {
		t.Fatalf("after going on from the database's head: %v %+v", err, rep)
	}

	// It loses entry 3 again, which this replica has now confirmed.
	truncate(t, db, 3)
	if _, err := l.Append(ctx, sampleEntry(5)); !errors.Is(err, ErrInconsistent) || !errors.Is(err, ErrFailed) {
		t.Fatalf("after the database lost a confirmed entry: %v, want the log failed closed (ErrInconsistent)", err)
	}
}

// truncate deletes the entries from seq on, and their tree hashes, as
// the database's owner with the append-only triggers off for it.
func truncate(t *testing.T, db *sqldb.DB, seq int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, st := range []struct {
		q   string
		arg []any
	}{
		{`SET LOCAL session_replication_role = replica`, nil},
		{`DELETE FROM entries WHERE seq >= ?`, []any{seq}},
		{`DELETE FROM tree_hashes WHERE idx >= ?`, []any{tlog.StoredHashIndex(0, seq)}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.arg...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
