package auditchain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The log on PostgreSQL: several gateway replicas append to one chain.
// Each write transaction takes a transaction-level advisory lock on the
// chain and re-reads its head, so appends from all replicas fall into one
// order; a replica whose view is behind extends its Merkle frontier with
// the entries appended since before it adds its batch (pgwrite.go). Group
// commit still gathers each replica's concurrent appends into one
// transaction. One replica at a
// time signs the periodic checkpoints: the holder of a session-level
// advisory lock (the signer lease).

// Advisory lock keys, the same on every replica.
var (
	chainLockKey  = sqldb.LockKey("audit/chain")
	signerLockKey = sqldb.LockKey("audit/signer")
)

// pgSchemaDDL creates the log's tables on PostgreSQL: the same columns
// as on SQLite, with BIGINT and BYTEA, and triggers that refuse UPDATE,
// DELETE and TRUNCATE. As on SQLite they guard against accidents; the
// role that owns the tables could drop them, which Verify reports.
var pgSchemaDDL = []string{
	`CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE entries (
	seq BIGINT PRIMARY KEY,
	time_ns BIGINT NOT NULL,
	kind TEXT NOT NULL,
	action_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	leaf BYTEA NOT NULL,
	leaf_hash BYTEA NOT NULL,
	chain BYTEA NOT NULL
)`,
	`CREATE INDEX entries_by_action ON entries (action_id, kind)`,
	`CREATE INDEX entries_connecting ON entries (action_id) WHERE kind = 'action.connecting'`,
	`CREATE TABLE tree_hashes (idx BIGINT PRIMARY KEY, hash BYTEA NOT NULL)`,
	`CREATE TABLE checkpoints (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, size BIGINT NOT NULL, note BYTEA NOT NULL)`,
	`CREATE INDEX checkpoints_by_size ON checkpoints (size)`,
	`CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'auditchain: % is append-only', TG_TABLE_NAME;
END
$$`,
}

func init() {
	for _, t := range appendOnlyTables {
		pgSchemaDDL = append(pgSchemaDDL,
			fmt.Sprintf(`CREATE TRIGGER %s_append_only BEFORE UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION audit_append_only()`, t, t),
			fmt.Sprintf(`CREATE TRIGGER %s_no_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()`, t, t))
	}
}

// pgColumns are the columns each table must have on PostgreSQL, as
// information_schema names their types.
var pgColumns = map[string][]string{
	"meta":        {"name text NO", "value text NO"},
	"entries":     {"seq bigint NO", "time_ns bigint NO", "kind text NO", "action_id text NO", "run_id text NO", "leaf bytea NO", "leaf_hash bytea NO", "chain bytea NO"},
	"tree_hashes": {"idx bigint NO", "hash bytea NO"},
	"checkpoints": {"id bigint NO", "size bigint NO", "note bytea NO"},
}

// pgSchemaDiff describes how the log's tables and triggers on PostgreSQL
// differ from what pgSchemaDDL made, or "". Other tables (the gateway's
// state shares the database) are not the log's business.
func pgSchemaDiff(ctx context.Context, q querier) (string, error) {
	var diffs []string
	for _, t := range appendOnlyTables {
		rows, err := q.QueryContext(ctx, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, t)
		if err != nil {
			return "", fmt.Errorf("audit log: read schema: %w", err)
		}
		var got []string
		for rows.Next() {
			var name, typ, null string
			if err := rows.Scan(&name, &typ, &null); err != nil {
				rows.Close()
				return "", fmt.Errorf("audit log: read schema: %w", err)
			}
			got = append(got, name+" "+typ+" "+null)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("audit log: read schema: %w", err)
		}
		switch want := pgColumns[t]; {
		case len(got) == 0:
			diffs = append(diffs, "missing table "+t)
		case strings.Join(got, ", ") != strings.Join(want, ", "):
			diffs = append(diffs, fmt.Sprintf("altered table %s (%s)", t, strings.Join(got, ", ")))
		}
		for _, trig := range []string{t + "_append_only", t + "_no_truncate"} {
			var enabled string
			err := q.QueryRowContext(ctx, `SELECT tg.tgenabled::text FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
				JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = current_schema() AND c.relname = ? AND tg.tgname = ?`, t, trig).Scan(&enabled)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				diffs = append(diffs, "missing trigger "+trig)
			case err != nil:
				return "", fmt.Errorf("audit log: read schema: %w", err)
			case enabled == "D":
				diffs = append(diffs, "disabled trigger "+trig)
			}
		}
	}
	return strings.Join(diffs, "; "), nil
}

