package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// A run's authority ends with the run: when it ends, for whatever reason,
// the actions it approved that still run are cancelled the way a caller's
// cancel ends them (sshexec sends KILL to the command and waits for its end
// to be confirmed), and the outcome says why. Every way a run ends goes
// through approvals.Store's endRun, which records run.ended through the
// engine's sink (recordApprovalEvent); the sink wakes watchRunEnds, the one
// place that cancels. Another replica's run ends reach this one by polling
// (runEndPoll): the approvals store notifies replicas of decided requests,
// not of ended runs.

// runEndPoll is how often the engine reads the runs of its running
// actions, for the ends it was not told of: another replica's, or a wake
// that came before its action was approved.
const runEndPoll = 2 * time.Second

// stopCause is why the engine stopped an action before its end: its run
// ended, or a reviewer cancelled it. It is the cause of the action's
// context (context.Cause), and the lifecycle words the outcome with it.
type stopCause struct {
	// By is the reviewer who cancelled the action or ended its run; ""
	// when nobody did (the anchor exited, a time ran out).
	By string
	// Reason is the reviewer's reason, or the run's end note.
	Reason string
	// RunEnd is why the run ended; 0 for a reviewer's cancel.
	RunEnd approvals.EndReason
}

func (c *stopCause) Error() string { return c.detail() }

// detail is the outcome's detail for an action stopped so.
func (c *stopCause) detail() string {
	withReason := func(s string) string {
		if c.Reason != "" {
			return s + ": " + c.Reason
		}
		return s
	}
	switch c.RunEnd {
	case 0:
		return withReason("cancelled by reviewer " + c.By)
	case approvals.EndAnchorExited:
		return "the run ended: its agent process exited"
	case approvals.EndClosed:
		return "the run ended: its agent ended it"
	case approvals.EndRevoked:
		return withReason("the run ended: revoked by " + c.By)
	case approvals.EndTTL:
		return "the run ended: its approval's time ran out"
	case approvals.EndTokenExpired:
		return "the run ended: its token expired"
	case approvals.EndAgentRevoked:
		return "the run ended: its agent token was revoked by " + c.By
	}
	return "the run ended: " + c.RunEnd.String()
}

// facts are the cause as action.finished records it.
func (c *stopCause) facts() *stopFacts {
	f := &stopFacts{By: c.By, Reason: &c.Reason, RunEnd: c.RunEnd}
	if c.RunEnd == 0 {
		f.Why = "reviewer"
	} else {
		f.Why = "run_ended"
	}
	return f
}

// causeOf is why ctx, an action's context, was stopped by the engine; nil
// when it was not (the caller went away, the gateway stops, or it runs on).
func causeOf(ctx context.Context) *stopCause {
	var c *stopCause
	if errors.As(context.Cause(ctx), &c) {
		return c
	}
	return nil
}

// runEndStops reports whether a run ending for reason stops the actions it
// approved that still run. One that spent its action budget does not: its
// last actions were within it.
func runEndStops(reason approvals.EndReason) bool {
	return reason != approvals.EndMaxActions && reason != 0
}

// stop cancels a with cause; false when it has finished already.
func (a *Action) stop(cause *stopCause) bool {
	a.mu.Lock()
	cancel, finished := a.cancel, a.finished
	a.mu.Unlock()
	if finished || cancel == nil {
		return false
	}
	cancel(cause)
	return true
}

// runEnded wakes watchRunEnds: a run ended (run.ended was recorded; the
// change commits once the store's lock is released).
func (e *core) runEnded() {
	select {
	case e.runEnds <- struct{}{}:
	default: // a wake is pending already
	}
}

// watchRunEnds cancels the running actions of runs that ended, when woken
// (runEnded) and every runEndPoll, until the engine stops.
func (e *core) watchRunEnds() {
	t := time.NewTicker(runEndPoll)
	defer t.Stop()
	for {
		select {
		case <-e.base.Done():
			return
		case <-e.runEnds:
		case <-t.C:
		}
		e.stopEndedRuns(e.base)
	}
}

// approvedActions are the actions in flight that a reviewer's approval
// (or an unreviewed pass) let past the approval step, by run: what a run's
// end must stop. An action still waiting is the store's: its request is
// withdrawn with the run.
func (e *core) approvedActions() map[approvals.RunID][]*Action {
	e.mu.Lock()
	held := make([]*Action, 0, len(e.actions))
	for _, a := range e.actions {
		if !isDone(a.done) {
			held = append(held, a)
		}
	}
	e.mu.Unlock()
	byRun := map[approvals.RunID][]*Action{}
	for _, a := range held {
		obj := a.Snapshot()
		if obj.RunID != "" && obj.Approval.Decision == api.DecisionApprove {
			byRun[approvals.RunID(obj.RunID)] = append(byRun[approvals.RunID(obj.RunID)], a)
		}
	}
	return byRun
}

