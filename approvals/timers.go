package approvals

import (
	"context"
	"time"
)

// How long a timer-driven change may take to record, and how soon it is
// retried when the sink refuses it.
const (
	eventTimeout  = 10 * time.Second
	retryInterval = 5 * time.Second
)

// schedule arranges for f to run (under s.mu) after d, replacing any timer
// of the same key. If f fails — the sink refused its event — it is retried.
// Called with s.mu held.
func (s *Store) schedule(key string, d time.Duration, f func(ctx context.Context) error) {
	if stop, ok := s.timers[key]; ok {
		stop()
	}
	s.timers[key] = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		delete(s.timers, key)
		if err := s.pin(); err != nil {
			s.log.Error("state change not recorded; will retry", "change", key, "error", err, "retry_in", retryInterval)
			s.schedule(key, retryInterval, f)
			return
		}
		defer s.unpin()
		ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			s.log.Error("state change not recorded; will retry", "change", key, "error", err, "retry_in", retryInterval)
			s.schedule(key, retryInterval, f)
			return
		}
		// The lifetime is over (or what it bounded already ended).
		delete(s.deadlines, key)
	})
}

func (s *Store) unschedule(key string) {
	if stop, ok := s.timers[key]; ok {
		stop()
		delete(s.timers, key)
	}
	delete(s.deadlines, key)
}

// arm schedules f for when the lifetime keyed key runs out: at the wall-
// clock deadline wall, and in elapsed time no later than life after now
// (life is the whole lifetime; zero: no such bound). The first arming in
// this process fixes the elapsed-time deadline; arming again (a run
// approved after its token was armed) keeps it. Called with s.mu held.
func (s *Store) arm(key string, wall time.Time, life time.Duration, f func(ctx context.Context) error) {
	now, el := s.clock.Now(), s.clock.Elapsed()
	at, ok := s.deadlines[key]
	if !ok {
		// After a restart only the wall-clock deadline is known. If the
		// clock was set back meanwhile, it lies further ahead than the
		// whole lifetime; never allow more than that.
		d := max(wall.Sub(now), 0)
		if life > 0 {
			d = min(d, life)
		}
		at = el + d
		s.deadlines[key] = at
	}
	s.schedule(key, at-el, f)
}

// due reports whether the lifetime keyed key has run out at now: its
// wall-clock deadline wall has passed, or its elapsed-time deadline has
// (the system clock may have been set back). Called with s.mu held.
func (s *Store) due(key string, wall, now time.Time) bool {
	if !now.Before(wall) {
		return true
	}
	at, ok := s.deadlines[key]
	return ok && s.clock.Elapsed() >= at
}

// scheduleRun sets the timers that expire r: its approval's TTL and its
// token's expiry. Called with s.mu held.
func (s *Store) scheduleRun(r *Run) {
	id := r.ID
	expire := func(ctx context.Context) error { return s.expireByID(ctx, id) }
	if r.State == RunApproved && !r.ExpiresAt.IsZero() {
		s.arm(runKey(id), r.ExpiresAt, r.ExpiresAt.Sub(r.DecidedAt), expire)
	}
	if !r.State.Terminal() && !r.TokenExpiresAt.IsZero() {
		s.arm(tokenKey(id), r.TokenExpiresAt, r.TokenExpiresAt.Sub(r.CreatedAt), expire)
	}
}

// Timer and deadline keys.
func runKey(id RunID) string         { return "run:" + string(id) }
func tokenKey(id RunID) string       { return "token:" + string(id) }
func requestKey(id RequestID) string { return "req:" + string(id) }

func (s *Store) expireByID(ctx context.Context, id RunID) error {
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return err
	}
	if err := s.expireIfDue(ctx, r, s.clock.Now()); err != nil && !isRunStateErr(err) {
		return err
	}
	return nil
}

// expireIfDue ends r if its token or approval has expired at now, and
// returns the run-state error the caller should see (nil if r is usable).
func (s *Store) expireIfDue(ctx context.Context, r *Run, now time.Time) error {
	if r.State.Terminal() {
		return stateErr(r)
	}
	reason := EndReason(0)
	switch {
	case !r.TokenExpiresAt.IsZero() && s.due(tokenKey(r.ID), r.TokenExpiresAt, now):
		reason = EndTokenExpired
	case r.State == RunApproved && s.due(runKey(r.ID), r.ExpiresAt, now):
		reason = EndTTL
	default:
		return nil
	}
	if err := s.endRun(ctx, r, reason, "", ""); err != nil {
		return err
	}
	return &ExpiredError{End: reason, MaxActions: r.MaxActions}
}
