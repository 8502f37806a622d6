package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Authorize decides whether run id may perform action a, asking a
// reviewer when the policy says so, and blocks until it knows:
//
//   - call mode (the policy's ModeFor(a.Target, a.Account), or an action
//     with Redactions or an Escalation): a new request bound to
//     DigestOf(id, a) is raised, also in an approved run; its approval
//     lets exactly this action through once, and, with a grant, the same
//     digest again until the grant ends (no request is raised then).
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
	case len(a.Redactions) > 0 || a.Escalation != "":
		// Part of the command is hidden from the record, or policy says
		// its class needs a reviewer each time: a reviewer sees this one
		// on its own; no run approval covers it.
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
	if err := s.lock(); err != nil {
		return Result{}, nil, err
	}
	defer s.unlock()
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Result{}, nil, err
	}
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

// grantFor returns the approved call request of run r whose grant covers
// a now (the same digest, its grant not yet over), nil for none. Called
// with s.mu held.
//
// The policy in force bounds a grant too: a reload that lowers max_grant
// shortens the grants given before (GrantUntil of the result is the
// bounded end), and one that sets it to 0 ends them.
func (s *Store) grantFor(ctx context.Context, r *Run, a Action) (*Request, error) {
	maxGrant := s.policy.MaxGrantFor(a.Target, a.Account)
	if maxGrant <= 0 {
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

// admitUnreviewed lets a through without a reviewer, as the account's
// policy says, when run id may act and a is within the agent's limits.
func (s *Store) admitUnreviewed(ctx context.Context, id RunID, a Action) (Result, error) {
	if err := s.lock(); err != nil {
		return Result{}, err
	}
	defer s.unlock()
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Result{}, err
	}
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
		return ErrRunExpired
	}
	r = r.clone()
	r.Actions++
	return s.commit(ctx, []*Run{r}, nil, nil)
}

// Defaults for the caps on pending requests.
const (
	DefaultMaxPendingPerRun       = 10
	DefaultMaxPendingPerRequester = 50
)

// PendingLimitError refuses a request past a cap on the requests waiting
// for a decision: Of says whose ("run" or "requester"), Limit how many may
// wait. It is ErrTooManyPending.
type PendingLimitError struct {
	Of    string
	Limit int
}

func (e *PendingLimitError) Error() string {
	return fmt.Sprintf("approvals: %d requests of this %s are waiting for a decision already", e.Limit, e.Of)
}

func (e *PendingLimitError) Unwrap() error { return ErrTooManyPending }

// raise creates a pending request for a in run r, within the caps on
// pending requests. Called with s.mu held.
func (s *Store) raise(ctx context.Context, r *Run, kind Kind, a Action) (*waitSet, error) {
	var ofRun, ofRequester int
	for _, w := range s.waits {
		if w.req.RunID == r.ID {
			ofRun++
		}
		if sameName(w.req.Requester, r.Requester) {
			ofRequester++
		}
	}
	switch {
	case ofRun >= s.maxPending[0]:
		return nil, &PendingLimitError{Of: "run", Limit: s.maxPending[0]}
	case ofRequester >= s.maxPending[1]:
		return nil, &PendingLimitError{Of: "requester", Limit: s.maxPending[1]}
	}
	now := s.clock.Now()
	q := &Request{
		ID: RequestID(newID(requestIDPrefix)), Kind: kind, RunID: r.ID,
		Target: a.Target, Account: a.Account, Command: a.Command, Timeout: a.Timeout,
		Stdin: a.Stdin, AgentReason: a.AgentReason, Secret: a.Secret,
		Class: a.Class, ClassReason: a.ClassReason, Escalation: a.Escalation, Transfer: a.Transfer,
		Digest: DigestOf(r.ID, a), Requester: r.Requester,
		RequestedAt: now, ExpiresAt: now.Add(s.timeout), Status: StatusPending,
	}
	if a.Shown != "" && a.Shown != a.Command {
		q.Command, q.Original, q.Redactions = a.Shown, a.Command, a.Redactions
	}
	ev := Event{Kind: EventApprovalRequested, Time: now, Run: *r, Request: q}
	if err := s.commit(ctx, nil, []*Request{q}, []Event{ev}); err != nil {
		return nil, err
	}
	w := &waitSet{req: q, done: make(chan struct{}), waiters: 1}
	s.waits[q.ID] = w
	if kind == KindRun {
		s.runReq[r.ID] = q.ID
	}
	qid := q.ID
	s.arm(requestKey(qid), q.ExpiresAt, s.timeout, func(ctx context.Context) error {
		return s.expireRequest(ctx, qid)
	})
	return w, nil
}

