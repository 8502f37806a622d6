package engine

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// Actions this replica does not hold. With storage on PostgreSQL an
// agent or a reviewer may ask any replica for an action another one runs,
// or ran until it died: the shared audit log says where it stands, the
// inflight table which replica holds it, and the survivor that takes a
// dead replica's work over records its outcome (interrupted). Such an
// action is read from the log when asked for; while someone follows its
// events, the log is read again every awayPoll until its outcome is
// recorded.

// awayPoll is how often the record of an action another replica holds is
// read again while someone follows it.
const awayPoll = time.Second

// away follows the record of an action this replica does not hold. Its
// fields are guarded by the action's mu.
type away struct {
	e *core
	// cancel stops the goroutine reading the record; nil while none
	// runs.
	cancel context.CancelFunc
}

// follow starts reading a's record again until its outcome is recorded,
// unless that runs already. Called with a.mu held; nil follows nothing.
func (w *away) follow(a *Action) {
	if w == nil || w.cancel != nil || w.e.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.e.base)
	w.cancel = cancel
	w.e.background.Go(func() {
		defer cancel()
		w.e.pollAway(ctx, a)
	})
}

// stop stops following: nobody reads the events any more. Called with
// a.mu held.
func (w *away) stop() {
	if w != nil && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// awayAction is an action of the audit log with no outcome yet (obj, read
// from it) that this replica does not hold: in flight on another replica,
// or left by one that stopped. Its object names the replica holding it.
// One nobody will finish any more is returned as it stands, ended.
func (e *core) awayAction(ctx context.Context, obj api.Action) *Action {
	var known bool
	obj.Replica, known = e.heldBy(ctx, obj.ID)
	if known && e.abandoned(obj) {
		obj.Detail = abandonedDetail(obj)
		return finishedAction(obj, nil, e.outputPolicy(obj.Target, obj.Account), e.outputs)
	}
	a := &Action{id: obj.ID, obj: obj, policy: e.outputPolicy(obj.Target, obj.Account), outputs: e.outputs,
		done: make(chan struct{}), resolved: make(chan struct{}), release: make(chan struct{}),
		subs: map[*subscriber]struct{}{}, away: &away{e: e}}
	a.markResolved() // its run is in the log
	return a
}

// pollAway reads a's record every awayPoll until its outcome is recorded
// (a then finishes with it), the action is abandoned (a ends as it
// stands), or ctx ends. Each change of state is an event.
func (e *core) pollAway(ctx context.Context, a *Action) {
	t := time.NewTicker(awayPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		obj, out, found := e.actionFromAudit(ctx, a.id)
		switch {
		case ctx.Err() != nil || !found:
			continue
		case obj.State == api.StateFinished:
			a.finish(obj, out)
			return
		}
		var known bool
		if obj.Replica, known = e.heldBy(ctx, a.id); !known {
			continue
		}
		if e.abandoned(obj) {
			obj.Detail = abandonedDetail(obj)
			a.end(func() { a.obj = obj })
			return
		}
		if before := a.Snapshot(); before.State != obj.State || before.Replica != obj.Replica {
			a.update(func(o *api.Action) { *o = obj })
			a.setState(obj.State, api.StateEvent{})
		}
	}
}

// heldBy names the replica that holds action id in flight: "" when none
// does (or on SQLite); known is false when the database did not say.
func (e *core) heldBy(ctx context.Context, id string) (replica string, known bool) {
	if e.pg == nil {
		return "", true
	}
	err := e.pg.QueryRowContext(ctx, `SELECT replica FROM inflight WHERE action_id = ?`, id).Scan(&replica)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", true
	case err != nil:
		e.log.Warn("reading which replica holds an action", "action", id, "error", err)
		return "", false
	}
	return replica, true
}

// abandoned reports whether an action without an outcome (obj) will not
// get one any more: no replica holds it in flight, and the longest it
// could have waited for a reviewer and run, and a survivor taken its
// replica's work over, has passed. (A survivor finishes the actions a
// dead replica held in flight; one that died before its action took a
// connection slot left that action without an outcome.)
func (e *core) abandoned(obj api.Action) bool {
	switch {
	case e.pg == nil:
		return true // on SQLite, this gateway is the only one
	case obj.Replica != "":
		return false
	}
	cfg := e.conf().cfg
	life := cfg.Approval.Timeout + time.Duration(obj.TimeoutS)*time.Second + sshexec.DefaultKillGrace
	if cfg.Storage != nil {
		life += 2 * cfg.Storage.Lease
	}
	return e.clock.Now().Sub(obj.RequestedAt) > life+time.Minute
}

// abandonedDetail says what an abandoned action (obj) will stay.
func abandonedDetail(obj api.Action) string {
	if obj.StartedAt == nil {
		return "no outcome was recorded, and none will be: the gateway that took the action stopped before it connected; nothing was run"
	}
	return "no outcome was recorded, and none will be: the gateway that ran the action stopped; the remote state is unknown"
}

// notInRun is the refusal of an agent's read of an action: the same for
// an action of another run and for none at all, so that an agent learns
// nothing of other runs' actions.
func notInRun(id string) error {
	return refuse(ErrNotFound, "no action "+strconv.Quote(id)+" in your run")
}

// inRun reports whether the caller belongs to run runID: its own run is
// that one or renews it, or, for a local caller, that run was made through another
// replica on this host and its anchor is the caller's (LocalRunOf).
func (e *core) inRun(ctx context.Context, c Caller, runID string) bool {
	if runID == "" {
		return false
	}
	if run, err := e.findRun(ctx, c); err == nil && e.renewedFrom(ctx, run, runID) {
		return true
	}
	if !c.Local {
		return false
	}
	_, err := e.store.LocalRunOf(ctx, approvals.Peer(c.Peer), approvals.RunID(runID))
	return err == nil
}
