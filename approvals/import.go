package approvals

import (
	"context"
	"fmt"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// importTables are the state tables in an order their references allow,
// each with the column its rows are copied in order of.
var importTables = [][2]string{
	{"runs", "created_at, id"},
	{"requests", "requested_at, id"},
	{"quota_uses", "at"},
	{"reviewers", "name"},
	{"reviewer_tokens", "id"},
	{"agents", "id"},
	{"admin_events", "seq"},
}

// ImportSQLite copies the state database at path (brought to this
// build's schema first) into db, whose state tables must be empty, and
// returns how many rows of each table it copied.
func ImportSQLite(ctx context.Context, path string, db *sqldb.DB) (map[string]int64, error) {
	src, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := migratePG(ctx, db); err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("import into PostgreSQL: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, stateLockKey); err != nil {
		return nil, fmt.Errorf("import into PostgreSQL: %w", err)
	}
	counts := map[string]int64{}
	for _, t := range importTables {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+t[0]).Scan(&n); err != nil {
			return nil, fmt.Errorf("import into PostgreSQL: %w", err)
		}
		if n > 0 {
			return nil, fmt.Errorf("the PostgreSQL database already holds state (%d rows in %s); import into an empty one", n, t[0])
		}
	}
	for _, t := range importTables {
		cols, err := sqldb.Columns(ctx, tx, t[0])
		if err != nil {
			return nil, err
		}
		if counts[t[0]], err = sqldb.CopyTable(ctx, src, tx, t[0], t[0], cols, t[1]); err != nil {
			return nil, err
		}
	}
	if err := sqldb.Resequence(ctx, tx, "admin_events", "seq"); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("import into PostgreSQL: %w", err)
	}
	return counts, nil
}
