package approvals

import "context"

// LocalRunOf returns local run id when the caller (peer) belongs to it:
// the run was made in this store's process space and its anchor is the
// caller or one of the caller's ancestors of the caller's uid, pid and
// start time both. It changes nothing. It serves reads of a run another
// replica on this host made, whose anchor FindLocal does not know (it
// knows the anchors of this store's runs). A revoked run reads nothing,
// as with FindLocal; anyone else gets ErrNotAncestor.
func (s *Store) LocalRunOf(ctx context.Context, peer Peer, id RunID) (Run, error) {
	full, err := chain(s.insp, peer)
	if err != nil {
		return Run{}, err
	}
	r, err := s.Run(ctx, id)
	if err != nil {
		return Run{}, err
	}
	switch {
	case r.Anchor == nil || !s.mine(&r) || !admits(own(full), r.Anchor.ID):
		return Run{}, ErrNotAncestor
	case r.EndReason == EndRevoked:
		return Run{}, ErrRunEnded
	}
	return r, nil
}
