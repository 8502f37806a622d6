package approvals

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/hashicorp/go-hclog"
)

// stateDB is the state database as a store writes it: the pool, the
// connection that holds the state lock while the store is locked on
// PostgreSQL, and the commit that writes runs and requests only once their
// events are recorded. Store embeds it; its methods are called with
// Store.mu held.
type stateDB struct {
	// pool is the state database; db is what the store reads and writes
	// through: pool, or on PostgreSQL, under lock, the connection that
	// holds the state lock.
	pool *sqldb.DB
	db   handle
	sink EventSink
	// replica names this gateway among the replicas (Options.Replica).
	replica func() string
	logger  hclog.Logger
}

// lock takes the store's lock: s.mu, and on PostgreSQL the state lock
// that every replica's store takes, with s.db pinned to the connection
// that holds it. Store methods that read and then write hold it
// throughout, so no replica acts on state another is changing.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.pin(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// lockRun takes the store's lock and loads run id: how a method that
// reads a run and then changes it starts. Unless it fails, the caller
// must unlock.
func (s *Store) lockRun(ctx context.Context, id RunID) (*Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		s.unlock()
		return nil, err
	}
	return r, nil
}

// unlock releases what lock took.
func (s *Store) unlock() {
	s.unpin()
	s.mu.Unlock()
}

// stateLockKey is the advisory lock every replica's store takes.
var stateLockKey = sqldb.LockKey("state")

// lockWait bounds the wait for the state lock.
const lockWait = 30 * time.Second

// pin, on PostgreSQL, takes the state lock on a connection of its own
// and points s.db at it. Called with Store.mu held.
func (s *stateDB) pin() error {
	if s.pool.Engine != sqldb.Postgres {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	c, err := s.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	if _, err := c.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, stateLockKey); err != nil {
		c.Discard()
		return fmt.Errorf("state database: lock: %w", err)
	}
	s.db = c
	return nil
}

// unpin releases the state lock and its connection. Called with Store.mu
// held.
func (s *stateDB) unpin() {
	c, ok := s.db.(*sqldb.Conn)
	if !ok {
		return
	}
	s.db = s.pool
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	var released bool
	if err := c.QueryRowContext(ctx, `SELECT pg_advisory_unlock(?)`, stateLockKey).Scan(&released); err != nil || !released {
		// The session is gone or unsure: ending it releases the lock.
		c.Discard()
		return
	}
	c.Close()
}

// commit writes runs and requests in one transaction, records events in
// order, and commits only if all were recorded. Called with Store.mu held.
func (s *stateDB) commit(ctx context.Context, runs []*Run, reqs []*Request, events []Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: begin: %w", err)
	}
	defer tx.Rollback()
	for _, r := range runs {
		if err := upsertRun(ctx, tx, r); err != nil {
			return err
		}
	}
	erased := false
	for _, q := range reqs {
		if q.Status != StatusPending {
			q.Original = "" // erased with the row's copy below
			erased = erased || len(q.Redactions) > 0
			if dropStdinText(q) {
				erased = true
			}
		}
		if err := upsertRequest(ctx, tx, q, s.replicaID()); err != nil {
			return err
		}
		if q.Status != StatusPending && s.pool.Engine == sqldb.Postgres {
			if err := notifyDecided(ctx, tx, q); err != nil {
				return fmt.Errorf("state database: notify the other replicas: %w", err)
			}
		}
	}
	for _, e := range events {
		if err := s.sink.Record(ctx, e); err != nil {
			return &eventError{kind: e.Kind, err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: commit: %w", err)
	}
	if erased && s.pool.Engine == sqldb.SQLite {
		// (PostgreSQL keeps old row versions until VACUUM: docs/high-availability.md.)
		s.scrubWAL(ctx)
	}
	return nil
}

// dropStdinText forgets the text of a decided request's standard input
// (a put's bytes, a here-document): reviewers needed it to decide, and
// the action that runs gets its bytes from the agent's request, never
// from the store. Its size and SHA-256 stay, which the digest binds. It
// reports whether there was text to drop.
func dropStdinText(q *Request) bool {
	if q.Stdin == nil || q.Stdin.Text == "" {
		return false
	}
	in := *q.Stdin // the caller's Action may share the pointer
	in.Text = ""
	q.Stdin = &in
	return true
}

// scrubWAL empties the write-ahead log after an original command or a
// standard input's text was erased: its old page images would hold it
// until overwritten. (The
// database file itself zeroes what is deleted: secure_delete.)
func (s *stateDB) scrubWAL(ctx context.Context) {
	var busy, frames, done int
	err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
	if err != nil || busy != 0 {
		s.logger.Warn("the state database's write-ahead log could not be emptied after an original command or input was erased; it is, at the next checkpoint", "error", err)
	}
}

// replicaID is this gateway's replica id ("" on SQLite).
func (s *stateDB) replicaID() string {
	if s.replica == nil {
		return ""
	}
	return s.replica()
}
