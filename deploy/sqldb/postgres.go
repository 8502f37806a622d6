package sqldb

import (
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgresOptions say how to reach a PostgreSQL database.
type PostgresOptions struct {
	// URL is a libpq connection string (postgres://user@host/db?… or
	// key=value pairs). It must not hold a password.
	URL string
	// PasswordFile holds the password (one line, owner-only). Empty: none
	// (trust, certificates, or libpq's own password file).
	PasswordFile string
	// MaxConns caps the pool (zero: 16).
	MaxConns int
	// ConnectTimeout bounds each connection attempt (zero: 10s).
	ConnectTimeout time.Duration
	// AppName is application_name, shown in pg_stat_activity (zero: "airlock").
	AppName string
}

// maxPasswordFile bounds the password file.
const maxPasswordFile = 4096

// OpenPostgres opens a pool to a PostgreSQL database and checks that it
// answers. A server reached over the network must be reached over TLS that
// verifies it (sslmode=verify-full or verify-ca): airlock's state and
// audit log must not cross a network in the clear or to an unverified
// peer. Errors never quote the password.
func OpenPostgres(ctx context.Context, o PostgresOptions) (*DB, error) {
	if strings.TrimSpace(o.URL) == "" {
		return nil, errors.New("storage: no PostgreSQL URL")
	}
	if hasPassword(o.URL) {
		return nil, errors.New("storage: the PostgreSQL URL holds a password; put it in password_file instead (a configuration file is not a secret)")
	}
	cfg, err := pgx.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("storage: PostgreSQL URL: %w", err)
	}
	if o.PasswordFile != "" {
		b, err := securefile.ReadSecret(o.PasswordFile, maxPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("storage: password_file: %w", err)
		}
		pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if pw == "" || strings.ContainsAny(pw, "\r\n\x00") {
			return nil, fmt.Errorf("storage: password_file %s must hold the password on one line", o.PasswordFile)
		}
		cfg.Password = pw
	}
	if err := checkTLS(&cfg.Config); err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = o.ConnectTimeout
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	app := o.AppName
	if app == "" {
		app = "airlock"
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = app
	// Times are Unix nanoseconds in BIGINT columns: no time zone enters,
	// but keep the session's own in UTC for anyone reading it by hand.
	cfg.RuntimeParams["timezone"] = "UTC"
	db := stdlib.OpenDB(*cfg)
	n := o.MaxConns
	if n <= 0 {
		n = 16
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: cannot reach PostgreSQL at %s: %w", Describe(o.URL), err)
	}
	return Wrap(db, Postgres), nil
}

// CheckURL checks a connection string without dialing: no password in
// it, and verified TLS to a server over the network (as OpenPostgres).
func CheckURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("no PostgreSQL URL")
	}
	if hasPassword(raw) {
		return errors.New("the PostgreSQL URL holds a password; put it in password_file instead (a configuration file is not a secret)")
	}
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return err
	}
	if err := checkTLS(cfg); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "storage: "))
	}
	return nil
}

// Describe names a PostgreSQL URL for messages: user, host, port and
// database, never a password or other parameters.
func Describe(raw string) string {
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, host, cfg.Port, cfg.Database)
}

// hasPassword reports whether a connection string carries a password.
func hasPassword(raw string) bool {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			// pgx parses some URLs net/url does not (several hosts); look
			// for user:password@ by hand.
			rest := raw[strings.Index(raw, "://")+3:]
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				return strings.Contains(rest[:at], ":")
			}
			return strings.Contains(strings.ToLower(raw), "password=")
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		_, ok := u.Query()["password"]
		return ok
	}
	for _, f := range strings.Fields(raw) {
		if strings.HasPrefix(strings.ToLower(f), "password=") {
			return true
		}
	}
	return false
}

// checkTLS refuses a configuration that would reach a server over the
// network without TLS, or over TLS that does not verify the server.
func checkTLS(cfg *pgconn.Config) error {
	type attempt struct {
		host string
		tls  *tls.Config
	}
	all := []attempt{{cfg.Host, cfg.TLSConfig}}
	for _, f := range cfg.Fallbacks {
		all = append(all, attempt{f.Host, f.TLSConfig})
	}
	for _, a := range all {
		if local(a.host) {
			continue
		}
		if a.tls == nil || (a.tls.InsecureSkipVerify && a.tls.VerifyPeerCertificate == nil) {
			return fmt.Errorf("storage: PostgreSQL at %s is reached over the network without verified TLS; add sslmode=verify-full (and sslrootcert=… unless the system's roots sign its certificate)", a.host)
		}
	}
	return nil
}

// local reports whether host is a Unix socket directory or a loopback
// address or name.
func local(host string) bool {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LockKey is the advisory-lock key of name: the same name gives the same
// key on every replica.
func LockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("airlock/" + name))
	return int64(h.Sum64())
}

// Listen LISTENs on channel on a connection of its own and calls got with
// each notification's payload, until ctx ends or the connection fails
// (its error is returned; the caller listens again). ready is called once
// listening, before the first wait: what was notified before then was
// missed, so ready is where a caller catches up.
func (d *DB) Listen(ctx context.Context, channel string, ready func(), got func(payload string)) error {
	if d.Engine != Postgres {
		return errors.New("storage: Listen is for PostgreSQL")
	}
	c, err := d.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Discard() // a listening session must not go back to the pool
	return c.Pgx(func(pc *pgx.Conn) error {
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return err
		}
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			got(n.Payload)
		}
	})
}

// Pgx calls fn with c's PostgreSQL connection, for what database/sql
// cannot say (a pipeline of statements in one round trip, LISTEN). A
// connection fn leaves in a state the pool cannot reuse must be
// discarded (Discard) afterwards.
func (c *Conn) Pgx(fn func(*pgx.Conn) error) error {
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("storage: a %T is not a pgx connection", dc)
		}
		return fn(sc.Conn())
	})
}

// Unavailable reports whether err says the database could not be
// reached or is not serving (a connection refused, cut or timed out; a
// server starting, stopping or out of connections), rather than that a
// statement was wrong: what a caller tells as "storage unavailable".
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		// 08: connection exception; 53: insufficient resources; 57:
		// operator intervention (shutdown, restart).
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57")
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
