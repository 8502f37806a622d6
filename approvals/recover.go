package approvals

import (
	"context"
	"fmt"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// recover runs at Open, with s.mu held.
func (s *Store) recover(ctx context.Context) error {
	now := s.clock.Now()
	// Nobody waits for a request a previous gateway raised. Replicas
	// sharing PostgreSQL expire only what no replica raised (older rows):
	// the requests of a replica that stopped are a survivor's to expire,
	// once its lease runs out.
	where := "status = ?"
	if s.pool.Engine == sqldb.Postgres {
		where += " AND replica IS NULL"
	}
	if err := s.expirePending(ctx, "gateway restarted", where, StatusPending.String()); err != nil {
		return fmt.Errorf("state database at start-up: %w", err)
	}
	// A gateway before this one kept the input of decided requests.
	if _, err := s.db.ExecContext(ctx, `UPDATE requests SET stdin_text = NULL WHERE status <> ? AND stdin_text IS NOT NULL`, StatusPending.String()); err != nil {
		return fmt.Errorf("state database at start-up: %w", err)
	}
	runs, err := loadRuns(ctx, s.db, "state IN (?, ?) OR (anchor_pid IS NOT NULL AND anchor_gone = 0)",
		RunPending.String(), RunApproved.String())
	if err != nil {
		return err
	}
	renewed := map[RunID]bool{}
	for _, r := range runs {
		if r.Renews != "" {
			renewed[r.Renews] = true // its anchor holds the run that renews it
		}
	}
	for _, r := range runs {
		if r.Local() && !r.anchorGone && s.mine(r) {
			if !s.alive(r.Anchor.ID) {
				if err := s.anchorExited(ctx, r); err != nil {
					return fmt.Errorf("state database at start-up: end run %s: %w", r.ID, err)
				}
				continue
			}
		}
		if r.Local() && !r.anchorGone && s.mine(r) && !renewed[r.ID] {
			// A live anchor keeps even a denied or expired run, so that the
			// process stays refused rather than getting a fresh run.
			s.anchors[r.Anchor.ID] = anchorEntry{run: r.ID, explicit: r.Explicit, uid: r.Anchor.UID}
			s.watch(r.Anchor.ID)
		}
		if r.State.Terminal() {
			continue
		}
		if err := s.expireIfDue(ctx, r, now); err != nil {
			if isRunStateErr(err) {
				continue
			}
			return fmt.Errorf("state database at start-up: expire run %s: %w", r.ID, err)
		}
		s.scheduleRun(r)
	}
	return nil
}

// RecordQueued records the reviewer changes made offline (airlock
// reviewer add while no gateway ran here), in order. Open does it; on
// PostgreSQL each replica also does it from time to time, since another
// replica may be running all along. The state lock keeps two replicas
// from recording one change twice.
func (s *Store) RecordQueued(ctx context.Context) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	return s.accounts.recordQueued(ctx)
}

// ExpireRequestsOf ends, as expired, the pending requests that agents of
// replica (a gateway replica taken for dead) waited for: nobody waits
// for them any more.
func (s *Store) ExpireRequestsOf(ctx context.Context, replica string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	return s.expirePending(ctx, "the gateway replica the agent waited through stopped", "status = ? AND replica = ?", StatusPending.String(), replica)
}

// expirePending ends the pending requests where says as expired, for
// reason. Called with the lock held.
func (s *Store) expirePending(ctx context.Context, reason, where string, args ...any) error {
	pending, err := loadRequests(ctx, s.db, where, args...)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, q := range pending {
		r, err := loadRun(ctx, s.db, q.RunID)
		if err != nil {
			return err
		}
		q.Status, q.DecidedAt, q.Reason = StatusExpired, now, reason
		ev := Event{Kind: EventApprovalDecided, Time: now, Run: *r, Request: q}
		if err := s.commit(ctx, nil, []*Request{q}, []Event{ev}); err != nil {
			return fmt.Errorf("state database: expire request %s: %w", q.ID, err)
		}
	}
	return nil
}
