package approvals

import "context"

// LocalRunOf returns local run id when the caller (peer) belongs to it:
// the run was made in this store's process space, and its anchor is the
// caller's anchor as ResolveLocal finds it — the nearest process of the
// caller's uid, from the caller up, that registered a run (airlock run,
// airlock mcp), else the caller's heuristic anchor — pid and start time
// both. It changes nothing. It serves reads of a run another replica on
// this host made, whose anchor FindLocal does not know (it knows the
// anchors of this store's runs). A revoked run reads nothing, as with
// FindLocal; anyone else gets ErrNotAncestor.
func (s *Store) LocalRunOf(ctx context.Context, peer Peer, id RunID) (Run, error) {
	cl, err := s.caller(peer)
	if err != nil {
		return Run{}, err
	}
	r, err := s.Run(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if r.Anchor == nil || !s.mine(&r) {
		return Run{}, ErrNotAncestor
	}
	anchor, ok, err := s.anchorOf(cl, &r)
	switch {
	case err != nil:
		return Run{}, err
	case !ok || anchor != r.Anchor.ID:
		return Run{}, ErrNotAncestor
	case r.EndReason == EndRevoked:
		return Run{}, ErrRunEnded
	}
	return r, nil
}

// anchorOf is the anchor of caller cl's run, as findLocal finds it, with
// r's anchor counted as registered when r says so: false when only a
// registered anchor would hold the caller and none does.
func (s *Store) anchorOf(cl caller, r *Run) (ProcessID, bool, error) {
	if err := s.lock(); err != nil {
		return ProcessID{}, false, err
	}
	defer s.unlock()
	for _, p := range cl.own {
		if e, ok := s.anchors[p.ID]; ok && e.explicit || p.ID == r.Anchor.ID && r.Explicit {
			return p.ID, true, nil
		}
	}
	if cl.explicitOnly {
		return ProcessID{}, false, nil
	}
	return cl.own[cl.anchor].ID, true, nil
}