// leave is an action that stops waiting on w (its caller went away).
// When it was the last, the request is withdrawn at once — recorded as
// decided with status withdrawn — so that no reviewer is asked about an
// action that can no longer run.
func (s *Store) leave(w *waitSet) {
	if err := s.lock(); err != nil {
		return
	}
	defer s.unlock()
	if w.waiters--; w.waiters > 0 || s.waits[w.req.ID] != w {
		return // others still wait, or it was decided meanwhile
	}
	ctx := context.Background()
	r, err := loadRun(ctx, s.db, w.req.RunID)
	if err != nil {
		s.log.Error("withdrawing a request whose action was cancelled", "request", w.req.ID, "error", err)
		return
	}
	q := *w.req
	q.Status, q.DecidedAt, q.Reason = StatusWithdrawn, s.clock.Now(), "withdrawn: the action was cancelled before a decision"
	ev := Event{Kind: EventApprovalDecided, Time: q.DecidedAt, Run: *r, Request: &q}
	if err := s.commit(ctx, nil, []*Request{&q}, []Event{ev}); err != nil {
		// It stays pending and expires in its time.
		s.log.Error("withdrawing a request whose action was cancelled", "request", q.ID, "error", err)
		return
	}
	s.finish(&q, StatusWithdrawn)
}

