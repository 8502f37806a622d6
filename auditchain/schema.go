package auditchain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// formatVersion is stored in meta and bumped on any incompatible change to
// the tables or the leaf encoding.
const formatVersion = "1"

// schemaDDL creates the log's tables. Every value column is STRICT and NOT
// NULL; the triggers refuse UPDATE and DELETE so that a mistaken statement
// cannot rewrite history. They are a guard against accidents, not the
// security control: anyone who can write the file can drop them, which
// Verify reports as schema tampering.
var schemaDDL = []string{
	`CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`,
	`CREATE TABLE entries (
	seq INTEGER PRIMARY KEY,
	time_ns INTEGER NOT NULL,
	kind TEXT NOT NULL,
	action_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	leaf BLOB NOT NULL,
	leaf_hash BLOB NOT NULL,
	chain BLOB NOT NULL
) STRICT`,
	`CREATE INDEX entries_by_action ON entries (action_id, kind)`,
	`CREATE INDEX entries_connecting ON entries (action_id) WHERE kind = 'action.connecting'`,
	`CREATE TABLE tree_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL) STRICT`,
	`CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, size INTEGER NOT NULL, note BLOB NOT NULL) STRICT`,
	`CREATE INDEX checkpoints_by_size ON checkpoints (size)`,
}

var appendOnlyTables = []string{"meta", "entries", "tree_hashes", "checkpoints"}

func init() {
	for _, t := range appendOnlyTables {
		for _, op := range []string{"UPDATE", "DELETE"} {
			schemaDDL = append(schemaDDL, fmt.Sprintf(
				`CREATE TRIGGER %s_no_%s BEFORE %s ON %s BEGIN SELECT RAISE(ABORT, 'auditchain: %s is append-only'); END`,
				t, strings.ToLower(op), op, t, t))
		}
	}
}

// schemaObject is one row of sqlite_schema.
type schemaObject struct {
	Type, Name, Table, SQL string
}

func readSchema(ctx context.Context, q querier) ([]schemaObject, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		return nil, fmt.Errorf("audit log: read schema: %w", err)
	}
	defer rows.Close()
	var objs []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.Type, &o.Name, &o.Table, &o.SQL); err != nil {
			return nil, fmt.Errorf("audit log: read schema: %w", err)
		}
		objs = append(objs, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: read schema: %w", err)
	}
	return objs, nil
}

var expected struct {
	once sync.Once
	objs []schemaObject
	err  error
}

// expectedSchema is what sqlite_schema holds after schemaDDL, derived once
// from a fresh in-memory database so that SQLite's own normalisation
// applies.
func expectedSchema(ctx context.Context) ([]schemaObject, error) {
	expected.once.Do(func() { expected.objs, expected.err = buildExpectedSchema(context.WithoutCancel(ctx)) })
	return expected.objs, expected.err
}

func buildExpectedSchema(ctx context.Context) ([]schemaObject, error) {
	db, err := sql.Open("sqlite3", "file:expected?mode=memory")
	if err != nil {
		return nil, fmt.Errorf("audit log: expected schema: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range schemaDDL {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("audit log: expected schema: %w", err)
		}
	}
	return readSchema(ctx, db)
}

// schemaDiff describes how got differs from the expected schema, or "".
func schemaDiff(want, got []schemaObject) string {
	w := map[string]schemaObject{}
	for _, o := range want {
		w[o.Type+" "+o.Name] = o
	}
	var diffs []string
	seen := map[string]bool{}
	for _, o := range got {
		k := o.Type + " " + o.Name
		seen[k] = true
		exp, ok := w[k]
		switch {
		case !ok:
			diffs = append(diffs, "unexpected "+k)
		case exp != o:
			diffs = append(diffs, "altered "+k)
		}
	}
	for _, o := range want {
		if k := o.Type + " " + o.Name; !seen[k] {
			diffs = append(diffs, "missing "+k)
		}
	}
	return strings.Join(diffs, "; ")
}

// querier is the subset of *sql.DB, *sql.Conn and *sql.Tx used for reads.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dbHashReader reads stored Merkle hashes from the tree_hashes table.
type dbHashReader struct {
	ctx context.Context
	q   querier
}

func (r dbHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		var b []byte
		err := r.q.QueryRowContext(r.ctx, `SELECT hash FROM tree_hashes WHERE idx = ?`, idx).Scan(&b)
		if err != nil {
			return nil, fmt.Errorf("audit log: read tree hash %d: %w", idx, err)
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("audit log: tree hash %d has %d bytes", idx, len(b))
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// roDSN is the connection string for read-only access: the verifier and
// the CLI never write to the file they examine. A file no one has open
// (neither -wal nor -shm beside it: an evidence copy) is opened immutable,
// so that not even those two files appear next to it; a live log (or a
// copy taken with its WAL) is read through its WAL, which needs them.
func roDSN(path string) string {
	dsn := "file:" + escapePath(path) + "?mode=ro&_busy_timeout=5000"
	_, walErr := os.Lstat(path + "-wal")
	_, shmErr := os.Lstat(path + "-shm")
	if errors.Is(walErr, fs.ErrNotExist) && errors.Is(shmErr, fs.ErrNotExist) {
		dsn += "&immutable=1"
	}
	return dsn
}

func rwDSN(path string) string {
	return "file:" + escapePath(path) + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000&_txlock=immediate"
}

func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}
