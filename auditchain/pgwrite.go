package auditchain

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/tlog"
)

// Appending on PostgreSQL. The chain is one sequence, so replicas take
// turns under the chain lock; what a turn costs is what bounds every
// replica's appends together. A turn is: begin, the lock, one query that
// brings the writer up to the head, one insert, and a commit that does
// not wait for the WAL flush (synchronous_commit off for that
// transaction only), so the lock passes on without a disk wait. Nobody
// is answered before the batch is durable: after the commit, outside the
// lock, the writer commits a transaction of its own under the session's
// synchronous_commit (barrier). Its commit record follows the batch's in
// the WAL, so the flush (and the wait for synchronous standbys) it waits
// for covers the batch, and the barriers of several replicas share one
// flush.
//
// Until its barrier returns, a batch is visible to other replicas, which
// may chain onto it. Should the server crash first, the batch and
// whatever was chained onto it are lost together (the WAL is one
// sequence), and nobody was told they were appended. A replica then
// finds the log shorter than its view: it takes the database's head when
// the loss stays within entries it never confirmed (after durable), and
// fails closed when it would take back one it did.

// beginShared starts a write transaction on PostgreSQL: it takes the
// chain lock (async: the transaction commits without waiting for the
// flush) and brings the writer's view up to the head. ids are the
// actions whose action.finished entries the caller will append; finished
// names those that already have one in the log.
func (l *Log) beginShared(ctx context.Context, async bool, ids []string) (tx *sqldb.Tx, finished map[string]bool, err error) {
	tx, err = l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	lock := `SELECT pg_advisory_xact_lock(?)`
	if async {
		lock = `SELECT pg_advisory_xact_lock(?), set_config('synchronous_commit', 'off', true)`
	}
	if _, err = tx.ExecContext(ctx, lock, chainLockKey); err == nil {
		finished, err = l.catchUp(ctx, tx, ids)
	}
	if err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	return tx, finished, nil
}

// maxCatchUp is how many entries appended by other replicas a writer
// extends its Merkle frontier with from their leaf hashes; further
// behind, it reads the frontier from the stored tree.
const maxCatchUp = 4096

// catchUpSQL reads, in one query, what brings a writer up to the head:
// the head, the leaf hashes appended since the writer's view, a
// checkpoint newer than its last, and which of the batch's actions
// already have an action.finished entry (catchUpArgs).
const catchUpSQL = `SELECT h.seq, h.chain, h.leaf,
	(SELECT string_agg(leaf_hash, ''::bytea ORDER BY seq) FROM entries WHERE seq >= ? AND seq < ?),
	(SELECT note FROM checkpoints WHERE size > ? ORDER BY id DESC LIMIT 1),
	(SELECT json_agg(DISTINCT action_id)::text FROM entries WHERE kind = 'action.finished' AND action_id = ANY(?))
	FROM (SELECT 1) one LEFT JOIN (SELECT seq, chain, leaf FROM entries ORDER BY seq DESC LIMIT 1) h ON true`

func (l *Log) catchUpArgs(ids []string) []any {
	return []any{l.size, l.size + maxCatchUp, l.ckpt.Size, ids}
}

// headRead is what catchUpSQL returns.
type headRead struct {
	seq                       sql.NullInt64
	chain, leaf, hashes, note []byte
	outcomes                  sql.NullString
}

func (h *headRead) dest() []any {
	return []any{&h.seq, &h.chain, &h.leaf, &h.hashes, &h.note, &h.outcomes}
}

// catchUp brings the writer's view up to the database's head, inside a
// transaction that holds the chain lock, and returns which of ids
// already have an action.finished entry.
func (l *Log) catchUp(ctx context.Context, tx *sqldb.Tx, ids []string) (map[string]bool, error) {
	var h headRead
	if err := tx.QueryRowContext(ctx, catchUpSQL, l.catchUpArgs(ids)...).Scan(h.dest()...); err != nil {
		return nil, fmt.Errorf("audit log: read the head: %w", err)
	}
	if err := l.moveHead(ctx, tx, h); err != nil {
		return nil, err
	}
	return l.takeRead(h)
}

