package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Renewal. A run whose approval ran out — its TTL passed, or the number
// of actions the reviewer allowed was used up — is not a dead end for the
// agent that still holds it: the agent's next action makes a new pending
// run that renews it (Run.Renews), for the same agent identity (the same
// anchor process, or the same run token), and that action waits for a
// reviewer as a first run's does. Approved, the agent goes on in the new
// run with a fresh TTL; denied, the new run stays denied as any denied run
// does, and asks nobody again.
//
// Nothing else renews (see Renewable): what a person ended (a revoked,
// denied or closed run), what has no agent any more (an anchor that
// exited, an agent token revoked or expired), a credential's own lifetime
// (a run token past its expiry), and an anchor process that now runs
// another executable, or as another user, than the one the run was
// approved for. One run is renewed at most once (runs_renews is unique),
// and a pending renewal renews nothing: an agent has at most one renewal
// waiting, whose requests count against the usual caps on pending
// requests.

// NotRenewedError is ErrRunExpired for a run whose approval ran out but
// that may not be renewed; Why says why, in words its agent is told, and
// Ran what ran out.
type NotRenewedError struct {
	Why string
	Ran ExpiredError
}

// notRenewed is the refusal to renew r, for why.
func (r *Run) notRenewed(why string) *NotRenewedError {
	return &NotRenewedError{Why: why, Ran: ExpiredError{End: r.EndReason, MaxActions: r.MaxActions}}
}

func (e *NotRenewedError) Error() string {
	return "run expired and may not be renewed: " + e.Why
}

// Is makes a NotRenewedError an ErrRunExpired.
func (e *NotRenewedError) Is(target error) bool { return target == ErrRunExpired }

// Renewable reports whether r's end lets its agent ask for a renewal:
// its approval's TTL passed or its action budget was used up. Every other
// end — by a person, with the agent's process or credential, or a token's
// own lifetime — is final.
func (r *Run) Renewable() bool {
	return r.State == RunExpired && (r.EndReason == EndTTL || r.EndReason == EndMaxActions)
}

// latest follows r's renewals to the last run that renews it: the run its
// agent acts in now. Called with s.mu held.
func (s *Store) latest(ctx context.Context, r *Run) (*Run, error) {
	for {
		next, err := loadRuns(ctx, s.db, "renews = ?", string(r.ID))
		if err != nil {
			return nil, err
		}
		if len(next) == 0 {
			return r, nil
		}
		r = next[0] // one at most: the index is unique
	}
}

// renewRemote makes the run that renews remote run id, expired, for the
// same token, or refuses as a resolve does (see refused). Called with
// s.mu held.
func (s *Store) renewRemote(ctx context.Context, id RunID) (Run, error) {
	old, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Run{}, err
	}
	if !old.Renewable() {
		return refused(old, stateErr(old))
	}
	if old.AgentID != "" {
		a, err := s.agent(ctx, old.AgentID)
		if err != nil {
			return Run{}, err
		}
		if !a.Usable(s.clock.Now()) {
			return refused(old, old.notRenewed("the agent token it was created with was revoked or has expired"))
		}
	}
	now := s.clock.Now()
	r := &Run{ID: RunID(newID(runIDPrefix)), State: RunPending, Requester: old.Requester, CreatedAt: now,
		TokenExpiresAt: old.TokenExpiresAt, AgentID: old.AgentID, Limits: old.Limits, Renews: old.ID}
	if err := s.commit(ctx, []*Run{r}, nil, []Event{{Kind: EventRunCreated, Time: now, Run: *r}}); err != nil {
		return Run{}, err
	}
	s.scheduleRun(r) // the token's lifetime goes on as it was: never renewed
	return *r, nil
}

