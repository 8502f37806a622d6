package engine

import (
	"fmt"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
)

// The values front ends hold between calls to the engine: defined here, so
// that a front end knows the engine's words and nothing of the approvals
// store behind them.

// Peer is a local caller as the kernel reports it on the Unix socket
// (SO_PEERCRED).
type Peer struct {
	PID int
	UID int
	GID int
}

// Secret holds a credential a caller presented or the engine issued (a
// token, a password). It prints as "[redacted]" through fmt, %#v, JSON and
// text marshalling; Reveal is the one deliberate way out.
type Secret struct{ s approvals.Secret }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{approvals.NewSecret(s)} }

// Reveal returns the secret itself: only to hand it to its owner.
func (s Secret) Reveal() string { return s.s.Reveal() }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.s.IsZero() }

func (s Secret) String() string               { return s.s.String() }
func (s Secret) GoString() string             { return s.s.GoString() }
func (s Secret) Format(f fmt.State, c rune)   { s.s.Format(f, c) }
func (s Secret) MarshalText() ([]byte, error) { return s.s.MarshalText() }
func (s Secret) MarshalJSON() ([]byte, error) { return s.s.MarshalJSON() }

// IsAgentToken reports whether a bearer token has the form of an agent
// token (airlock_agent_…), as opposed to a reviewer's or a run's.
func IsAgentToken(bearer string) bool { return approvals.IsAgentToken(approvals.NewSecret(bearer)) }

// Reviewer is a reviewer the engine verified (password, token, login link,
// single sign-on): what a front end holds for the reviewer's session and
// hands back with each thing the reviewer does.
type Reviewer struct{ rv approvals.Reviewer }

// Name is the reviewer's account name.
func (r Reviewer) Name() string { return r.rv.Name() }

// Agent is a remote agent the engine verified (agent token, workload
// token, client certificate): what a front end holds for the request and
// hands to Runs.CreateRemote.
type Agent struct{ a approvals.Agent }

// Subject is the agent's name as runs record it (agent:NAME/ID, or the
// subject its proof names).
func (a Agent) Subject() string { return a.a.Subject() }

// Decision is a reviewer's decision on an approval request.
type Decision struct {
	// Approve approves the request; false denies it.
	Approve bool
	Reason  string
	// TTL (run approvals only): nil, the policy's run TTL.
	TTL *time.Duration
	// MaxActions (run approvals only) limits how many actions pass; 0:
	// no limit.
	MaxActions int
	// Scope (run approvals only) limits the run to these targets or
	// target accounts; empty: all the run may reach.
	Scope []Scope
	// Grant (call approvals only) lets the same action pass again this
	// long without a reviewer; 0 approves it once.
	Grant time.Duration
}

// Scope is a target, or one account of it (Account "": every account).
type Scope struct {
	Target  string
	Account string
}

// store is the decision as the approvals store takes it.
func (d Decision) store() approvals.Decision {
	v := approvals.Decision{Verdict: approvals.Deny, Reason: d.Reason, TTL: d.TTL, MaxActions: d.MaxActions, Grant: d.Grant}
	if d.Approve {
		v.Verdict = approvals.Approve
	}
	for _, sc := range d.Scope {
		v.Scope = append(v.Scope, approvals.Scope(sc))
	}
	return v
}

// Run is a run as the front ends show it: the API's view of it, and what
// a reviewer is shown beyond that.
type Run struct {
	api.Run
	// Explicit: the anchor process registered itself (airlock run,
	// airlock mcp).
	Explicit bool
	// DecidedBy and Reason are the decision on the run, if any.
	DecidedBy, Reason string
	// MaxActions and Scope are an approved run's limits, where the
	// reviewer set them (0 and empty: none); Scope as "target" or
	// "account@target".
	MaxActions int
	Scope      []string
	// EndedAt is when an ended run ended.
	EndedAt time.Time
	// AnchorWarnings are the anchor's Warnings worded for a reviewer, in
	// the same order.
	AnchorWarnings []string
}

// Ended reports whether the run can act no more (denied, ended or
// expired), and so be revoked no more.
func (r Run) Ended() bool {
	return r.State == api.RunDenied || r.State == api.RunEnded || r.State == api.RunExpired
}

// runView is r as the front ends show it.
func runView(r approvals.Run) Run {
	v := Run{Run: apiRun(r), Explicit: r.Explicit, DecidedBy: r.DecidedBy, Reason: r.Reason,
		MaxActions: r.MaxActions, Scope: limitTexts(r.Scope), EndedAt: r.EndedAt}
	if a := r.Anchor; a != nil {
		for _, w := range a.Warnings {
			v.AnchorWarnings = append(v.AnchorWarnings, approvals.WarningText(w))
		}
	}
	return v
}

// runViews is runView of each of runs, in order.
func runViews(runs []approvals.Run) []Run {
	out := make([]Run, 0, len(runs))
	for _, r := range runs {
		out = append(out, runView(r))
	}
	return out
}

// Request is an approval request as the front ends show it: the API's
// view of it (with the grant its account allows while it is pending), and
// what a reviewer is shown beyond that.
type Request struct {
	api.Approval
	// Timeout is the action's timeout (TimeoutS in whole seconds).
	Timeout time.Duration
}

// Pending reports whether the request waits for a decision.
func (q Request) Pending() bool { return q.State == approvals.StatusPending.String() }

// ForRun reports whether the request asks for a run's approval, as
// opposed to one call's.
func (q Request) ForRun() bool { return q.Kind == api.ModeRun }

// ValidRunID reports whether id has the form of a run's id (run_ and 32
// hex digits); whether there is such a run is another question.
func ValidRunID(id string) bool {
	_, err := approvals.ParseRunID(id)
	return err == nil
}

// ValidRequestID reports whether id has the form of an approval
// request's id (apr_ and 32 hex digits).
func ValidRequestID(id string) bool {
	_, err := approvals.ParseRequestID(id)
	return err == nil
}

// runID parses the id of a run a caller names; a malformed one names no
// run.
func runID(id string) (approvals.RunID, error) {
	r, err := approvals.ParseRunID(id)
	if err != nil {
		return "", refuse(ErrNotFound, "no such run")
	}
	return r, nil
}

// requestID parses the id of an approval request a caller names; a
// malformed one names no request.
func requestID(id string) (approvals.RequestID, error) {
	q, err := approvals.ParseRequestID(id)
	if err != nil {
		return "", refuse(ErrNotFound, "no such approval request")
	}
	return q, nil
}

// timeOrNil is t for a view's optional time: nil when t is zero.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Clock is the time the engine keeps (Options.Clock): the wall clock,
// and a monotonic one that only moves forward. The approvals store keeps
// the same clock; tests move one instead of sleeping.
type Clock interface {
	// Now returns the wall-clock time.
	Now() time.Time
	// Elapsed returns the time since a fixed origin on the monotonic
	// clock.
	Elapsed() time.Duration
	// AfterFunc calls f in its own goroutine once d has passed on the
	// monotonic clock and returns a function that cancels the call if it
	// has not started, reporting whether it did. Like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}
