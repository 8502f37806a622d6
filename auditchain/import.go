package auditchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// ImportSQLite copies the log in the SQLite file at path into db, a
// PostgreSQL database that holds no log yet: every entry, stored tree
// hash and checkpoint as it is (the same bytes, seq numbers and order),
// with the log's origin and vkey, its verifier key. It does not verify:
// the caller verifies the file before and the database after. It returns
// how many entries it copied.
func ImportSQLite(ctx context.Context, path string, db *sqldb.DB, vkey string) (int64, error) {
	src, err := openReadOnly(ctx, path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	meta := map[string]string{}
	rows, err := src.QueryContext(ctx, `SELECT name, value FROM meta`)
	if err != nil {
		return 0, fmt.Errorf("audit log: read %s: %w", path, err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return 0, fmt.Errorf("audit log: read %s: %w", path, err)
		}
		meta[k] = v
	}
	rows.Close()
	if meta["format"] != formatVersion || meta["origin"] == "" {
		return 0, fmt.Errorf("audit log: %s: format %q, this build reads %q", path, meta["format"], formatVersion)
	}
	if v, err := ParseVerifierKey(vkey); err != nil || v.Name() != meta["origin"] {
		return 0, fmt.Errorf("audit log: the verifier key is not the key of %s (origin %q)", path, meta["origin"])
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("audit log: import: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, chainLockKey); err != nil {
		return 0, fmt.Errorf("audit log: import: %w", err)
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('meta') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("audit log: import: %w", err)
	}
	if exists {
		return 0, errors.New("audit log: the PostgreSQL database already holds an audit log; import into an empty one")
	}
	for _, s := range pgSchemaDDL {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return 0, fmt.Errorf("audit log: import: %w", err)
		}
	}
	for _, kv := range [][2]string{{"format", formatVersion}, {"origin", meta["origin"]}, {"vkey", vkey}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, kv[0], kv[1]); err != nil {
			return 0, fmt.Errorf("audit log: import: %w", err)
		}
	}
	n, err := sqldb.CopyTable(ctx, src, tx, "entries", "entries", []string{"seq", "time_ns", "kind", "action_id", "run_id", "leaf", "leaf_hash", "chain"}, "seq")
	if err != nil {
		return 0, err
	}
	if _, err := sqldb.CopyTable(ctx, src, tx, "tree_hashes", "tree_hashes", []string{"idx", "hash"}, "idx"); err != nil {
		return 0, err
	}
	if _, err := sqldb.CopyTable(ctx, src, tx, "checkpoints", "checkpoints", []string{"id", "size", "note"}, "id"); err != nil {
		return 0, err
	}
	if err := sqldb.Resequence(ctx, tx, "checkpoints", "id"); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("audit log: import: %w", err)
	}
	return n, nil
}

// ImportOutputs copies the output store in the SQLite file at path into
// db's (blobs already there are kept: they are addressed by digest).
func ImportOutputs(ctx context.Context, path string, db *sqldb.DB) (int64, error) {
	if err := db.Migrate(ctx, "outputs", pgOutputMigrations); err != nil {
		return 0, err
	}
	src, err := openReadOnly(ctx, path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("audit log: import outputs: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TEMPORARY TABLE import_blobs (LIKE blobs) ON COMMIT DROP`); err != nil {
		return 0, fmt.Errorf("audit log: import outputs: %w", err)
	}
	n, err := sqldb.CopyTable(ctx, src, tx, "blobs", "import_blobs", []string{"digest", "data"}, "digest")
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO blobs SELECT * FROM import_blobs ON CONFLICT (digest) DO NOTHING`); err != nil {
		return 0, fmt.Errorf("audit log: import outputs: %w", err)
	}
	return n, tx.Commit()
}
