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
		return Run{}, Secret{}, errors.New("approvals: remote run without a requester")
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
		return 0, fmt.Errorf("approvals: ttl %v over %v: %w", *d, s.maxRunTTL, ErrTTLOverCap)
	}
	return *d, nil
}

// ResolveRemote returns the run a token belongs to, if the run may still
// act. Errors: ErrMalformedToken, ErrUnknownRun, ErrWrongToken (compared in
// constant time), ErrTokenExpired, ErrRunDenied, ErrRunEnded, ErrRunExpired.
// With the last three the run is returned too, as FindRemote would show it,
// so that the refused request can name it; it grants nothing.
func (s *Store) ResolveRemote(ctx context.Context, token Secret) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	r, err := s.tokenRun(ctx, token)
	if err != nil {
		return Run{}, err
	}
	now := s.clock.Now()
	if r.State == RunExpired && r.EndReason == EndTokenExpired || s.due(tokenKey(r.ID), r.TokenExpiresAt, now) {
		if err := s.expireIfDue(ctx, r, now); err != nil && !isRunStateErr(err) {
			return Run{}, err
		}
		return Run{}, ErrTokenExpired
	}
	if err := s.expireIfDue(ctx, r, now); err != nil {
		return refused(r, err)
	}
	return *r, nil
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
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return err
	}
	if r.State.Terminal() {
		return stateErr(r)
	}
	return s.endRun(ctx, r, reason, by, note)
}

// ResolveLocal returns the run of a local caller, creating it (pending) on
// the caller's first request. peer comes from SO_PEERCRED on the gateway's
// socket.
//
// The run is the one anchored at the nearest process in the caller's own
// chain (itself included; see own: no process of another uid) that
// registered as an anchor (RegisterAnchor); failing that, at the caller's
// nearest ancestor that is not transparent (a shell or wrapper) and not
// pid 1, or else at the topmost process of the caller's uid below pid 1.
// Every process in the chain is identified by pid and start time, so a
// reused pid never finds an old run. The run's requester is the caller's
// user.
//
// A denied, ended or expired run is not replaced while its anchor lives:
// that process stays refused (ErrRunDenied, ErrRunEnded, ErrRunExpired),
// and the run is returned with the error, as FindLocal would show it, so
// that the refused request can name it; it grants nothing.
func (s *Store) ResolveLocal(ctx context.Context, peer Peer) (Run, error) {
	full, err := chain(s.insp, peer)
	if err != nil {
		return Run{}, err
	}
	c := own(full)
	anchor, err := heuristicAnchor(c, s.transparent)
	explicitOnly := errors.Is(err, ErrNoAnchor)
	if err != nil && !explicitOnly {
		return Run{}, err
	}
	if r, found, err := s.findLocal(ctx, c, anchor, explicitOnly, false); found || err != nil {
		return r, err
	}
	if explicitOnly {
		return Run{}, ErrNoAnchor
	}
	// Describe reads and hashes the executable: do it without the lock.
	p, err := s.insp.Describe(c[anchor].ID)
	if err != nil {
		return Run{}, err
	}
	p.Chain = full[anchor+1:] // reviewers see the whole way up
	return s.createLocal(ctx, c, anchor, p, false)
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
// hash in constant time. Called with s.mu held.
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
	return r, nil
}

// FindLocal returns the run a local caller acts within, like ResolveLocal,
// but never creates or changes one, and returns it whatever its state (a
// denied or ended run whose anchor still lives): a caller with no run gets
// ErrUnknownRun. It is for reading (an agent looking up its own actions)
// and for naming the run of a refused request.
func (s *Store) FindLocal(ctx context.Context, peer Peer) (Run, error) {
	full, err := chain(s.insp, peer)
	if err != nil {
		return Run{}, err
	}
	c := own(full)
	anchor, err := heuristicAnchor(c, s.transparent)
	explicitOnly := errors.Is(err, ErrNoAnchor)
	if err != nil && !explicitOnly {
		return Run{}, err
	}
	r, found, err := s.findLocal(ctx, c, anchor, explicitOnly, true)
	if err != nil {
		return Run{}, err
	}
	if !found {
		return Run{}, ErrUnknownRun
	}
	return r, nil
}

