package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// RemoteRun describes a run created over the API for a caller that is not
// a local process.
type RemoteRun struct {
	// Requester names the authenticated API client; required. A reviewer
	// of this name can never decide the run's requests.
	Requester string
	// TTL is the token's lifetime: nil means MaxRunTTL (the approval's own
	// TTL usually ends the run first); zero or negative is ErrBadTTL; over
	// MaxRunTTL is ErrTTLOverCap.
	TTL *time.Duration
	// Agent is the agent token the run is created with: its id is kept
	// and its limits bind every action of the run.
	Agent *Agent
}

// CreateRemote creates a pending remote run and returns it with its token.
// The token is shown here once and stored only as a hash: hand it to the
// caller (POST /v1/runs) and forget it.
func (s *Store) CreateRemote(ctx context.Context, rr RemoteRun) (Run, Secret, error) {
	if strings.TrimSpace(rr.Requester) == "" {
		return Run{}, Secret{}, errors.New("remote run without a requester")
	}
	ttl, err := s.ttl(rr.TTL, s.maxRunTTL)
	if err != nil {
		return Run{}, Secret{}, err
	}
	if err := s.lock(); err != nil {
		return Run{}, Secret{}, err
	}
	defer s.unlock()
	now := s.clock.Now()
	id := RunID(newID(runIDPrefix))
	tok, hash := newToken(runTokenPrefix, strings.TrimPrefix(string(id), runIDPrefix))
	r := &Run{ID: id, State: RunPending, Requester: rr.Requester, CreatedAt: now,
		TokenExpiresAt: now.Add(ttl), tokenHash: hash[:]}
	if a := rr.Agent; a != nil {
		r.AgentID, r.Limits = a.ID, a.Limits
	}
	if err := s.commit(ctx, []*Run{r}, nil, []Event{{Kind: EventRunCreated, Time: now, Run: *r}}); err != nil {
		return Run{}, Secret{}, err
	}
	s.scheduleRun(r)
	return *r, tok, nil
}

// ttl validates an optional TTL against the cap; nil means def.
func (s *Store) ttl(d *time.Duration, def time.Duration) (time.Duration, error) {
	if d == nil {
		return def, nil
	}
	if *d <= 0 {
		return 0, ErrBadTTL
	}
	if *d > s.maxRunTTL {
		return 0, fmt.Errorf("ttl %v over %v: %w", *d, s.maxRunTTL, ErrTTLOverCap)
	}
	return *d, nil
}

// ResolveRemote returns the run a token belongs to, if the run may still
// act: the token's own run, or the last run that renews it. A run whose
// approval ran out is renewed (see Renewable): the run returned is the
// new, pending one, for the same token. Errors: ErrMalformedToken, ErrUnknownRun, ErrWrongToken (compared in
// constant time), ErrTokenExpired, ErrRunDenied, ErrRunEnded, ErrRunExpired.
// With the last three the run is returned too, as FindRemote would show it,
// so that the refused request can name it; it grants nothing.
func (s *Store) ResolveRemote(ctx context.Context, token Secret) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	r, ended, err := s.tokenRunNow(ctx, token)
	switch {
	case err != nil:
		return Run{}, err
	case errors.Is(ended, ErrRunExpired):
		return s.renewRemote(ctx, r.ID)
	case ended != nil:
		return refused(r, ended)
	}
	return *r, nil
}

// tokenRunNow is tokenRun with the token's own lifetime checked
// (ErrTokenExpired) and the run's deadlines applied: ended is the run's
// state error, as expireIfDue returns it, when it may not act. Called
// with s.mu held.
func (s *Store) tokenRunNow(ctx context.Context, token Secret) (r *Run, ended, err error) {
	if r, err = s.tokenRun(ctx, token); err != nil {
		return nil, nil, err
	}
	now := s.clock.Now()
	if r.State == RunExpired && r.EndReason == EndTokenExpired || s.due(tokenKey(r.ID), r.TokenExpiresAt, now) {
		if err := s.expireIfDue(ctx, r, now); err != nil && !isRunStateErr(err) {
			return nil, nil, err
		}
		return nil, nil, ErrTokenExpired
	}
	if ended = s.expireIfDue(ctx, r, now); ended != nil && !isRunStateErr(ended) {
		return nil, nil, ended
	}
	return r, ended, nil
}

// FindRemote returns the run a token belongs to and changes nothing: for
// reading (an agent looking up its own actions) and for naming the run of
// a request it refuses. The run may have ended by its agent's hand, been
// denied or have outlived its approval; but a token past its own lifetime
// reads nothing (ErrTokenExpired), nor does one of a run a reviewer
// revoked (ErrRunEnded). Other errors: ErrMalformedToken, ErrUnknownRun,
// ErrWrongToken.
func (s *Store) FindRemote(ctx context.Context, token Secret) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	r, err := s.tokenRun(ctx, token)
	if err != nil {
		return Run{}, err
	}
	switch {
	case r.State == RunExpired && r.EndReason == EndTokenExpired || s.due(tokenKey(r.ID), r.TokenExpiresAt, s.clock.Now()):
		return Run{}, ErrTokenExpired
	case r.EndReason == EndRevoked:
		return Run{}, ErrRunEnded
	}
	return *r, nil
}

// tokenRun loads the remote run token belongs to, comparing the token's
// hash in constant time, and follows its renewals to the last. Called
// with s.mu held.
func (s *Store) tokenRun(ctx context.Context, token Secret) (*Run, error) {
	hexID, hash, err := parseToken(runTokenPrefix, token)
	if err != nil {
		return nil, err
	}
	r, err := loadRun(ctx, s.db, RunID(runIDPrefix+hexID))
	if err != nil {
		return nil, err
	}
	if r.Local() || !equalHash(r.tokenHash, hash[:]) {
		return nil, ErrWrongToken
	}
	// The token acts in the last run that renews its own.
	return s.latest(ctx, r)
}

