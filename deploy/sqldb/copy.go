package sqldb

import (
	"context"
	"fmt"
	"strings"
)

// CopyTable copies every row of table from's columns in src (SQLite)
// into table into in dst (a PostgreSQL transaction), in order of orderBy,
// a few hundred rows per statement, and returns how many it copied.
// Identity columns keep their values (OVERRIDING SYSTEM VALUE); the
// caller moves their sequences on (Resequence).
func CopyTable(ctx context.Context, src Querier, dst *Tx, from, into string, cols []string, orderBy string) (int64, error) {
	table := from
	rows, err := src.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM `+from+` ORDER BY `+orderBy)
	if err != nil {
		return 0, fmt.Errorf("storage: read %s: %w", table, err)
	}
	defer rows.Close()
	const perStatement = 200
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	prefix := `INSERT INTO ` + into + ` (` + strings.Join(cols, ", ") + `) OVERRIDING SYSTEM VALUE VALUES `
	var n int64
	args := make([]any, 0, perStatement*len(cols))
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		k := len(args) / len(cols)
		q := prefix + strings.TrimSuffix(strings.Repeat(tuple+", ", k), ", ")
		if _, err := dst.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("storage: write %s: %w", table, err)
		}
		n += int64(k)
		args = args[:0]
		return nil
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return n, fmt.Errorf("storage: read %s: %w", table, err)
		}
		args = append(args, vals...)
		if len(args) >= perStatement*len(cols) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("storage: read %s: %w", table, err)
	}
	return n, flush()
}

// Resequence moves the identity sequence of table.col past its largest
// value, after rows were copied with their own.
func Resequence(ctx context.Context, tx *Tx, table, col string) error {
	_, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence(?, ?), coalesce((SELECT max(`+col+`) FROM `+table+`), 0) + 1, false)`, table, col)
	if err != nil {
		return fmt.Errorf("storage: resequence %s: %w", table, err)
	}
	return nil
}

// Columns are table's columns on PostgreSQL, in order.
func Columns(ctx context.Context, q Querier, table string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 && rows.Err() == nil {
		return nil, fmt.Errorf("storage: no table %s", table)
	}
	return cols, rows.Err()
}
