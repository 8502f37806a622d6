package pgtest_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
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

// TestStartOnATakenPortSaysSo: a server whose port another listener
// holds fails to start with an error that wraps testkit.ErrPortInUse (the
// start of a cluster then tries another port), and starts once the port
// is free again.
func TestStartOnATakenPortSaysSo(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(pgtest.AltHost, strconv.Itoa(c.Port)))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start()
	l.Close()
	if !errors.Is(err, testkit.ErrPortInUse) {
		t.Fatalf("Start with %s:%d taken = %v, want testkit.ErrPortInUse", pgtest.AltHost, c.Port, err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("Start once the port is free: %v", err)
	}
}