// takeRead takes the checkpoint and the outcomes of h, once the head
// has moved.
func (l *Log) takeRead(h headRead) (map[string]bool, error) {
	if h.note != nil {
		if err := l.takeCheckpoint(h.note); err != nil {
			return nil, err
		}
	}
	finished := map[string]bool{}
	if h.outcomes.Valid {
		var got []string
		if err := json.Unmarshal([]byte(h.outcomes.String), &got); err != nil {
			return nil, fmt.Errorf("audit log: look for outcomes: %w", err)
		}
		for _, id := range got {
			finished[id] = true
		}
	}
	return finished, nil
}

// moveHead takes the head h names (seq null: no entries).
func (l *Log) moveHead(ctx context.Context, tx *sqldb.Tx, h headRead) error {
	if moved, err := l.moveHeadAhead(h); moved || err != nil {
		return err
	}
	size := h.seq.Int64 + 1
	if !h.seq.Valid {
		size = 0
	}
	if size <= l.size {
		// The database lost entries this writer saw: only those nobody
		// confirmed may go (a crash before their flush).
		if err := l.lostOnlyUnconfirmed(ctx, tx, size); err != nil {
			return err
		}
	}
	e, err := l.lastEntry(h, size)
	if err != nil {
		return err
	}
	front, err := loadFrontierPG(ctx, tx, size)
	if err != nil {
		return err
	}
	l.size, l.front, l.ckptEntry = size, front, size > 0 && e.Kind == KindCheckpoint
	l.chain = [32]byte{}
	copy(l.chain[:], h.chain)
	return nil
}

// moveHeadAhead takes the head h names when that needs no more reading:
// it is the writer's view, or follows it by the leaf hashes h brings.
// moved is false when it is neither.
func (l *Log) moveHeadAhead(h headRead) (moved bool, err error) {
	size := h.seq.Int64 + 1
	if !h.seq.Valid {
		size = 0
	}
	if size == l.size && (size == 0 || bytes.Equal(h.chain, l.chain[:])) {
		return true, nil
	}
	if size <= l.size || int64(len(h.hashes)) != (size-l.size)*tlog.HashSize {
		return false, nil
	}
	e, err := l.lastEntry(h, size)
	if err != nil {
		return false, err
	}
	front := l.front
	for hs := h.hashes; len(hs) > 0; hs = hs[tlog.HashSize:] {
		if _, err := front.add(tlog.Hash(hs[:tlog.HashSize])); err != nil {
			return false, l.fail(err)
		}
	}
	l.size, l.front, l.ckptEntry = size, front, e.Kind == KindCheckpoint
	copy(l.chain[:], h.chain)
	return true, nil
}

// lastEntry decodes the head's entry (none when size is 0).
func (l *Log) lastEntry(h headRead, size int64) (Entry, error) {
	if size == 0 {
		return Entry{}, nil
	}
	e, err := DecodeLeaf(h.leaf)
	if err != nil || e.Seq != h.seq.Int64 || len(h.chain) != 32 {
		return e, l.fail(fmt.Errorf("audit log: the last entry %d is malformed: %w", h.seq.Int64, ErrInconsistent))
	}
	return e, nil
}

// lostOnlyUnconfirmed checks a log found at size, shorter than (or as
// long as but other than) the writer's view: every entry this writer
// confirmed durable must still be there, unchanged.
func (l *Log) lostOnlyUnconfirmed(ctx context.Context, tx *sqldb.Tx, size int64) error {
	if size < l.durable.size {
		return l.fail(fmt.Errorf("audit log: the log on PostgreSQL ends at %d entries, this replica confirmed %d: %w", size, l.durable.size, ErrInconsistent))
	}
	if l.durable.size > 0 {
		var chain []byte
		err := tx.QueryRowContext(ctx, `SELECT chain FROM entries WHERE seq = ?`, l.durable.size-1).Scan(&chain)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("audit log: read entry %d: %w", l.durable.size-1, err)
		}
		if !bytes.Equal(chain, l.durable.chain[:]) {
			return l.fail(fmt.Errorf("audit log: entry %d on PostgreSQL differs from the one this replica confirmed: %w", l.durable.size-1, ErrInconsistent))
		}
	}
	l.log.Warn("the log on PostgreSQL lost entries no replica had confirmed (the database crashed before they reached its disk): going on from its head",
		"entries", size, "this_replica_saw", l.size)
	return nil
}

