package approvals

import (
	"context"
)

// Authorize decides whether run id may perform action a, asking a
// reviewer when the policy says so, and blocks until it knows:
//
//   - call mode (the policy's ModeFor(a.Target, a.Account), or an action
//     with Redactions, an Escalation or a Secret): a new request bound to
//     DigestOf(id, a) is raised, also in an approved run; its approval
//     lets exactly this action through once, and, with a grant, the same
//     digest again until the grant ends (no request is raised then; an
//     action with a Secret is never granted: it is asked every time).
//   - a.Unreviewed (and neither of those): no reviewer; the run must be
//     one that may act and a within its agent's limits.
//   - run mode, run approved: the action passes at once if it is within
//     the approval's scope, TTL and action budget.
//   - run mode, run pending: the run's one pending run request is raised
//     (or joined, if another action already raised it) and awaited; if
//     approved, the action is checked as above.
//
// onPending, if not nil, is called (without locks held) once a request is
// raised or joined, before waiting — so the agent can be told which
// approval id it waits for.
//
// The wait ends with Result.Status approved, denied or expired (after
// ApprovalTimeout); it returns early with ctx.Err() if ctx is done. Errors
// other than ctx's mean the action must not run: ErrBadAction,
// ErrUnknownRun, ErrRunDenied, ErrRunEnded, ErrRunExpired, ErrOutOfScope,
// ErrClosed, ErrEventNotRecorded.
func (s *Store) Authorize(ctx context.Context, id RunID, a Action, onPending func(Request)) (Result, error) {
	if err := a.validate(); err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	mode := s.policy.ModeFor(a.Target, a.Account)
	s.mu.Unlock()
	switch {
	case len(a.Redactions) > 0 || a.Escalation != "" || a.Secret != "":
		// Part of the command is hidden from the record, policy says its
		// class needs a reviewer each time, or it receives a gateway-held
		// secret (which any program can pass on in a form no output mask
		// catches): a reviewer sees this one on its own; no run approval
		// covers it.
		mode = ModeCall
	case a.Unreviewed:
		return s.admitUnreviewed(ctx, id, a)
	}
	for {
		res, w, err := s.admitOrRaise(ctx, id, mode, a)
		if err != nil || w == nil {
			return res, err
		}
		if onPending != nil {
			// A decision may replace w.req at any moment: copy it under
			// the lock.
			s.mu.Lock()
			q := *w.req
			s.mu.Unlock()
			onPending(q)
		}
		select {
		case <-ctx.Done():
			s.leave(w)
			return Result{}, ctx.Err()
		case <-w.done:
		}
		if err := s.lock(); err != nil {
			return Result{}, err
		}
		q, st := w.req, w.status
		if mode == ModeCall {
			res, err := s.consume(ctx, q, st, a)
			s.unlock()
			return res, err
		}
		err = s.runGone(ctx, id, st)
		s.unlock()
		if st != StatusApproved {
			res := Result{Status: st, Mode: ModeRun, RequestID: q.ID, Reviewer: q.DecidedBy, Reason: q.Reason}
			if err != nil {
				return Result{}, err
			}
			return res, nil
		}
		// The run is approved: go round again to count this action
		// against the approval's limits.
	}
}

// runGone turns a request that expired because its run ended into the
// run's error, so the caller learns the run is over rather than "expired".
// Called with s.mu held.
func (s *Store) runGone(ctx context.Context, id RunID, st Status) error {
	if st != StatusExpired && st != StatusWithdrawn {
		return nil
	}
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return err
	}
	return stateErr(r)
}