// stopEndedRuns reads the run of every approved action in flight and
// stops the actions of those that ended.
func (e *core) stopEndedRuns(ctx context.Context) {
	for id, acts := range e.approvedActions() {
		rctx, cancel := context.WithTimeout(ctx, runEndPoll)
		run, err := e.store.Run(rctx, id)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("cannot read the run of actions in flight; checking again", "run", id, "error", err)
			}
			continue
		}
		if !run.State.Terminal() || !runEndStops(run.EndReason) {
			continue
		}
		cause := &stopCause{By: run.EndedBy, Reason: run.EndNote, RunEnd: run.EndReason}
		for _, a := range acts {
			if a.stop(cause) {
				e.log.Info("action cancelled: its run ended", "action", a.id, "run", id, "end_reason", run.EndReason)
			}
		}
	}
}

// CancelAction stops one action at a reviewer's wish, whatever step it is
// at: waiting for a reviewer or a slot, or running (its command is sent
// KILL and its end confirmed). The outcome is cancelled, its detail and
// action.finished say who and why, and the agent is told so. The action
// it returns is the one stopping (follow it for the outcome). Refusals:
// ErrNotFound, ErrFinished for an action that has finished, and the
// reviewer's own (ErrForbidden for a reviewer disabled meanwhile).
func (e *Review) CancelAction(ctx context.Context, rv Reviewer, id, reason string) (*Action, error) {
	if n := utf8.RuneCountInString(reason); n > api.MaxReason || !utf8.ValidString(reason) {
		return nil, refuse(ErrInvalid, fmt.Sprintf("the reason must be valid UTF-8 of at most %d characters", api.MaxReason))
	}
	if err := e.store.CheckReviewer(ctx, rv.rv); err != nil {
		return nil, classify(err)
	}
	e.mu.Lock()
	a, ok := e.actions[id]
	e.mu.Unlock()
	if !ok {
		away, err := e.action(ctx, id)
		if err != nil {
			return nil, err
		}
		if v := away.Snapshot(); v.State != api.StateFinished {
			where := "another gateway replica"
			if v.Replica != "" {
				where = "the gateway replica " + v.Replica
			}
			return nil, refuse(ErrNotFinished, "the action runs on "+where+", not this one: cancel it through that replica, "+
				"or end its run (airlock runs end), which cancels it from any replica within seconds")
		}
		return nil, refuse(ErrFinished, "the action has finished already; there is nothing to cancel")
	}
	if !a.stop(&stopCause{By: rv.rv.Name(), Reason: reason}) {
		return nil, refuse(ErrFinished, "the action has finished already; there is nothing to cancel")
	}
	e.log.Info("action cancelled by a reviewer", "action", id, "reviewer", rv.rv.Name())
	return a, nil
}

// stoppedDetail is the detail of an action that ended with outcome:
// detail, or, for an action the engine stopped (causeOf ctx), why first
// and detail after it.
func stoppedDetail(ctx context.Context, outcome sshexec.Outcome, detail string) string {
	c := causeOf(ctx)
	switch {
	case c == nil || outcome != sshexec.Cancelled:
		return detail
	case strings.HasPrefix(detail, "the caller went away"):
		return c.detail() // the caller is there; the engine stopped it
	}
	return c.detail() + " (" + detail + ")"
}

// nextStep is what the agent of an action stopped so should do: not
// retry on its own, since somebody (or its run's end) said stop.
func (c *stopCause) nextStep() *api.NextStepInfo {
	switch c.RunEnd {
	case 0:
		return &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoReviewer,
			Text: "a reviewer stopped this action; it may have run in part: check the target, and do not run it again without asking a human"}
	case approvals.EndRevoked:
		return &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoReviewer,
			Text: "a reviewer ended the run; the command may have run in part: check the target, and do not retry without asking a human"}
	case approvals.EndAgentRevoked:
		return &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoOperator,
			Text: "the agent token was revoked; ask an operator before anything else"}
	case approvals.EndTTL:
		// The run renews: not a new run, a reviewer's renewal.
		return &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoAgent,
			Text: "the run's approval ran out while the command ran; it may have run in part: check the target before anything else; the next action asks a reviewer to approve a new run that renews this one"}
	}
	return &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoAgent,
		Text: "the run ended; the command may have run in part: check the target, then start a new run"}
}

// nextStep is api.NextStepOf obj, unless the engine stopped the action.
func (r *result) nextStep(obj *api.Action) *api.NextStepInfo {
	if r.stopped != nil {
		return r.stopped.nextStep()
	}
	return api.NextStepOf(obj)
}

// stoppedBeforeDial ends an action the engine stopped while its intent
// was being recorded (the append gave up with its context): nothing was
// dialed, and the outcome says why rather than blaming the audit log.
// False when the engine did not stop it.
func (l *lifecycle) stoppedBeforeDial(ctx context.Context) bool {
	c := causeOf(ctx)
	if c == nil {
		return false
	}
	l.end(ctx, sshexec.Cancelled, c.detail(), sshexec.NotStarted)
	return true
}
