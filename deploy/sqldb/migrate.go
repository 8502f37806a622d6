package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrateLockKey serializes schema changes across replicas.
var migrateLockKey = LockKey("schema")

// Migrate brings component's tables on PostgreSQL to version len(steps):
// steps[i] takes version i to i+1. Each step commits with its version;
// all run under an advisory lock, so replicas starting together migrate
// once. A database at a later version than this build knows is refused:
// an older gateway must not write to tables it does not understand.
func (d *DB) Migrate(ctx context.Context, component string, steps []string) error {
	if d.Engine != Postgres {
		return errors.New("storage: Migrate is for PostgreSQL")
	}
	conn, err := d.Conn(ctx)
	if err != nil {
		return fmt.Errorf("storage: migrate %s: %w", component, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, migrateLockKey); err != nil {
		return fmt.Errorf("storage: migrate %s: %w", component, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, migrateLockKey)
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component  TEXT PRIMARY KEY,
		version    BIGINT NOT NULL,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("storage: migrate %s: %w", component, err)
	}
	v, err := version(ctx, conn, component)
	if err != nil {
		return err
	}
	if v > len(steps) {
		return fmt.Errorf("storage: the %s tables are at schema version %d, newer than this gateway's %d: upgrade the gateway", component, v, len(steps))
	}
	for ; v < len(steps); v++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("storage: migrate %s: %w", component, err)
		}
		if _, err := tx.ExecContext(ctx, steps[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("storage: migrate %s from version %d: %w", component, v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)
			ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`,
			component, v+1, time.Now().UnixNano()); err != nil {
			tx.Rollback()
			return fmt.Errorf("storage: migrate %s from version %d: %w", component, v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("storage: migrate %s from version %d: %w", component, v, err)
		}
	}
	return nil
}

// Versions returns each component's schema version on PostgreSQL.
func (d *DB) Versions(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	var exists bool
	if err := d.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("storage: schema versions: %w", err)
	}
	if !exists {
		return out, nil
	}
	rows, err := d.QueryContext(ctx, `SELECT component, version FROM schema_migrations ORDER BY component`)
	if err != nil {
		return nil, fmt.Errorf("storage: schema versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, fmt.Errorf("storage: schema versions: %w", err)
		}
		out[c] = v
	}
	return out, rows.Err()
}

func version(ctx context.Context, q Querier, component string) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM schema_migrations WHERE component = ?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: schema version of %s: %w", component, err)
	}
	return v, nil
}