// admitOrRaise, under the lock, either admits a against approved run id,
// or returns the waitSet to wait on, raising a request if needed.
func (s *Store) admitOrRaise(ctx context.Context, id RunID, mode Mode, a Action) (Result, *waitSet, error) {
	r, err := s.lockRun(ctx, id)
	if err != nil {
		return Result{}, nil, err
	}
	defer s.unlock()
	if err := s.usable(ctx, r); err != nil {
		return Result{}, nil, err
	}
	if !within(r.Limits, a) {
		// The agent's own limits: no reviewer is asked about the rest.
		return Result{}, nil, ErrOutOfScope
	}
	var w *waitSet
	switch {
	case mode == ModeCall:
		if g, err := s.grantFor(ctx, r, a); err != nil || g != nil {
			if err != nil {
				return Result{}, nil, err
			}
			return Result{Status: StatusApproved, Mode: ModeCall, RequestID: g.ID, Reviewer: g.DecidedBy,
				Reason: g.Reason, Digest: g.Digest, GrantUntil: g.GrantUntil}, nil, nil
		}
		w, err = s.raise(ctx, r, KindCall, a)
	case r.State == RunPending:
		if qid, ok := s.runReq[r.ID]; ok {
			w := s.waits[qid]
			w.waiters++
			return Result{}, w, nil
		}
		w, err = s.raise(ctx, r, KindRun, a)
	default: // RunApproved
		err = s.admit(ctx, r, a)
	}
	if err != nil || w != nil {
		return Result{}, w, err
	}
	return Result{Status: StatusApproved, Mode: ModeRun, RequestID: r.ApprovalID, Reviewer: r.DecidedBy}, nil, nil
}

// admitUnreviewed lets a through without a reviewer, as the account's
// policy says, when run id may act and a is within the agent's limits.
func (s *Store) admitUnreviewed(ctx context.Context, id RunID, a Action) (Result, error) {
	r, err := s.lockRun(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer s.unlock()
	if err := s.usable(ctx, r); err != nil {
		return Result{}, err
	}
	if !within(r.Limits, a) || r.State == RunApproved && !r.inScope(a) {
		return Result{}, ErrOutOfScope
	}
	return Result{Status: StatusApproved, Mode: s.policy.ModeFor(a.Target, a.Account), Unreviewed: true}, nil
}

// admit counts a against approved run r's limits. Called with s.mu held.
func (s *Store) admit(ctx context.Context, r *Run, a Action) error {
	if !r.inScope(a) {
		return ErrOutOfScope
	}
	if r.MaxActions > 0 && r.Actions >= r.MaxActions {
		if err := s.endRun(ctx, r, EndMaxActions, "", ""); err != nil {
			return err
		}
		return &ExpiredError{End: EndMaxActions, MaxActions: r.MaxActions}
	}
	r = r.clone()
	r.Actions++
	return s.commit(ctx, []*Run{r}, nil, nil)
}

// consume turns the decision on call request q into the result for action
// a. An approval authorises DigestOf(run, a) once: it is marked consumed
// here, and a different action, a second use, or a run that ended while
// waiting gets nothing. Called with s.mu held.
func (s *Store) consume(ctx context.Context, q *Request, st Status, a Action) (Result, error) {
	res := Result{Status: st, Mode: ModeCall, RequestID: q.ID, Reviewer: q.DecidedBy, Reason: q.Reason, Digest: q.Digest}
	if st != StatusApproved {
		if err := s.runGone(ctx, q.RunID, st); err != nil {
			return Result{}, err
		}
		return res, nil
	}
	cur, err := loadRequest(ctx, s.db, q.ID)
	if err != nil {
		return Result{}, err
	}
	if cur.Status != StatusApproved || !cur.ConsumedAt.IsZero() {
		return Result{}, ErrAlreadyDecided
	}
	if DigestOf(cur.RunID, a) != cur.Digest {
		return Result{}, ErrDigestMismatch
	}
	r, err := loadRun(ctx, s.db, cur.RunID)
	if err != nil {
		return Result{}, err
	}
	if err := s.usable(ctx, r); err != nil {
		return Result{}, err
	}
	cur.ConsumedAt = s.clock.Now()
	if err := s.commit(ctx, nil, []*Request{cur}, nil); err != nil {
		return Result{}, err
	}
	return res, nil
}