// initSchemaPG creates the tables when the database has none, or checks
// them, and returns the log's origin and the verifier key recorded with
// it ("" before the first replica records it).
func (l *Log) initSchemaPG(ctx context.Context) (origin, vkey string, err error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("audit log: create schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, chainLockKey); err != nil {
		return "", "", fmt.Errorf("audit log: create schema: %w", err)
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('meta') IS NOT NULL`).Scan(&exists); err != nil {
		return "", "", fmt.Errorf("audit log: read schema: %w", err)
	}
	if !exists {
		origin, err := l.newOrigin()
		if err != nil {
			return "", "", err
		}
		for _, s := range pgSchemaDDL {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return "", "", fmt.Errorf("audit log: create schema: %w", err)
			}
		}
		for k, v := range map[string]string{"format": formatVersion, "origin": origin} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, k, v); err != nil {
				return "", "", fmt.Errorf("audit log: create schema: %w", err)
			}
		}
	}
	for _, s := range barrierDDL {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return "", "", fmt.Errorf("audit log: create schema: %w", err)
		}
	}
	if exists {
		d, err := pgSchemaDiff(ctx, tx)
		if err != nil {
			return "", "", err
		}
		if d != "" {
			return "", "", fmt.Errorf("audit log: PostgreSQL: the audit log's schema differs (%s); run airlock audit verify: %w", d, ErrInconsistent)
		}
	}
	meta := map[string]string{}
	rows, err := tx.QueryContext(ctx, `SELECT name, value FROM meta`)
	if err != nil {
		return "", "", fmt.Errorf("audit log: read meta: %w", err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return "", "", fmt.Errorf("audit log: read meta: %w", err)
		}
		meta[k] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", fmt.Errorf("audit log: read meta: %w", err)
	}
	if meta["format"] != formatVersion {
		return "", "", fmt.Errorf("audit log: PostgreSQL: format %q, this build reads %q", meta["format"], formatVersion)
	}
	origin = meta["origin"]
	if l.opts.Origin != "" && l.opts.Origin != origin {
		return "", "", fmt.Errorf("audit log: the log on PostgreSQL has origin %q, options say %q", origin, l.opts.Origin)
	}
	if err := tx.Commit(); err != nil {
		return "", "", fmt.Errorf("audit log: create schema: %w", err)
	}
	return origin, meta["vkey"], nil
}

// RecordedVerifierKey is the verifier key the first replica recorded
// with the log on PostgreSQL. Like a key file beside a SQLite log, it
// proves nothing to someone who distrusts the database: keep a copy.
func RecordedVerifierKey(ctx context.Context, db *sqldb.DB) (note.Verifier, error) {
	var vkey string
	err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'vkey'`).Scan(&vkey)
	if err != nil {
		return nil, fmt.Errorf("audit log: no verifier key recorded in the database (%v); pass it with --key FILE", err)
	}
	return ParseVerifierKey(vkey)
}

