package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockgw/airlock/deploy/pgtest"
)

// TestClusterServesAndRestarts: a cluster of our own takes a connection,
// keeps a committed row across a restart, and refuses connections while
// stopped.
func TestClusterServesAndRestarts(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	dsn, err := c.CreateDatabase("airlock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Log())
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before the restart')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("a stopped cluster took a connection")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != "before the restart" {
		t.Fatalf("after the restart: %q %v", v, err)
	}
}
