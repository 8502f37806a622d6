package approvals

import (
	"context"
	"time"
)

// grantFor returns the approved call request of run r whose grant covers
// a now (the same digest, its grant not yet over), nil for none. Called
// with s.mu held.
//
// The policy in force bounds a grant too: a reload that lowers max_grant
// shortens the grants given before (GrantUntil of the result is the
// bounded end), and one that sets it to 0 ends them. No grant covers an
// action that uses a gateway-held secret (a.Secret): each use is asked.
func (s *Store) grantFor(ctx context.Context, r *Run, a Action) (*Request, error) {
	maxGrant := s.policy.MaxGrantFor(a.Target, a.Account)
	if maxGrant <= 0 || a.Secret != "" {
		return nil, nil
	}
	now := s.clock.Now()
	d := DigestOf(r.ID, a)
	reqs, err := loadRequests(ctx, s.db, `run_id = ? AND digest = ? AND grant_until > ? AND status = ?`,
		string(r.ID), d[:], now.UnixNano(), StatusApproved.String())
	if err != nil {
		return nil, err
	}
	var g *Request
	for _, q := range reqs {
		if end := q.DecidedAt.Add(maxGrant); end.Before(q.GrantUntil) {
			q.GrantUntil = end
		}
		if s.grantLive(q, now) && (g == nil || q.GrantUntil.After(g.GrantUntil)) {
			g = q
		}
	}
	return g, nil
}

func grantKey(id RequestID) string { return "grant:" + string(id) }

// armGrants starts the elapsed-time bound of every grant still running,
// at Open: from here, a grant lasts no longer than what remains of it on
// the wall clock, nor than its whole length.
func (s *Store) armGrants(ctx context.Context) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	now := s.clock.Now()
	reqs, err := loadRequests(ctx, s.db, `grant_until > ? AND status = ?`, now.UnixNano(), StatusApproved.String())
	for _, q := range reqs {
		s.grantLive(q, now)
	}
	return err
}

// grantLive reports whether granting request q's grant still runs at now:
// before its wall-clock end, and within its length in elapsed time, so
// that setting the system clock back does not lengthen it. After a
// restart only the wall-clock end is known; the elapsed-time bound is
// then what remains of it, at most the grant's whole length. Called with
// s.mu held.
func (s *Store) grantLive(q *Request, now time.Time) bool {
	key, el := grantKey(q.ID), s.clock.Elapsed()
	at, ok := s.deadlines[key]
	if !ok {
		at = el + min(max(q.GrantUntil.Sub(now), 0), q.GrantUntil.Sub(q.DecidedAt))
		s.deadlines[key] = at
	}
	if !now.Before(q.GrantUntil) || el >= at {
		delete(s.deadlines, key)
		return false
	}
	return true
}