// recordVerifierKey records the log's verifier key in meta, once: every
// replica must sign with the key of the replica that started the log.
func (l *Log) recordVerifierKey(ctx context.Context, vkey string) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit log: record the verifier key: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, chainLockKey); err != nil {
		return fmt.Errorf("audit log: record the verifier key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES ('vkey', ?) ON CONFLICT (name) DO NOTHING`, vkey); err != nil {
		return fmt.Errorf("audit log: record the verifier key: %w", err)
	}
	var got string
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'vkey'`).Scan(&got); err != nil {
		return fmt.Errorf("audit log: record the verifier key: %w", err)
	}
	if got != vkey {
		return errKeyMismatch(got, vkey)
	}
	return tx.Commit()
}

func errKeyMismatch(log, mine string) error {
	return fmt.Errorf("audit log: this replica's checkpoint key (%s) is not the shared log's (%s): every replica signs with one key; copy keys/checkpoint.key and keys/checkpoint.vkey from the replica that started the log", mine, log)
}

// loadFrontierPG is loadFrontier in one query.
func loadFrontierPG(ctx context.Context, tx *sqldb.Tx, size int64) (frontier, error) {
	f := frontier{n: size}
	var idx []int64
	for lv := 0; lv < 63; lv++ {
		if size>>uint(lv)&1 == 1 {
			idx = append(idx, tlog.StoredHashIndex(lv, size>>uint(lv)-1))
		}
	}
	if len(idx) == 0 {
		return f, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT idx, hash FROM tree_hashes WHERE idx = ANY(?)`, idx)
	if err != nil {
		return f, fmt.Errorf("audit log: read the frontier: %w", err)
	}
	defer rows.Close()
	got := map[int64][]byte{}
	for rows.Next() {
		var i int64
		var h []byte
		if err := rows.Scan(&i, &h); err != nil {
			return f, fmt.Errorf("audit log: read the frontier: %w", err)
		}
		got[i] = h
	}
	if err := rows.Err(); err != nil {
		return f, fmt.Errorf("audit log: read the frontier: %w", err)
	}
	for lv := 0; lv < 63; lv++ {
		if size>>uint(lv)&1 == 1 {
			h := got[tlog.StoredHashIndex(lv, size>>uint(lv)-1)]
			if len(h) != tlog.HashSize {
				return f, fmt.Errorf("audit log: tree hash of level %d at size %d is missing: %w", lv, size, ErrInconsistent)
			}
			copy(f.nodes[lv][:], h)
		}
	}
	return f, nil
}

// refreshCheckpoint brings the writer's last checkpoint up to the
// database's: another replica may have signed one.
func (l *Log) refreshCheckpoint(ctx context.Context, tx *sqldb.Tx) error {
	var msg []byte
	err := tx.QueryRowContext(ctx, `SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1`).Scan(&msg)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("audit log: read the last checkpoint: %w", err)
	default:
		return l.takeCheckpoint(msg)
	}
	return nil
}

// takeCheckpoint makes the signed checkpoint msg from the database the
// writer's last when it is newer.
func (l *Log) takeCheckpoint(msg []byte) error {
	c, err := OpenCheckpoint(msg, l.vfy)
	if err != nil {
		return l.fail(fmt.Errorf("audit log: the last checkpoint on PostgreSQL: %w: %w", err, ErrInconsistent))
	}
	if c.Size > l.ckpt.Size {
		// Another replica signed: the interval starts again from it.
		l.ckpt, l.ckptAt = c, time.Now()
	}
	return nil
}

// signerLease reports whether this replica holds the signer lease,
// taking it when free. Only its holder signs periodic checkpoints.
func (l *Log) signerLease(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, l.opts.WriteTimeout)
	defer cancel()
	if l.lease == nil {
		c, err := l.db.Conn(ctx)
		if err != nil {
			return false
		}
		l.lease = c
	}
	var ok bool
	var err error
	if l.leaseHeld {
		// Still the same session, hence still the lock's holder.
		err = l.lease.QueryRowContext(ctx, `SELECT true`).Scan(&ok)
	} else {
		err = l.lease.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, signerLockKey).Scan(&ok)
	}
	if err != nil {
		l.dropLease()
		return false
	}
	if ok && !l.leaseHeld {
		l.log.Info("holding the checkpoint signer lease")
	}
	l.leaseHeld = ok
	return ok
}

// dropLease ends the lease's session: the lock goes with it (a pooled
// connection would keep it).
func (l *Log) dropLease() {
	if l.lease == nil {
		return
	}
	l.lease.Discard()
	l.lease, l.leaseHeld = nil, false
}