// durableHead is how far the writer knows the log is durable.
type durableHead struct {
	size  int64
	chain [32]byte
}

// writeShared is write on PostgreSQL: a second outcome of an action is
// answered ErrAlreadyFinished and left out, and the batch is answered
// once durable.
func (l *Log) writeShared(ctx context.Context, batch []*appendReq) ([]*appendReq, []Ref, error) {
	var ids []string
	for _, r := range batch {
		if r.e.Kind == KindActionFinished && r.e.ActionID != "" {
			ids = append(ids, r.e.ActionID)
		}
	}
	if kept, refs, err := l.writeFast(ctx, batch, ids); !errors.Is(err, errSlowPath) {
		return kept, refs, err
	}
	tx, finished, err := l.beginShared(ctx, true, ids)
	if err != nil {
		return batch, nil, l.recover(ctx, fmt.Errorf("audit log: begin: %w", err))
	}
	if batch = oneOutcome(batch, finished); len(batch) == 0 {
		tx.Rollback()
		return nil, nil, nil
	}
	refs, st, err := l.stage(ctx, tx, batch)
	if err != nil {
		tx.Rollback()
		return batch, nil, err
	}
	if err := tx.Commit(); err != nil {
		if err := l.commitFailed(ctx, refs, st, err); err != nil {
			return batch, nil, err
		}
		return batch, refs, nil // it committed after all
	}
	l.apply(st)
	if err := l.barrier(ctx); err != nil {
		if err := l.settle(refs, st, fmt.Errorf("audit log: wait for the commit to reach the disk: %w", err)); err != nil {
			return batch, nil, err
		}
	}
	l.durable = durableHead{st.size, st.chain}
	return batch, refs, nil
}

// barrier returns once PostgreSQL has made durable every transaction
// committed before it, as the session's synchronous_commit says (the
// local flush, and synchronous standbys when configured): it writes a
// row, so its commit waits for the WAL up to its own commit record,
// which follows every earlier one. Each writer has a row of its own, so
// the barriers of several replicas never wait for each other's locks.
func (l *Log) barrier(ctx context.Context) error {
	_, err := l.db.ExecContext(ctx, barrierSQL, l.writerID)
	return err
}

const barrierSQL = `INSERT INTO flush_barrier (writer, n, at) VALUES (?, 1, now())
	ON CONFLICT (writer) DO UPDATE SET n = flush_barrier.n + 1, at = now()`

// barrierDDL creates the barrier's table, and forgets the rows of
// writers gone for a day (a replica removes its own at Close).
var barrierDDL = []string{
	`CREATE TABLE IF NOT EXISTS flush_barrier (writer TEXT PRIMARY KEY, n BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL)`,
	`DELETE FROM flush_barrier WHERE at < now() - interval '1 day'`,
}

// settle finds out, after the commit of the batch ending with refs or
// its barrier failed with cause (the answer may have been lost with the
// connection), whether the batch is durably in the log: a barrier on a
// fresh context, then a look for its last entry. When that cannot be
// known, the caller hears ErrOutcomeUnknown.
func (l *Log) settle(refs []Ref, st headState, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	last := refs[len(refs)-1]
	err := l.barrier(ctx)
	var in bool
	if err == nil {
		in, err = l.confirm(ctx, last.Seq, last.LeafHash[:])
	}
	switch {
	case err != nil:
		l.log.Warn("append batch: whether it is durable is unknown", "error", cause, "check_error", err)
		return fmt.Errorf("audit log: %w: %w", ErrOutcomeUnknown, cause)
	case in:
		l.log.Warn("append batch: its answer was lost, and it is in the log", "error", cause)
		l.apply(st)
		l.durable = durableHead{st.size, st.chain}
		return nil
	}
	l.log.Warn("append batch failed and is not in the log", "error", cause)
	return cause
}

// confirm reports whether the entry lastSeq in the log has leaf hash lh.
func (l *Log) confirm(ctx context.Context, lastSeq int64, lh []byte) (bool, error) {
	var got []byte
	err := l.db.QueryRowContext(ctx, `SELECT leaf_hash FROM entries WHERE seq = ?`, lastSeq).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, lh), nil
}
