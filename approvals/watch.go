package approvals

import (
	"context"
)

// alive reports whether id is still running (same pid, same start time).
func (s *Store) alive(id ProcessID) bool {
	now, err := CurrentID(s.insp, id.PID)
	return err == nil && now == id
}

// CurrentID is which process pid is now: insp's IDReader when it has one,
// else its Stat.
func CurrentID(insp Inspector, pid int) (ProcessID, error) {
	if r, ok := insp.(IDReader); ok {
		return r.ID(pid)
	}
	st, err := insp.Stat(pid)
	return st.ID, err
}

// IDReader is an Inspector that can tell which process a pid is now more
// cheaply than Stat (ProcFS reads one file instead of three): the store
// checks that a run's anchor still runs with it. An Inspector that wraps
// another should pass it on.
type IDReader interface {
	ID(pid int) (ProcessID, error)
}

// watch starts the goroutine that ends id's run when id exits. Called with
// s.mu held and the store open.
func (s *Store) watch(id ProcessID) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.insp.Wait(s.ctx, id); err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("cannot watch anchor process; its run ends on its next use", "process", id, "error", err)
			}
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		e, ok := s.anchors[id]
		if !ok {
			return
		}
		delete(s.anchors, id)
		f := func(ctx context.Context) error {
			r, err := loadRun(ctx, s.db, e.run)
			if err != nil {
				return err
			}
			if r.anchorGone {
				return nil
			}
			return s.anchorExited(ctx, r)
		}
		if err := s.pin(); err != nil {
			s.log.Error("run end not recorded; will retry", "run", e.run, "error", err)
			s.schedule("anchor:"+string(e.run), retryInterval, f)
			return
		}
		defer s.unpin()
		ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			s.log.Error("run end not recorded; will retry", "run", e.run, "error", err)
			s.schedule("anchor:"+string(e.run), retryInterval, f)
		}
	}()
}

// anchorExited records that r's anchor is gone, ending r if it was live.
func (s *Store) anchorExited(ctx context.Context, r *Run) error {
	if r.State.Terminal() {
		r = r.clone()
		r.anchorGone = true
		return s.commit(ctx, []*Run{r}, nil, nil)
	}
	return s.endRun(ctx, r, EndAnchorExited, "", "")
}