// expireRequest ends a pending request whose deadline passed. Called with
// s.mu held.
func (s *Store) expireRequest(ctx context.Context, id RequestID) error {
	w, ok := s.waits[id]
	if !ok {
		return nil
	}
	r, err := loadRun(ctx, s.db, w.req.RunID)
	if err != nil {
		return err
	}
	q := *w.req
	q.Status, q.DecidedAt, q.Reason = StatusExpired, s.clock.Now(), "no decision in time"
	ev := Event{Kind: EventApprovalDecided, Time: q.DecidedAt, Run: *r, Request: &q}
	if err := s.commit(ctx, nil, []*Request{&q}, []Event{ev}); err != nil {
		return err
	}
	s.finish(&q, StatusExpired)
	return nil
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

// Decide records a reviewer's decision on a pending request and wakes
// everyone waiting for it. It returns the decided request.
//
// Errors, each leaving everything unchanged: ErrNotReviewer (a zero or
// foreign Reviewer, or one disabled since it logged in), ErrUnknownValue
// (verdict), ErrUnknownRequest, ErrAlreadyDecided (approved or denied
// before), ErrRequestExpired (expired, or past its deadline),
// ErrSelfApproval, ErrBadTTL, ErrTTLOverCap, ErrTTLForCall, ErrBadScope,
// ErrEventNotRecorded.
func (s *Store) Decide(ctx context.Context, rv Reviewer, id RequestID, d Decision) (Request, error) {
	if d.Verdict != Approve && d.Verdict != Deny {
		return Request{}, fmt.Errorf("approvals: verdict %d: %w", d.Verdict, ErrUnknownValue)
	}
	if err := s.lock(); err != nil {
		return Request{}, err
	}
	defer s.unlock()
	if err := s.checkReviewer(ctx, rv); err != nil {
		return Request{}, err
	}
	q, err := loadRequest(ctx, s.db, id)
	if err != nil {
		return Request{}, err
	}
	switch q.Status {
	case StatusPending:
	case StatusExpired:
		return Request{}, ErrRequestExpired
	case StatusWithdrawn:
		return Request{}, ErrWithdrawn
	default:
		return Request{}, ErrAlreadyDecided
	}
	now := s.clock.Now()
	if s.due(requestKey(id), q.ExpiresAt, now) {
		// The timer is due; record the expiry now rather than let this
		// decision look like it counted.
		if err := s.expireRequest(ctx, id); err != nil {
			s.log.Error("expiry not recorded", "request", id, "error", err)
		}
		return Request{}, ErrRequestExpired
	}
	r, err := loadRun(ctx, s.db, q.RunID)
	if err != nil {
		return Request{}, err
	}
	links, err := s.accounts.linksOf(ctx, rv.name)
	if err != nil {
		return Request{}, err
	}
	if s.linked(rv.name, r.Requester, links) || s.linked(rv.name, q.Requester, links) {
		return Request{}, ErrSelfApproval
	}
	var ttl time.Duration
	if d.Grant != 0 {
		switch maxGrant := s.policy.MaxGrantFor(q.Target, q.Account); {
		case q.Kind != KindCall || d.Verdict != Approve:
			return Request{}, fmt.Errorf("approvals: a grant is given with a call approval only: %w", ErrGrantNotAllowed)
		case d.Grant < 0:
			return Request{}, fmt.Errorf("approvals: grant %s: %w", d.Grant, ErrGrantNotAllowed)
		case maxGrant <= 0:
			return Request{}, fmt.Errorf("approvals: the policy of %s@%s allows no grants: %w", q.Account, q.Target, ErrGrantNotAllowed)
		case d.Grant > maxGrant:
			return Request{}, fmt.Errorf("approvals: grant %s over the policy's %s: %w", d.Grant, maxGrant, ErrGrantNotAllowed)
		}
	}
	if q.Kind == KindCall {
		if d.TTL != nil {
			return Request{}, ErrTTLForCall
		}
		if d.MaxActions != 0 || len(d.Scope) != 0 {
			return Request{}, fmt.Errorf("approvals: limits on a call approval: %w", ErrBadScope)
		}
	} else if d.Verdict == Approve {
		if ttl, err = s.ttl(d.TTL, s.runTTL); err != nil {
			return Request{}, err
		}
		if d.MaxActions < 0 {
			return Request{}, fmt.Errorf("approvals: max actions %d: %w", d.MaxActions, ErrBadScope)
		}
		for _, sc := range d.Scope {
			if sc.Target == "" {
				return Request{}, fmt.Errorf("approvals: scope without a target: %w", ErrBadScope)
			}
		}
	}
	st := StatusApproved
	if d.Verdict == Deny {
		st = StatusDenied
	}
	q.Status, q.DecidedBy, q.DecidedAt, q.Reason = st, rv.name, now, d.Reason
	if d.Grant > 0 {
		q.GrantUntil = now.Add(d.Grant)
	}
	events := []Event{{Kind: EventApprovalDecided, Time: now, Run: *r, Request: q}}
	var runs []*Run
	if q.Kind == KindRun {
		r = r.clone()
		r.ApprovalID, r.DecidedBy, r.DecidedAt, r.Reason = q.ID, rv.name, now, d.Reason
		kind := EventRunDenied
		r.State = RunDenied
		if d.Verdict == Approve {
			kind = EventRunApproved
			r.State, r.ExpiresAt, r.MaxActions, r.Scope = RunApproved, now.Add(ttl), d.MaxActions, d.Scope
		}
		runs = append(runs, r)
		events = append(events, Event{Kind: kind, Time: now, Run: *r, Request: q})
	}
	if err := s.commit(ctx, runs, []*Request{q}, events); err != nil {
		return Request{}, err
	}
	s.finish(q, st)
	if d.Grant > 0 {
		s.deadlines[grantKey(q.ID)] = s.clock.Elapsed() + d.Grant
	}
	if q.Kind == KindRun {
		if r.State.Terminal() { // denied: nothing left to expire
			s.unschedule(runKey(r.ID))
			s.unschedule(tokenKey(r.ID))
		} else {
			s.scheduleRun(r)
		}
	}
	return *q, nil
}

// linked reports whether requester is reviewer, or an identity linked to
// the reviewer (Options.Links): a Unix user by name, an agent by its
// "agent:NAME/" prefix.
func (s *Store) linked(reviewer, requester string, more []string) bool {
	if sameName(reviewer, requester) {
		return true
	}
	for _, l := range append(slices.Clip(s.links[strings.ToLower(strings.TrimSpace(reviewer))]), more...) {
		if sameName(l, requester) || strings.HasSuffix(l, "/") && strings.HasPrefix(strings.ToLower(requester), strings.ToLower(l)) {
			return true
		}
	}
	return false
}

// sameName compares a reviewer name with a requester name the way people
// read them: case does not make two people.
func sameName(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
