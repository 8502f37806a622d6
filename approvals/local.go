package approvals

import (
	"context"
	"errors"
	"fmt"
)

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
// A run whose approval ran out is renewed (see Renewable): the run
// returned is the new, pending one, for the same anchor. A denied or
// ended run, or an expired one that may not be renewed, is not replaced
// while its anchor lives: that process stays refused (ErrRunDenied,
// ErrRunEnded, ErrRunExpired),
// and the run is returned with the error, as FindLocal would show it, so
// that the refused request can name it; it grants nothing.
func (s *Store) ResolveLocal(ctx context.Context, peer Peer) (Run, error) {
	cl, err := s.callerUpTo(peer)
	if err != nil {
		return Run{}, err
	}
	if r, found, err := s.findLocal(ctx, cl, false); found || err != nil {
		if found && r.ID != "" && errors.Is(err, ErrRunExpired) {
			return s.renewLocal(ctx, cl, r)
		}
		return r, err
	}
	if cl.explicitOnly {
		return Run{}, ErrNoAnchor
	}
	// Describe reads and hashes the executable: do it without the lock.
	p, err := s.insp.Describe(cl.own[cl.anchor].ID)
	if err != nil {
		return Run{}, err
	}
	if err := s.completeChain(&cl); err != nil {
		return Run{}, err
	}
	p.Chain = cl.full[cl.anchor+1:] // reviewers see the whole way up
	return s.createLocal(ctx, cl.own, cl.anchor, p, false)
}

// FindLocal returns the run a local caller acts within, like ResolveLocal,
// but never creates or changes one, and returns it whatever its state (a
// denied or ended run whose anchor still lives): a caller with no run gets
// ErrUnknownRun. It is for reading (an agent looking up its own actions)
// and for naming the run of a refused request.
func (s *Store) FindLocal(ctx context.Context, peer Peer) (Run, error) {
	cl, err := s.callerUpTo(peer)
	if err != nil {
		return Run{}, err
	}
	r, found, err := s.findLocal(ctx, cl, true)
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

// caller is a local caller's process chain as ResolveLocal and FindLocal
// read it.
type caller struct {
	// full is the caller and its ancestors up to pid 1, or, unless
	// complete, as far up as the walk needed to go (see callerUpTo).
	full     []ProcStat
	complete bool
	own      []ProcStat // the part of full that runs as the caller (see own)
	// anchor indexes own: the heuristic anchor, unless explicitOnly (no
	// process qualifies: only a registered anchor holds the caller's run).
	anchor       int
	explicitOnly bool
}

// caller reads peer's whole process chain and its heuristic anchor.
func (s *Store) caller(peer Peer) (caller, error) {
	full, err := chain(s.insp, peer)
	if err != nil {
		return caller{}, err
	}
	return s.callerOf(full, true)
}

// callerUpTo reads peer's process chain only as far up as finding its run
// needs: to its heuristic anchor when no run of the caller's uid was
// registered (airlock run, airlock mcp) — such an anchor could be further
// up, and is searched for through the whole own chain — and never beyond
// the first process of another uid, where the own chain ends. The walk
// above is what reviewers see of a new run (whole); completeChain reads
// it when needed. An agent's every action saves the reads of the
// processes above its anchor.
func (s *Store) callerUpTo(peer Peer) (caller, error) {
	explicit := s.explicitAnchorsOf(peer.UID)
	full, done, err := chainUntil(s.insp, peer, func(c []ProcStat) bool {
		last := c[len(c)-1]
		if last.UID != c[0].UID {
			return true
		}
		return !explicit && len(c) > 1 && last.ID.PID != 1 && !s.transparent[last.name()]
	})
	if err != nil {
		return caller{}, err
	}
	return s.callerOf(full, done)
}

// callerOf is the caller whose chain (from the caller up) is full.
func (s *Store) callerOf(full []ProcStat, complete bool) (caller, error) {
	c := own(full)
	anchor, err := heuristicAnchor(c, s.transparent)
	explicitOnly := errors.Is(err, ErrNoAnchor)
	if err != nil && !explicitOnly {
		return caller{}, err
	}
	return caller{full: full, complete: complete, own: c, anchor: anchor, explicitOnly: explicitOnly}, nil
}

// completeChain reads the rest of cl's chain, up to pid 1, when the walk
// stopped short of it.
func (s *Store) completeChain(cl *caller) error {
	if cl.complete {
		return nil
	}
	full, _, err := chainFrom(s.insp, cl.full, nil)
	if err != nil {
		return err
	}
	cl.full, cl.complete = full, true
	return nil
}

// explicitAnchorsOf reports whether a run of uid was registered and its
// anchor lives (airlock run, airlock mcp).
func (s *Store) explicitAnchorsOf(uid int) bool {
	if err := s.lock(); err != nil {
		return true // the caller walks the whole chain, and fails there
	}
	defer s.unlock()
	for _, e := range s.anchors {
		if e.explicit && e.uid == uid {
			return true
		}
	}
	return false
}

// findLocal looks for an existing run for caller cl: the nearest explicit
// anchor in its own chain, else its heuristic anchor.
func (s *Store) findLocal(ctx context.Context, cl caller, readOnly bool) (Run, bool, error) {
	c := cl.own
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
	if id == "" && !cl.explicitOnly {
		if e, ok := s.anchors[c[cl.anchor].ID]; ok {
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
	return s.usableRun(ctx, id)
}

// usableRun loads run id and checks that it may act, returning it as a
// resolve does (see refused). Called with s.mu held.
func (s *Store) usableRun(ctx context.Context, id RunID) (Run, error) {
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Run{}, err
	}
	if err := s.usable(ctx, r); err != nil {
		return refused(r, err)
	}
	return *r, nil
}

func (s *Store) createLocal(ctx context.Context, c []ProcStat, anchor int, p Process, explicit bool) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	// Someone may have created it while we were describing the process.
	if e, ok := s.anchors[c[anchor].ID]; ok {
		return s.usableRun(ctx, e.run)
	}
	if p.UID != c[0].UID {
		// The anchor is always of the caller's own chain; never let a
		// run's requester be another user than the caller.
		return Run{}, ErrPeerMismatch
	}
	if !s.alive(p.ID) {
		return Run{}, fmt.Errorf("local caller process: anchor %v exited: %w", p.ID, ErrNoProcess)
	}
	now := s.clock.Now()
	r := &Run{ID: RunID(newID(runIDPrefix)), State: RunPending, Requester: p.User, CreatedAt: now,
		Anchor: &p, Explicit: explicit, host: s.opts.Host}
	if err := s.commit(ctx, []*Run{r}, nil, []Event{{Kind: EventRunCreated, Time: now, Run: *r}}); err != nil {
		return Run{}, err
	}
	s.anchors[p.ID] = anchorEntry{run: r.ID, explicit: explicit, uid: p.UID}
	s.watch(p.ID)
	return *r, nil
}
