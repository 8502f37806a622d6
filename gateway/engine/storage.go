package engine

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// Where the engine keeps its state: SQLite files in the state directory
// (no storage block), or a PostgreSQL database (storage { postgres })
// that several gateway replicas share.
//
// On PostgreSQL each replica holds a lease: a row in replicas whose
// lease_until (on the database's clock) its heartbeat moves on. Each
// action a replica runs is a row in inflight from its connection slot to
// its recorded outcome; the rows of one target are its connection slots
// across replicas. When a lease runs out, any survivor records the dead
// replica's in-flight actions as interrupted, expires the approval
// requests its agents waited for, and removes it. A replica that cannot
// renew its lease for half of it cancels its in-flight actions and dials
// nothing until it can: it stops before anyone may take its actions over.

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

// MigrateStorage brings every table of the gateway's state on PostgreSQL
// to this build's schema, as a replica does when it starts (the audit
// log's tables come with its first replica, which records its key).
func MigrateStorage(ctx context.Context, db *sqldb.DB) error {
	if err := approvals.MigratePostgres(ctx, db); err != nil {
		return err
	}
	if err := auditchain.MigrateOutputs(ctx, db); err != nil {
		return err
	}
	return db.Migrate(ctx, "replicas", replicaMigrations)
}

// replicaMigrations are the replica tables' versions (sqldb.Migrate).
var replicaMigrations = []string{
	`CREATE TABLE replicas (
		id          TEXT PRIMARY KEY,
		host        TEXT NOT NULL,
		pid         BIGINT NOT NULL,
		started_at  BIGINT NOT NULL,
		lease_until TIMESTAMPTZ NOT NULL
	);
	CREATE TABLE inflight (
		action_id TEXT PRIMARY KEY,
		replica   TEXT NOT NULL,
		run_id    TEXT NOT NULL,
		target    TEXT NOT NULL,
		since     BIGINT NOT NULL
	);
	CREATE INDEX inflight_replica ON inflight (replica);
	CREATE INDEX inflight_target ON inflight (target);
	CREATE TABLE shared_keys (
		name        TEXT PRIMARY KEY,
		fingerprint TEXT NOT NULL
	);`,
	// Version 2 (replicaDigestVersion): the security digest of the
	// configuration each replica enforces, for drift (drift.go).
	`ALTER TABLE replicas ADD COLUMN config_digest TEXT NOT NULL DEFAULT '';
	ALTER TABLE replicas ADD COLUMN config_digest_version INTEGER NOT NULL DEFAULT 0;`,
}

// replica is this gateway's membership among those sharing the database.
type replica struct {
	e     *core
	db    *sqldb.DB
	log   hclog.Logger
	lease time.Duration
	host  string

	id     atomic.Pointer[string]
	lastOK atomic.Int64 // when a renewal last succeeded, on the engine clock's Elapsed
	down   atomic.Bool  // past half the lease without a renewal
	drift  driftWatch

	stop context.CancelFunc
	done chan struct{}
}

