package sqldb

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE x = ? AND y = ?", "SELECT a FROM t WHERE x = $1 AND y = $2"},
		{"INSERT INTO t VALUES (?,?,?)", "INSERT INTO t VALUES ($1,$2,$3)"},
		{"SELECT '?' || ? FROM \"a?b\" WHERE c = ?", "SELECT '?' || $1 FROM \"a?b\" WHERE c = $2"},
		{"SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , $1"},
	} {
		if got := Postgres.Rebind(c.in); got != c.want {
			t.Errorf("Postgres.Rebind(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := SQLite.Rebind(c.in); got != c.in {
			t.Errorf("SQLite.Rebind(%q) = %q, want it unchanged", c.in, got)
		}
	}
}

func TestHasPassword(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://airlock@db/airlock":                        false,
		"postgres://airlock:s3cret@db/airlock":                 true,
		"postgresql://airlock@db/airlock?password=s3cret":      true,
		"postgres://airlock:s3cret@db1,db2/airlock":            true,
		"postgres://airlock@db1:5432,db2:5432/airlock":         false,
		"host=db user=airlock dbname=airlock":                  false,
		"host=db user=airlock password=s3cret dbname=airlock":  true,
		"host=db user=airlock PASSWORD=s3cret dbname=airlock":  true,
		"postgres://airlock@db/airlock?sslmode=verify-full":    false,
		"postgres://airlock@db/airlock?application_name=pass:": false,
	} {
		if got := hasPassword(raw); got != want {
			t.Errorf("hasPassword(%q) = %v, want %v", raw, got, want)
		}
	}
}

// A server over the network needs verified TLS; loopback and sockets do
// not. The check runs before any dial, so nothing here needs a server.
func TestOpenPostgresRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"postgres://airlock:hunter2@db.internal/airlock", "password_file"},
		{"host=db.internal user=airlock password=hunter2", "password_file"},
		{"postgres://airlock@db.internal/airlock", "without verified TLS"},
		{"postgres://airlock@db.internal/airlock?sslmode=require", "without verified TLS"},
		{"postgres://airlock@db.internal/airlock?sslmode=prefer", "without verified TLS"},
		{"postgres://airlock@db.internal/airlock?sslmode=disable", "without verified TLS"},
		{"postgres://airlock@127.0.0.1:1,db.internal:5432/airlock?sslmode=disable", "without verified TLS"},
		{"", "no PostgreSQL URL"},
		{"postgres://airlock@[::1/airlock", "URL"},
	} {
		_, err := OpenPostgres(ctx, PostgresOptions{URL: c.url})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenPostgres(%q) = %v, want an error about %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenPostgres(%q): the error quotes the password: %v", c.url, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	got := Describe("postgres://airlock@db.internal:6543/state?sslmode=verify-full&application_name=x")
	if got != "airlock@db.internal:6543/state" {
		t.Errorf("Describe = %q", got)
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	ctx := context.Background()
	dsn, err := c.AddPasswordRole("airlock_pw", "correct-horse")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pg-password")

	t.Run("password file", func(t *testing.T) {
		if _, err := OpenPostgres(ctx, PostgresOptions{URL: dsn}); err == nil {
			t.Fatal("connected without the password")
		}
		os.WriteFile(pwFile, []byte("wrong-password\n"), 0o600)
		_, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile})
		if err == nil {
			t.Fatal("connected with a wrong password")
		}
		if strings.Contains(err.Error(), "wrong-password") {
			t.Errorf("the error quotes the password: %v", err)
		}
		if !strings.Contains(err.Error(), "airlock_pw@127.0.0.1") {
			t.Errorf("the error does not say where: %v", err)
		}
		os.WriteFile(pwFile, []byte("correct-horse\n"), 0o600)
		os.Chmod(pwFile, 0o644)
		if _, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile}); err == nil || !strings.Contains(err.Error(), "password_file") {
			t.Fatalf("a world-readable password file: %v", err)
		}
		os.Chmod(pwFile, 0o600)
		os.WriteFile(pwFile, []byte("correct-horse\nsecond line\n"), 0o600)
		if _, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile}); err == nil || !strings.Contains(err.Error(), "one line") {
			t.Fatalf("a two-line password file: %v", err)
		}
		os.WriteFile(pwFile, []byte("correct-horse\n"), 0o600)
		db, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	})

	t.Run("placeholders", func(t *testing.T) {
		db, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v BYTEA NOT NULL, n BIGINT)`); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "a"} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO kv (k, v, n) VALUES (?, ?, ?)
				ON CONFLICT(k) DO UPDATE SET n = kv.n + excluded.n`, k, []byte("?"+k), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var v []byte
		var n int64
		if err := conn.QueryRowContext(ctx, `SELECT v, n FROM kv WHERE k = ? AND '?' = '?'`, "a").Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if string(v) != "?a" || n != 2 {
			t.Errorf("got %q %d, want \"?a\" 2", v, n)
		}
		var explicit bool
		if err := db.QueryRowContext(ctx, `SELECT n - 1 FROM kv WHERE k = ?`, "b").Scan(&explicit); err != nil || explicit {
			t.Errorf("an integer flag scans as a bool: %v %v", explicit, err)
		}
		var none sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT max(n) FROM kv WHERE k = ?`, "zz").Scan(&none); err != nil || none.Valid {
			t.Errorf("max of nothing: %v %v", none, err)
		}
	})

	// Last: it stops the server.
	t.Run("unavailable", func(t *testing.T) {
		db, err := OpenPostgres(ctx, PostgresOptions{URL: dsn, PasswordFile: pwFile, ConnectTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `SELEC 1`); err == nil || Unavailable(err) {
			t.Errorf("a statement error: %v, Unavailable %v", err, Unavailable(err))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES ('a', '')`); err == nil || Unavailable(err) {
			t.Errorf("a constraint error: %v, Unavailable %v", err, Unavailable(err))
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		for range 2 { // a pooled connection cut, then a refused dial
			if _, err := db.ExecContext(ctx, `SELECT 1`); !Unavailable(err) {
				t.Errorf("with the server stopped: %v, Unavailable false", err)
			}
		}
	})
}