// EndRun ends a run at its requester's wish (DELETE /v1/runs/{id}, or an
// anchor process shutting down cleanly). The gateway must have
// authenticated the requester first (ResolveRemote or ResolveLocal).
func (s *Store) EndRun(ctx context.Context, id RunID) error {
	return s.end(ctx, id, EndClosed, "", "")
}

// Revoke ends a run at a reviewer's wish; its next action is refused, and
// actions waiting for approval in it are told the run ended.
func (s *Store) Revoke(ctx context.Context, rv Reviewer, id RunID, note string) error {
	if err := s.lock(); err != nil {
		return err
	}
	err := s.checkReviewer(ctx, rv)
	s.unlock()
	if err != nil {
		return err
	}
	return s.end(ctx, id, EndRevoked, rv.name, note)
}

func (s *Store) end(ctx context.Context, id RunID, reason EndReason, by, note string) error {
	r, err := s.lockRun(ctx, id)
	if err != nil {
		return err
	}
	defer s.unlock()
	if r.State.Terminal() {
		return stateErr(r)
	}
	return s.endRun(ctx, r, reason, by, note)
}

// endRun moves r to ended or expired for reason, withdrawing its pending
// requests at once: nothing is left to approve once the run is over (its
// anchor exited, it was closed or revoked, or ran out). Called with s.mu
// held; on error nothing changed.
func (s *Store) endRun(ctx context.Context, r *Run, reason EndReason, by, note string) error {
	now := s.clock.Now()
	r = r.clone()
	r.State, r.EndedAt, r.EndReason, r.EndedBy, r.EndNote = reason.state(), now, reason, by, note
	if reason == EndAnchorExited {
		r.anchorGone = true
	}
	var reqs []*Request
	var events []Event
	for _, w := range s.waits {
		if w.req.RunID != r.ID {
			continue
		}
		q := *w.req
		q.Status, q.DecidedAt, q.Reason = StatusWithdrawn, now, "withdrawn: the run "+r.State.String()+" ("+reason.String()+")"
		reqs = append(reqs, &q)
		events = append(events, Event{Kind: EventApprovalDecided, Time: now, Run: *r, Request: &q})
	}
	events = append(events, Event{Kind: EventRunEnded, Time: now, Run: *r})
	if err := s.commit(ctx, []*Run{r}, reqs, events); err != nil {
		return err
	}
	for _, q := range reqs {
		s.finish(q, StatusWithdrawn)
	}
	s.unschedule(runKey(r.ID))
	s.unschedule(tokenKey(r.ID))
	if reason == EndAnchorExited {
		delete(s.anchors, r.Anchor.ID)
	}
	return nil
}

// refused returns what a resolve returns for a run that may not act: the
// run, for naming (the refused request belongs to it; it grants nothing),
// when FindLocal or FindRemote would show it too, with err.
func refused(r *Run, err error) (Run, error) {
	if r.EndReason == EndRevoked && errors.Is(err, ErrRunEnded) {
		// A revoked run reads nothing; its agent is told who ended it
		// and why, as a denied one is told the reviewer's reason.
		return Run{}, &RevokedError{By: r.EndedBy, Note: r.EndNote}
	}
	if !isRunStateErr(err) {
		return Run{}, err
	}
	return *r, err
}

// usable checks that r may act now, ending it if a deadline passed or its
// anchor is gone. Called with s.mu held.
func (s *Store) usable(ctx context.Context, r *Run) error {
	if r.State.Terminal() {
		return stateErr(r)
	}
	if r.Local() && s.mine(r) && !s.alive(r.Anchor.ID) {
		// The watcher will record it too; whoever is first wins.
		if err := s.endRun(ctx, r, EndAnchorExited, "", ""); err != nil {
			return err
		}
		return ErrRunEnded
	}
	return s.expireIfDue(ctx, r, s.clock.Now())
}

// stateErr is the error for an action in terminal run r.
func stateErr(r *Run) error {
	switch r.State {
	case RunDenied:
		return ErrRunDenied
	case RunEnded:
		return ErrRunEnded
	case RunExpired:
		return &ExpiredError{End: r.EndReason, MaxActions: r.MaxActions}
	}
	return nil
}

func isRunStateErr(err error) bool {
	return errors.Is(err, ErrRunDenied) || errors.Is(err, ErrRunEnded) || errors.Is(err, ErrRunExpired)
}

// Run returns one run.
func (s *Store) Run(ctx context.Context, id RunID) (Run, error) {
	r, err := s.lockRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	defer s.unlock()
	return *r, nil
}

// RecentRuns returns the n runs created last, whatever their state,
// oldest first.
func (s *Store) RecentRuns(ctx context.Context, n int) ([]Run, error) {
	return s.runsWhere(ctx, "id IN (SELECT id FROM runs ORDER BY created_at DESC, id DESC LIMIT ?)", n)
}

// Runs returns the runs that are pending or approved, oldest first.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	return s.runsWhere(ctx, "state IN (?, ?)", RunPending.String(), RunApproved.String())
}

// runsWhere returns the runs where says, oldest first.
func (s *Store) runsWhere(ctx context.Context, where string, args ...any) ([]Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	rs, err := loadRuns(ctx, s.db, where, args...)
	if err != nil {
		return nil, err
	}
	out := make([]Run, len(rs))
	for i, r := range rs {
		out[i] = *r
	}
	return out, nil
}