// joinReplicas registers this gateway as a replica and starts its lease.
func joinReplicas(ctx context.Context, e *core, db *sqldb.DB, lease time.Duration) (*replica, error) {
	if err := db.Migrate(ctx, "replicas", replicaMigrations); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	r := &replica{e: e, db: db, log: e.log.Named("replica"), lease: lease, host: host}
	if err := r.register(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// register adds a row with a new id and a fresh lease.
func (r *replica) register(ctx context.Context) error {
	id := fmt.Sprintf("%s/%d/%s", r.host, os.Getpid(), rand.Text()[:8])
	digest := r.e.configDigest()
	if _, err := r.db.ExecContext(ctx, `INSERT INTO replicas (id, host, pid, started_at, lease_until, config_digest, config_digest_version)
		VALUES (?, ?, ?, ?, clock_timestamp() + make_interval(secs => ?), ?, ?)`,
		id, r.host, os.Getpid(), r.e.clock.Now().UnixNano(), r.lease.Seconds(), digest, config.SecurityDigestVersion); err != nil {
		return fmt.Errorf("storage: register this replica: %w", err)
	}
	r.id.Store(&id)
	r.drift.mu.Lock()
	r.drift.stored = digest
	r.drift.mu.Unlock()
	r.e.metrics.setConfigDigest(digest)
	r.lastOK.Store(int64(r.e.clock.Elapsed()))
	r.log.Info("joined the replicas", "replica", id, "lease", r.lease)
	return nil
}

// ID is this replica's id.
func (r *replica) ID() string { return *r.id.Load() }

// processSpace names where this gateway sees processes: the machine
// (its machine id, else its host name) and the pid namespace it runs in.
// Local runs made here are anchored in it; replicas elsewhere leave
// their anchors alone.
func processSpace() string {
	host := ""
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		host = strings.TrimSpace(string(b))
	}
	if host == "" {
		host, _ = os.Hostname()
	}
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return host + "/" + ns
}

// replicaID is this gateway's replica id ("" on SQLite).
func (e *core) replicaID() string {
	if e.replica == nil {
		return ""
	}
	return e.replica.ID()
}

// holds reports whether some replica holds action id in flight (false on
// SQLite).
func (r *replica) holds(ctx context.Context, id string) (bool, error) {
	if r == nil {
		return false, nil
	}
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM inflight WHERE action_id = ?`, id).Scan(&n)
	return n > 0, err
}

// run keeps the lease, watches it, and takes dead replicas' work over,
// each in a goroutine of its own: a renewal or a sweep that hangs on the
// database must never hold the watch back, which has to stop this
// replica before its lease can run out.
func (r *replica) run() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	every := func(d time.Duration, f func(context.Context)) func() {
		return func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					f(ctx)
				}
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(every(max(r.lease/6, 250*time.Millisecond), r.renew))
	wg.Go(every(max(r.lease/20, 100*time.Millisecond), func(context.Context) { r.check() }))
	wg.Go(every(max(r.lease/3, time.Second), r.takeOver))
	go func() {
		wg.Wait()
		close(r.done)
	}()
}

// renew moves the lease on. A replica whose row is gone was taken for
// dead: its in-flight actions were (or are being) finished by others, so
// it cancels its own and joins again under a new id.
func (r *replica) renew(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, r.lease/4)
	defer cancel()
	res, err := r.db.ExecContext(cctx, `UPDATE replicas SET lease_until = clock_timestamp() + make_interval(secs => ?) WHERE id = ?`,
		r.lease.Seconds(), r.ID())
	if err != nil {
		r.log.Warn("lease not renewed", "error", err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		r.log.Error("this replica was taken for dead (its lease ran out); cancelling its actions and joining again", "replica", r.ID())
		r.setDown(true)
		if err := r.register(cctx); err != nil {
			r.log.Warn("could not join again", "error", err)
			return
		}
	}
	r.lastOK.Store(int64(r.e.clock.Elapsed()))
	r.check()
	r.publishConfig(cctx)
}

// check fails closed when the lease has gone unrenewed for half of it.
func (r *replica) check() {
	since := r.e.clock.Elapsed() - time.Duration(r.lastOK.Load())
	r.setDown(since > r.lease/2)
}

func (r *replica) setDown(down bool) {
	if r.down.Swap(down) == down {
		return
	}
	if down {
		r.log.Error("lost the database: cancelling the actions in flight and dialing nothing until it is back")
		r.e.storageLost()
	} else {
		r.log.Info("the database is back: taking actions again")
	}
}

// healthy reports whether this replica may start an action (true on
// SQLite, where there is no replica).
func (r *replica) healthy() bool { return r == nil || !r.down.Load() }

// takeOver finishes the work of replicas whose lease ran out.
func (r *replica) takeOver(ctx context.Context) {
	if !r.healthy() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.lease)
	defer cancel()
	rows, err := r.db.QueryContext(cctx, `SELECT id FROM replicas WHERE lease_until < clock_timestamp() ORDER BY id`)
	if err != nil {
		r.log.Warn("looking for dead replicas", "error", err)
		return
	}
	var dead []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			dead = append(dead, id)
		}
	}
	rows.Close()
	for _, id := range dead {
		if err := r.finishReplica(cctx, id); err != nil {
			r.log.Warn("taking over a dead replica's work; will try again", "replica", id, "error", err)
		}
	}
	// Reviewer changes made offline on some host while this replica ran.
	if err := r.e.store.RecordQueued(cctx); err != nil {
		r.log.Warn("recording offline reviewer changes; will try again", "error", err)
	}
}

// finishReplica records dead replica id's in-flight actions as
// interrupted, expires the requests its agents waited for, and removes
// it. Several survivors may do this at once: each action still gets one
// outcome (the audit log refuses a second).
func (r *replica) finishReplica(ctx context.Context, id string) error {
	rows, err := r.db.QueryContext(ctx, `SELECT action_id, run_id FROM inflight WHERE replica = ? ORDER BY since`, id)
	if err != nil {
		return err
	}
	type act struct{ id, run string }
	var acts []act
	for rows.Next() {
		var a act
		if err := rows.Scan(&a.id, &a.run); err != nil {
			rows.Close()
			return err
		}
		acts = append(acts, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, a := range acts {
		_, err := r.e.record(ctx, a.id, a.run, actionFinished{
			Outcome:     sshexec.Interrupted,
			Detail:      "the gateway replica " + id + " that ran it stopped renewing its lease; the remote state is unknown",
			Termination: sshexec.Unconfirmed,
		})
		switch {
		case err == nil:
			r.e.metrics.actions.WithLabelValues(sshexec.Interrupted.String()).Inc()
			r.log.Warn("action of a dead replica recorded as interrupted", "action", a.id, "replica", id)
		case errors.Is(err, auditchain.ErrAlreadyFinished):
		default:
			return fmt.Errorf("action %s: %w", a.id, err)
		}
		if _, err := r.db.ExecContext(ctx, `DELETE FROM inflight WHERE action_id = ? AND replica = ?`, a.id, id); err != nil {
			return err
		}
	}
	if err := r.e.store.ExpireRequestsOf(ctx, id); err != nil {
		return err
	}
	_, err = r.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ? AND lease_until < clock_timestamp()
		AND NOT EXISTS (SELECT 1 FROM inflight WHERE replica = ?)`, id, id)
	return err
}

