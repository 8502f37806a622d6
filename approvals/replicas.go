package approvals

import (
	"context"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// Replicas sharing PostgreSQL: a decision committed by one replica must
// wake the agents waiting on another. Each final request state is
// notified on requestsChannel with its id when its transaction commits;
// every replica listens, and polls its waiters' requests as well, in case
// a notification was missed while it was not listening.

// requestsChannel carries the ids of requests that left pending.
const requestsChannel = "airlock_requests"

// pollEvery is how often a replica reads its waiters' requests without a
// notification.
const pollEvery = 2 * time.Second

// notifyDecided queues the notification of q's end in tx. Called from
// commit, on PostgreSQL.
func notifyDecided(ctx context.Context, tx *sqldb.Tx, q *Request) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify(?, ?)`, requestsChannel, string(q.ID))
	return err
}

// watchDecisions listens for other replicas' decisions, and polls, until
// the store closes. Started by Open on PostgreSQL.
func (s *Store) watchDecisions() {
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for s.ctx.Err() == nil {
			err := s.pool.Listen(s.ctx, requestsChannel, s.pollWaits, func(id string) { s.wake(RequestID(id)) })
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("not listening for other replicas' decisions; polling meanwhile", "error", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.pollWaits()
			}
		}
	}()
}

// pollWaits reads, in one query, which of the requests this replica's
// agents wait for have left pending, and wakes those.
func (s *Store) pollWaits() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.waits))
	for id := range s.waits {
		ids = append(ids, string(id))
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
	defer cancel()
	rows, err := s.pool.QueryContext(ctx, `SELECT id FROM requests WHERE status <> ? AND id = ANY(?)`, StatusPending.String(), ids)
	if err != nil {
		s.log.Warn("polling the requests agents wait for", "error", err)
		return
	}
	var decided []RequestID
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			decided = append(decided, RequestID(id))
		}
	}
	rows.Close()
	for _, id := range decided {
		s.wake(id)
	}
}

// wake finishes the local wait for request id if it has left pending.
func (s *Store) wake(id RequestID) {
	s.mu.Lock()
	_, waiting := s.waits[id]
	s.mu.Unlock()
	if !waiting {
		return // decided here (already finished), or not this replica's
	}
	if err := s.lock(); err != nil {
		return
	}
	defer s.unlock()
	if _, ok := s.waits[id]; !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
	defer cancel()
	q, err := loadRequest(ctx, s.db, id)
	if err != nil {
		s.log.Warn("reading a request decided elsewhere", "request", id, "error", err)
		return
	}
	if q.Status == StatusPending {
		return
	}
	s.finish(q, q.Status)
}
