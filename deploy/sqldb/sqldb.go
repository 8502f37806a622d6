// Package sqldb is the storage seam of airlock's stores: one database/sql
// handle over either engine, SQLite files (the embedded default) or
// PostgreSQL through pgx, and the few places where the two differ.
//
// The stores write their SQL once, with "?" placeholders; a DB, Tx or Conn
// of this package rebinds them to "$1, $2, …" on PostgreSQL. The SQL they
// share is the subset both engines read the same way: INSERT … ON
// CONFLICT … DO UPDATE, integers for times and flags, lower() for
// case-insensitive names. What differs (schemas, PRAGMAs, locks) is
// asked of Engine.
package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
	"sync"
)

// Engine is a database engine.
type Engine uint8

// The engines.
const (
	SQLite Engine = iota
	Postgres
)

func (e Engine) String() string {
	if e == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// DB is a database handle that speaks its engine's placeholders.
//
// Only the Context methods rebind: call ExecContext, QueryContext and
// QueryRowContext, never Exec, Query or QueryRow.
type DB struct {
	*sql.DB
	Engine Engine
}

// Wrap returns db as a DB of engine e.
func Wrap(db *sql.DB, e Engine) *DB { return &DB{DB: db, Engine: e} }

// ExecContext runs query, rebound for the engine.
func (d *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, d.Engine.Rebind(query), args...)
}

// QueryContext runs query, rebound for the engine.
func (d *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.Engine.Rebind(query), args...)
}

// QueryRowContext runs query, rebound for the engine.
func (d *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.Engine.Rebind(query), args...)
}

// BeginTx starts a transaction whose statements are rebound.
func (d *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := d.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, Engine: d.Engine}, nil
}

// Conn returns one connection of the pool, whose statements are rebound;
// Close returns it.
func (d *DB) Conn(ctx context.Context) (*Conn, error) {
	c, err := d.DB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, Engine: d.Engine}, nil
}

// Discard closes c's session instead of returning it to the pool: a
// session-level lock (or anything else the session holds) goes with it.
func (c *Conn) Discard() {
	c.Raw(func(any) error { return driver.ErrBadConn })
	c.Close()
}

// Tx is a transaction that speaks its engine's placeholders.
type Tx struct {
	*sql.Tx
	Engine Engine
}

// ExecContext runs query, rebound for the engine.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.Engine.Rebind(query), args...)
}

// QueryContext runs query, rebound for the engine.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.Engine.Rebind(query), args...)
}

// QueryRowContext runs query, rebound for the engine.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.Engine.Rebind(query), args...)
}

// Conn is one connection that speaks its engine's placeholders.
type Conn struct {
	*sql.Conn
	Engine Engine
}

// ExecContext runs query, rebound for the engine.
func (c *Conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.Conn.ExecContext(ctx, c.Engine.Rebind(query), args...)
}

// QueryContext runs query, rebound for the engine.
func (c *Conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.Conn.QueryContext(ctx, c.Engine.Rebind(query), args...)
}

// QueryRowContext runs query, rebound for the engine.
func (c *Conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.Conn.QueryRowContext(ctx, c.Engine.Rebind(query), args...)
}

// BeginTx starts a transaction on this connection.
func (c *Conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, Engine: c.Engine}, nil
}

// Querier is what DB, Tx and Conn have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var rebound sync.Map // query → its PostgreSQL form

// Rebind returns query with its "?" placeholders numbered for the engine
// ("$1", "$2", … on PostgreSQL; unchanged on SQLite). A "?" inside a
// quoted string or identifier is left alone.
func (e Engine) Rebind(query string) string {
	if e != Postgres || !strings.Contains(query, "?") {
		return query
	}
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	q := b.String()
	rebound.Store(query, q)
	return q
}