// claim takes one of target's max connection slots across every replica
// for action actionID (a row in inflight), waiting until ctx ends for one
// to be free. It returns false, nil when ctx ended first.
func (r *replica) claim(ctx context.Context, actionID, runID, target string, max int) (bool, error) {
	key := sqldb.LockKey("target/" + target)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		got, err := r.tryClaim(ctx, key, actionID, runID, target, max)
		if err != nil || got {
			return got, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(wait):
		}
	}
}

func (r *replica) tryClaim(ctx context.Context, key int64, actionID, runID, target string, max int) (bool, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, key); err != nil {
		return false, err
	}
	if max > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM inflight WHERE target = ?`, target).Scan(&n); err != nil {
			return false, err
		}
		if n >= max {
			return false, nil
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO inflight (action_id, replica, run_id, target, since) VALUES (?, ?, ?, ?, ?)`,
		actionID, r.ID(), runID, target, r.e.clock.Now().UnixNano()); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// release gives up action actionID's row: its outcome is recorded, or it
// never reached its intent.
func (r *replica) release(actionID string) {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.lease/2)
	defer cancel()
	if _, err := r.db.ExecContext(ctx, `DELETE FROM inflight WHERE action_id = ?`, actionID); err != nil {
		// The row stays: if this replica dies, a survivor finds the
		// outcome already recorded and only removes it.
		r.log.Warn("in-flight row not removed", "action", actionID, "error", err)
	}
}

// leave stops the lease; a replica with nothing in flight removes its row
// (one with actions left stays, for a survivor to finish them).
func (r *replica) leave() {
	if r == nil {
		return
	}
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := r.ID()
	if _, err := r.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ? AND NOT EXISTS (SELECT 1 FROM inflight WHERE replica = ?)`, id, id); err != nil && !errors.Is(err, sql.ErrConnDone) {
		r.log.Warn("leaving the replicas", "error", err)
	}
}

// storageLost cancels every action in flight: the gateway no longer
// holds its database.
func (e *core) storageLost() {
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

// verifyOptions are where Audit.Verify reads the log.
func (e *core) verifyOptions() auditchain.VerifyOptions {
	if e.pg != nil {
		return auditchain.VerifyOptions{DB: e.pg}
	}
	return auditchain.VerifyOptions{Path: filepath.Join(e.conf().cfg.StateDir, "audit.db")}
}
