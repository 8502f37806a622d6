package auditchain

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/jackc/pgx/v5"
)

// The writer's turn on PostgreSQL in two round trips under the chain
// lock, on a connection of the writer's own: begin, the lock and the
// catch-up query go out together (each statement reads after the one
// before it ends, so the catch-up sees everything committed before the
// lock was granted), then the insert and the commit. The barrier
// follows, outside the lock. When the catch-up needs more reading (the
// writer is far behind, or the log is shorter than its view), the turn
// is rolled back and writeShared takes the batch its usual way.

// errSlowPath: the turn was rolled back before writing anything; the
// batch goes writeShared's way.
var errSlowPath = errors.New("audit log: the batch needs the usual path")

// writerConn is the writer's connection on PostgreSQL, taken from the
// pool on first use and after a failure.
func (l *Log) writerConn(ctx context.Context) (*sqldb.Conn, error) {
	if l.wconn == nil {
		c, err := l.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		l.wconn = c
	}
	return l.wconn, nil
}

// dropWriterConn ends the writer's session: an open transaction is
// rolled back with it.
func (l *Log) dropWriterConn() {
	if l.wconn != nil {
		l.wconn.Discard()
		l.wconn = nil
	}
}

// writeFast is writeShared's turn in two round trips. It returns
// errSlowPath, having written nothing, when the batch must go the usual
// way; otherwise what writeShared returns.
func (l *Log) writeFast(ctx context.Context, batch []*appendReq, ids []string) ([]*appendReq, []Ref, error) {
	c, err := l.writerConn(ctx)
	if err != nil {
		return batch, nil, errSlowPath
	}
	var p staged
	answered := batch // what is left to answer once oneOutcome ran
	phase := "begin"
	err = c.Pgx(func(pc *pgx.Conn) error {
		var h headRead
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(`SELECT pg_advisory_xact_lock($1), set_config('synchronous_commit', 'off', true)`, chainLockKey)
		b.Queue(sqldb.Postgres.Rebind(catchUpSQL), l.catchUpArgs(ids)...)
		br := pc.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			_, err = br.Exec()
		}
		if err == nil {
			err = br.QueryRow().Scan(h.dest()...)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if moved, err := l.moveHeadAhead(h); err != nil || !moved {
			if err == nil {
				err = errSlowPath
			}
			return err
		}
		finished, err := l.takeRead(h)
		if err != nil {
			return err
		}
		if answered = oneOutcome(batch, finished); len(answered) == 0 {
			_, err := pc.Exec(ctx, "ROLLBACK")
			return err
		}
		if p, err = l.prepare(answered); err != nil {
			return err
		}
		q, args := p.insertPG()
		phase = "insert"
		b = &pgx.Batch{}
		b.Queue(sqldb.Postgres.Rebind(q), args...)
		b.Queue("COMMIT")
		br = pc.SendBatch(ctx, b)
		if _, err = br.Exec(); err == nil {
			phase = "commit"
			_, err = br.Exec()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		phase = "barrier"
		l.apply(p.st)
		_, err = pc.Exec(ctx, sqldb.Postgres.Rebind(barrierSQL), l.writerID)
		return err
	})
	switch {
	case err == nil && len(answered) == 0:
		return nil, nil, nil // every entry was a second outcome, answered
	case err == nil:
		l.durable = durableHead{p.st.size, p.st.chain}
		return answered, p.refs, nil
	}
	l.dropWriterConn() // whatever was open is rolled back with the session
	switch {
	case l.failed.Load() != nil:
		return answered, nil, *l.failed.Load()
	case phase == "begin" && len(answered) == len(batch):
		// Nothing was answered or written: the usual path tries again
		// on a connection from the pool (this one may be stale).
		return batch, nil, errSlowPath
	case phase == "begin" || phase == "insert":
		return answered, nil, l.recover(ctx, fmt.Errorf("audit log: %s: %w", phase, err))
	case phase == "commit":
		if err := l.settle(p.refs, p.st, fmt.Errorf("audit log: commit: %w", err)); err != nil {
			return answered, nil, err
		}
		return answered, p.refs, nil
	}
	if err := l.settle(p.refs, p.st, fmt.Errorf("audit log: wait for the commit to reach the disk: %w", err)); err != nil {
		return answered, nil, err
	}
	return answered, p.refs, nil
}