// renewLocal makes the run that renews local run old, expired, for the
// same anchor process, or refuses as a resolve does. cl is the caller,
// within old's anchor.
func (s *Store) renewLocal(ctx context.Context, cl caller, old Run) (Run, error) {
	if !old.Renewable() {
		return old, stateErr(&old)
	}
	a := old.Anchor.ID
	if err := s.completeChain(&cl); err != nil {
		return Run{}, err
	}
	above := -1
	for i, p := range cl.full {
		if p.ID == a {
			above = i + 1
		}
	}
	if above < 0 {
		return Run{}, ErrNotAncestor
	}
	// Describe reads and hashes the executable: do it without the lock.
	p, err := s.insp.Describe(a)
	if errors.Is(err, ErrNoProcess) {
		return old, old.notRenewed("its agent process has exited")
	} else if err != nil {
		return Run{}, err
	}
	p.Chain = cl.full[above:]
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	e, ok := s.anchors[a]
	switch {
	case !ok || !s.alive(a):
		return old, old.notRenewed("its agent process has exited")
	case e.run != old.ID:
		return s.usableRun(ctx, e.run) // another action renewed it first
	}
	if why := changedIdentity(old.Anchor, &p); why != "" {
		return old, old.notRenewed(why)
	}
	now := s.clock.Now()
	r := &Run{ID: RunID(newID(runIDPrefix)), State: RunPending, Requester: old.Requester, CreatedAt: now,
		Anchor: &p, Explicit: old.Explicit, host: s.opts.Host, Renews: old.ID}
	if err := s.commit(ctx, []*Run{r}, nil, []Event{{Kind: EventRunCreated, Time: now, Run: *r}}); err != nil {
		return Run{}, err
	}
	// The anchor's watcher ends whichever run the anchor holds when it
	// exits: now this one.
	s.anchors[a] = anchorEntry{run: r.ID, explicit: old.Explicit, uid: p.UID}
	return *r, nil
}

// changedIdentity says how anchor process now differs from was, the
// process the run was approved for, in what a reviewer judged: its user,
// its executable and that file's content (an exec keeps the pid and start
// time). "" when it is the same.
func changedIdentity(was, now *Process) string {
	switch {
	case was.UID != now.UID:
		return fmt.Sprintf("its agent process now runs as uid %d, not %d as when the run was approved", now.UID, was.UID)
	case was.Exe != now.Exe:
		return fmt.Sprintf("its agent process now runs %q, not %q as when the run was approved", now.Exe, was.Exe)
	case was.ExeSHA256 != now.ExeSHA256:
		return "its agent process's executable " + fmt.Sprintf("%q", now.Exe) + " is not the file it was when the run was approved (its SHA-256 changed)"
	}
	return ""
}

// agent loads the agent token id. Called with s.mu held.
func (s *Store) agent(ctx context.Context, id AgentID) (*Agent, error) {
	a, err := scanAgent(s.db.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("agent token %s: %w", id, ErrUnknownAgent)
	}
	if err != nil {
		return nil, fmt.Errorf("state database: read agent token %s: %w", id, err)
	}
	return a, nil
}

// CheckRemote authenticates a run token as ResolveRemote does, but never
// renews: a run whose approval ran out and that its agent may renew
// comes back with no error (Renewable reports it), since the token may
// still ask. It also returns the token's own run: the first of its
// renewals, which names the agent's session whatever run it acts in.
func (s *Store) CheckRemote(ctx context.Context, token Secret) (first RunID, r Run, err error) {
	if err := s.lock(); err != nil {
		return "", Run{}, err
	}
	defer s.unlock()
	hexID, _, err := parseToken(runTokenPrefix, token)
	if err != nil {
		return "", Run{}, err
	}
	first = RunID(runIDPrefix + hexID)
	cur, ended, err := s.tokenRunNow(ctx, token)
	switch {
	case err != nil:
		return "", Run{}, err
	case errors.Is(ended, ErrRunExpired):
		if cur, err = loadRun(ctx, s.db, cur.ID); err != nil {
			return "", Run{}, err
		}
		if !cur.Renewable() {
			return first, *cur, stateErr(cur)
		}
	case ended != nil:
		r, err := refused(cur, ended)
		return first, r, err
	}
	return first, *cur, nil
}

// RenewedBy returns the run that renews run id, "" when none does.
func (s *Store) RenewedBy(ctx context.Context, id RunID) (RunID, error) {
	if err := s.lock(); err != nil {
		return "", err
	}
	defer s.unlock()
	next, err := loadRuns(ctx, s.db, "renews = ?", string(id))
	if err != nil || len(next) == 0 {
		return "", err
	}
	return next[0].ID, nil
}