// RegisterAnchor makes the calling process (peer) the anchor of a new run
// (airlock run, airlock mcp): its descendants' requests resolve to this
// run. Registering again returns the same run.
func (s *Store) RegisterAnchor(ctx context.Context, peer Peer) (Run, error) {
	c, err := chain(s.insp, peer)
	if err != nil {
		return Run{}, err
	}
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	e, ok := s.anchors[c[0].ID]
	s.unlock()
	if ok {
		return s.usableLocal(ctx, e.run)
	}
	p, err := s.insp.Describe(c[0].ID)
	if err != nil {
		return Run{}, err
	}
	p.Chain = c[1:]
	return s.createLocal(ctx, c, 0, p, true)
}

// findLocal looks for an existing run for chain c: the nearest explicit
// anchor, else the heuristic anchor c[anchor].
func (s *Store) findLocal(ctx context.Context, c []ProcStat, anchor int, explicitOnly, readOnly bool) (Run, bool, error) {
	if err := s.lock(); err != nil {
		return Run{}, false, err
	}
	var id RunID
	for _, p := range c {
		if e, ok := s.anchors[p.ID]; ok && e.explicit {
			id = e.run
			break
		}
	}
	if id == "" && !explicitOnly {
		if e, ok := s.anchors[c[anchor].ID]; ok {
			id = e.run
		}
	}
	s.unlock()
	if id == "" {
		return Run{}, false, nil
	}
	var r Run
	var err error
	if readOnly {
		r, err = s.Run(ctx, id) // whatever its state; nothing is changed
		if err == nil && r.EndReason == EndRevoked {
			r, err = Run{}, ErrRunEnded // a revoked run reads nothing either
		}
	} else {
		r, err = s.usableLocal(ctx, id)
	}
	// A run comes back with a refusal too (to name it): the caller must
	// be in it either way.
	if r.ID != "" && (r.Anchor == nil || !admits(c, r.Anchor.ID)) {
		r, err = Run{}, ErrNotAncestor
	}
	return r, true, err
}

// usableLocal loads a local run and checks that it may act: not terminal,
// not expired, anchor alive.
func (s *Store) usableLocal(ctx context.Context, id RunID) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Run{}, err
	}
	if err := s.usable(ctx, r); err != nil {
		return refused(r, err)
	}
	return *r, nil
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

func (s *Store) createLocal(ctx context.Context, c []ProcStat, anchor int, p Process, explicit bool) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	// Someone may have created it while we were describing the process.
	if e, ok := s.anchors[c[anchor].ID]; ok {
		r, err := loadRun(ctx, s.db, e.run)
		if err != nil {
			return Run{}, err
		}
		if err := s.usable(ctx, r); err != nil {
			return refused(r, err)
		}
		return *r, nil
	}
	if p.UID != c[0].UID {
		// The anchor is always of the caller's own chain; never let a
		// run's requester be another user than the caller.
		return Run{}, ErrPeerMismatch
	}
	if !s.alive(p.ID) {
		return Run{}, fmt.Errorf("approvals: anchor %v exited: %w", p.ID, ErrNoProcess)
	}
	now := s.clock.Now()
	r := &Run{ID: RunID(newID(runIDPrefix)), State: RunPending, Requester: p.User, CreatedAt: now,
		Anchor: &p, Explicit: explicit, host: s.opts.Host}
	if err := s.commit(ctx, []*Run{r}, nil, []Event{{Kind: EventRunCreated, Time: now, Run: *r}}); err != nil {
		return Run{}, err
	}
	s.anchors[p.ID] = anchorEntry{run: r.ID, explicit: explicit}
	s.watch(p.ID)
	return *r, nil
}
