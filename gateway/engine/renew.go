package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// Runs that renew (docs/approvals.md): the store renews a run whose
// approval ran out when its agent acts again (approvals.Store.ResolveLocal
// and ResolveRemote), and the action waits for the renewal's approval as
// for a first run's. Here: what the agent is told while it waits, and
// when a run is refused, with what next step — never "fix the request"
// when the request was fine.

// renewalNote adds to msg, what an agent waiting for request r is told,
// the run r renews, if it renews one.
func renewalNote(r approvals.Request, msg string) string {
	if r.Renews != "" {
		msg += fmt.Sprintf("; it renews run %s, whose approval ran out", r.Renews)
	}
	return msg
}

// endRunRefused ends an action whose run may not act for a reason that
// is not the request's: the run ended, ran out without a renewal, or has
// as many requests waiting as it may. It reports false for any other
// error.
func (l *lifecycle) endRunRefused(ctx context.Context, err error) bool {
	var nr *approvals.NotRenewedError
	var rv *approvals.RevokedError
	var ran *approvals.ExpiredError
	switch {
	case errors.As(err, &rv):
		return false // a reviewer's no: endRunError tells who and why
	case errors.As(err, &nr):
		l.refuseRun(ctx, ranOut(nr.Ran)+", and the run may not be renewed: "+nr.Why, newRunStep)
	case errors.Is(err, approvals.ErrTokenExpired):
		l.refuseRun(ctx, ranOut(approvals.ExpiredError{End: approvals.EndTokenExpired}), newRunStep)
	case errors.As(err, &ran) && ran.End == approvals.EndTokenExpired:
		l.refuseRun(ctx, ranOut(*ran), newRunStep)
	case errors.As(err, &ran):
		// The approval ran out as this action asked (its time or its
		// action budget): the run renews at the next action.
		l.refuseRun(ctx, ranOut(*ran), renewStep)
	case errors.Is(err, approvals.ErrRunEnded):
		l.refuseRun(ctx, "the run has ended", newRunStep)
	case errors.Is(err, approvals.ErrTooManyPending):
		l.refuseRun(ctx, pendingLimitDetail(err), &api.NextStepInfo{Retry: api.RetryYes, Who: api.WhoReviewer,
			Text: "nothing is wrong with the request: a reviewer must decide the requests that wait, then a retry may work"})
	default:
		return false
	}
	return true
}

// ranOut says what of a run ran out: its action budget is not its time,
// and neither is its token's lifetime.
func ranOut(e approvals.ExpiredError) string {
	switch e.End {
	case approvals.EndMaxActions:
		return fmt.Sprintf("the run's action budget (%d) is spent", e.MaxActions)
	case approvals.EndTTL:
		return "the run's approval has expired (its time ran out)"
	case approvals.EndTokenExpired:
		return "the run's token has expired, and a token's lifetime is never renewed"
	}
	return "the run's approval has run out"
}

// renewStep is the next step of an action whose run's approval ran out
// and may be renewed.
var renewStep = &api.NextStepInfo{Retry: api.RetryYes, Who: api.WhoReviewer,
	Text: "nothing is wrong with the request: retry, and the retry asks a reviewer to approve a new run that renews this one"}

// newRunStep is the next step of an action whose run is over for good.
var newRunStep = &api.NextStepInfo{Retry: api.RetryNo, Who: api.WhoOperator,
	Text: "nothing is wrong with the request, but this run cannot act again: whoever runs the agent must start a new run (a new airlock run or airlock mcp process, or a new run token from POST /v1/runs)"}

// refuseRun ends the action as rejected with detail and next step next.
func (l *lifecycle) refuseRun(ctx context.Context, detail string, next *api.NextStepInfo) {
	l.runStep = next
	l.end(ctx, sshexec.Rejected, detail, 0)
}

// nextStep is what the agent of the finished action obj should do.
func (l *lifecycle) nextStep(obj *api.Action) *api.NextStepInfo {
	if l.runStep != nil && obj.Outcome == sshexec.Rejected {
		step := *l.runStep
		return &step
	}
	return l.res.nextStep(obj)
}

// TokenSession is what names an MCP session over HTTP: the run token's
// own run, which renewals keep, and until when the token works.
type TokenSession struct {
	ID      string
	Expires time.Time
}

// TokenSession authenticates a run token for a session: its run may act,
// or its next action asks a reviewer to renew it. The session lasts as
// long as the token: a run's approval running out renews, the token's
// lifetime never does.
func (e *Runs) TokenSession(ctx context.Context, tok Secret) (TokenSession, error) {
	first, run, err := e.store.CheckRemote(ctx, tok.s)
	if err != nil {
		return TokenSession{}, classify(err)
	}
	return TokenSession{ID: string(first), Expires: run.TokenExpiresAt}, nil
}

// maxRenewalsRead bounds how far back an agent's reads follow the runs its
// run renews.
const maxRenewalsRead = 1000

// renewedFrom reports whether run is runID or renews it, directly or
// through the runs it renews: an agent reads the actions of the runs it
// went on from as its own.
func (e *core) renewedFrom(ctx context.Context, run approvals.Run, runID string) bool {
	for range maxRenewalsRead {
		if string(run.ID) == runID {
			return true
		}
		if run.Renews == "" {
			return false
		}
		var err error
		if run, err = e.store.Run(ctx, run.Renews); err != nil {
			return false
		}
	}
	return false
}
