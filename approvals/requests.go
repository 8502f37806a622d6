package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

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
	return fmt.Sprintf("%d requests of this %s are waiting for a decision already", e.Limit, e.Of)
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
		Digest: DigestOf(r.ID, a), Requester: r.Requester, Renews: r.Renews,
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

// finish wakes the waiters of q after its final state was committed.
func (s *Store) finish(q *Request, st Status) {
	w, ok := s.waits[q.ID]
	if !ok {
		return
	}
	w.req, w.status = q, st
	close(w.done)
	delete(s.waits, q.ID)
	if s.runReq[q.RunID] == q.ID {
		delete(s.runReq, q.RunID)
	}
	s.unschedule(requestKey(q.ID))
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
		return Request{}, fmt.Errorf("decision verdict %d: %w", d.Verdict, ErrUnknownValue)
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
			return Request{}, fmt.Errorf("a grant is given with a call approval only: %w", ErrGrantNotAllowed)
		case q.Secret != "":
			return Request{}, fmt.Errorf("no grant covers an action that uses a gateway-held secret: %w", ErrGrantNotAllowed)
		case d.Grant < 0:
			return Request{}, fmt.Errorf("grant %s: %w", d.Grant, ErrGrantNotAllowed)
		case maxGrant <= 0:
			return Request{}, fmt.Errorf("the policy of %s@%s allows no grants: %w", q.Account, q.Target, ErrGrantNotAllowed)
		case d.Grant > maxGrant:
			return Request{}, fmt.Errorf("grant %s over the policy's %s: %w", d.Grant, maxGrant, ErrGrantNotAllowed)
		}
	}
	if q.Kind == KindCall {
		if d.TTL != nil {
			return Request{}, ErrTTLForCall
		}
		if d.MaxActions != 0 || len(d.Scope) != 0 {
			return Request{}, fmt.Errorf("limits on a call approval: %w", ErrTTLForCall)
		}
	} else if d.Verdict == Approve {
		if ttl, err = s.ttl(d.TTL, s.runTTL); err != nil {
			return Request{}, err
		}
		if d.MaxActions < 0 {
			return Request{}, fmt.Errorf("max actions %d: %w", d.MaxActions, ErrBadScope)
		}
		for _, sc := range d.Scope {
			if sc.Target == "" {
				return Request{}, fmt.Errorf("scope without a target: %w", ErrBadScope)
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

// Request returns one approval request.
func (s *Store) Request(ctx context.Context, id RequestID) (Request, error) {
	if err := s.lock(); err != nil {
		return Request{}, err
	}
	defer s.unlock()
	q, err := loadRequest(ctx, s.db, id)
	if err != nil {
		return Request{}, err
	}
	return *q, nil
}

// PendingOriginal returns the command of a pending request whose stored
// command is redacted, for a reviewer who asks to see it (the caller
// records that). A request that has ended, or was not redacted, has none:
// ErrNoOriginal.
func (s *Store) PendingOriginal(ctx context.Context, id RequestID) (string, error) {
	if err := s.lock(); err != nil {
		return "", err
	}
	defer s.unlock()
	var orig sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT command_original FROM requests WHERE id = ? AND status = ?`, string(id), StatusPending.String()).Scan(&orig)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", ErrNoOriginal
	case err != nil:
		return "", fmt.Errorf("state database: read request %s: %w", id, err)
	case !orig.Valid:
		return "", ErrNoOriginal
	}
	return orig.String, nil
}

// Pending returns the requests waiting for a reviewer, oldest first
// (`approvals list`).
func (s *Store) Pending(ctx context.Context) ([]Request, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	out := make([]Request, 0, len(s.waits))
	qs, err := loadRequests(ctx, s.db, "status = ?", StatusPending.String())
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	for _, q := range qs {
		if !s.due(requestKey(q.ID), q.ExpiresAt, now) { // one whose timer is about to fire is not shown
			out = append(out, *q)
		}
	}
	return out, nil
}
