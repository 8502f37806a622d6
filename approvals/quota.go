package approvals

import (
	"context"
	"fmt"
	"time"
)

// Quota bounds the actions of one target account: PerRun actions of one
// run, PerWindow actions of all runs within any Window (rolling). A zero
// bound is none.
type Quota struct {
	PerRun    int
	PerWindow int
	Window    time.Duration
}

// QuotaError says which quota an action ran into. It is ErrQuota.
type QuotaError struct {
	// Of is "run" (PerRun) or "window" (PerWindow).
	Of     string
	Limit  int
	Window time.Duration
	// Next is when the window frees a place (Of "window").
	Next time.Time
}

func (e *QuotaError) Error() string {
	if e.Of == "run" {
		return fmt.Sprintf("the run's quota of %d actions on this account is spent", e.Limit)
	}
	return fmt.Sprintf("the account's quota of %d actions per %s is spent", e.Limit, e.Window)
}

func (e *QuotaError) Unwrap() error { return ErrQuota }

// TakeQuota counts one action of run on target/account against q, or
// refuses it with a *QuotaError when a bound is reached. What it counted
// is in the state database: a restart forgets nothing. A refused action
// is not counted, so a loop stopped by the window starts again only as
// the window rolls on.
func (s *Store) TakeQuota(ctx context.Context, run RunID, target, account string, q Quota) error {
	if q.PerRun <= 0 && (q.PerWindow <= 0 || q.Window <= 0) {
		return nil
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	now := s.clock.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: action quota: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if q.PerRun > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM quota_uses WHERE run_id = ? AND target = ? AND account = ?`,
			string(run), target, account).Scan(&n); err != nil {
			return fmt.Errorf("state database: action quota: %w", err)
		}
		if n >= q.PerRun {
			return &QuotaError{Of: "run", Limit: q.PerRun}
		}
	}
	if q.PerWindow > 0 && q.Window > 0 {
		since := now.Add(-q.Window).UnixNano()
		var n int
		var oldest int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(min(at), 0) FROM quota_uses WHERE target = ? AND account = ? AND at > ?`,
			target, account, since).Scan(&n, &oldest); err != nil {
			return fmt.Errorf("state database: action quota: %w", err)
		}
		if n >= q.PerWindow {
			// The window frees a place when its oldest action leaves it;
			// with more than the bound counted (a lower bound after a
			// reload) later, which the agent learns when it asks again.
			return &QuotaError{Of: "window", Limit: q.PerWindow, Window: q.Window, Next: time.Unix(0, oldest).Add(q.Window)}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO quota_uses (target, account, run_id, at) VALUES (?, ?, ?, ?)`,
		target, account, string(run), now.UnixNano()); err != nil {
		return fmt.Errorf("state database: action quota: %w", err)
	}
	// What no window reads any more goes, a little at a time.
	if _, err := tx.ExecContext(ctx, `DELETE FROM quota_uses WHERE target = ? AND account = ? AND at < ?`,
		target, account, now.Add(-MaxQuotaWindow).UnixNano()); err != nil {
		return fmt.Errorf("state database: action quota: %w", err)
	}
	return tx.Commit()
}

// MaxQuotaWindow is the longest quota window: counted actions are kept
// this long (a run's own count too, which no run outlives).
const MaxQuotaWindow = 31 * 24 * time.Hour

// pruneQuota forgets counted actions older than any window.
func (s *Store) pruneQuota(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM quota_uses WHERE at < ?`, s.clock.Now().Add(-MaxQuotaWindow).UnixNano())
	return err
}
