package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
)

// Where the engine keeps its state: SQLite files in the state directory
// (no storage block), or a PostgreSQL database (storage { postgres }).

// OpenStorage opens the PostgreSQL database a storage block names (nil,
// nil without one). The CLI's offline commands use it too.
func OpenStorage(ctx context.Context, cfg *config.Config) (*sqldb.DB, error) {
	if cfg.Storage == nil {
		return nil, nil
	}
	host, _ := os.Hostname()
	return sqldb.OpenPostgres(ctx, sqldb.PostgresOptions{
		URL:          cfg.Storage.Postgres,
		PasswordFile: cfg.Storage.PasswordFile,
		AppName:      "airlock " + host,
	})
}

// exclusiveLockKey is held by the one gateway that uses a database.
var exclusiveLockKey = sqldb.LockKey("gateway")

// holder holds the database for this gateway alone: a session advisory
// lock on a connection of its own, checked every few seconds. Until the
// replica protocol (leases, ownership of in-flight actions) lands, a
// second gateway on the same database is refused, and a gateway that
// loses its lock (the database restarted or the connection was cut)
// refuses actions until it has it again.
type holder struct {
	db  *sqldb.DB
	log hclog.Logger
	// lost is called when the lock is lost: the engine cancels its
	// in-flight actions.
	lost func()
	conn *sqldb.Conn
	ok   atomic.Bool
	stop context.CancelFunc
	done chan struct{}
}

// holdDatabase takes the exclusive lock, or says which gateway has it.
func holdDatabase(ctx context.Context, db *sqldb.DB, log hclog.Logger, lost func()) (*holder, error) {
	h := &holder{db: db, log: log, lost: lost}
	got, err := h.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: storage: %w", err)
	}
	if !got {
		var who string
		db.QueryRowContext(ctx, `SELECT coalesce(string_agg(a.application_name || ' (pid ' || a.pid || ')', ', '), 'another gateway')
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND (l.classid::bigint << 32 | l.objid::bigint) = ?`, exclusiveLockKey).Scan(&who)
		return nil, fmt.Errorf("engine: storage: the PostgreSQL database is in use by %s; this version runs one gateway per database (several replicas come with their leases)", who)
	}
	h.ok.Store(true)
	hctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	go h.watch(hctx)
	return h, nil
}

func (h *holder) acquire(ctx context.Context) (bool, error) {
	c, err := h.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	var got bool
	if err := c.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, exclusiveLockKey).Scan(&got); err != nil {
		c.Discard()
		return false, err
	}
	if !got {
		c.Close()
		return false, nil
	}
	h.conn = c
	return true, nil
}

// watch checks the lock's session every two seconds and takes the lock
// again after losing it.
func (h *holder) watch(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if h.conn != nil {
			if _, err := h.conn.ExecContext(cctx, `SELECT 1`); err != nil {
				h.conn.Discard()
				h.conn = nil
				if h.ok.Swap(false) {
					h.log.Error("lost the database: cancelling the actions in flight and refusing new ones until it is back", "error", err)
					h.lost()
				}
			}
		}
		if h.conn == nil {
			if got, err := h.acquire(cctx); err == nil && got {
				h.ok.Store(true)
				h.log.Info("the database is back")
			}
		}
		cancel()
	}
}

// Healthy reports whether the gateway holds its database.
func (h *holder) healthy() bool { return h == nil || h.ok.Load() }

func (h *holder) close() {
	if h == nil {
		return
	}
	h.stop()
	<-h.done
	if h.conn != nil {
		h.conn.Discard()
	}
}

// storageLost cancels every action in flight: the gateway no longer
// holds its database.
func (e *Engine) storageLost() {
	old := e.inflightCtx.Swap(newCancelCtx())
	old.cancel()
}

// cancelCtx is a context and its cancel.
type cancelCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newCancelCtx() *cancelCtx {
	ctx, cancel := context.WithCancel(context.Background())
	return &cancelCtx{ctx, cancel}
}

// verifyOptions are where VerifyAudit reads the log.
func (e *Engine) verifyOptions() auditchain.VerifyOptions {
	if e.pg != nil {
		return auditchain.VerifyOptions{DB: e.pg}
	}
	return auditchain.VerifyOptions{Path: filepath.Join(e.Config().StateDir, "audit.db")}
}
