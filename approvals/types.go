package approvals

import (
	"slices"
	"time"
)

// Run is one agent process's bounded authority: the unit a reviewer
// approves in run mode.
type Run struct {
	ID    RunID    `json:"id"`
	State RunState `json:"state"`
	// Requester is who asks: for a local run the anchor's user, for a
	// remote run the name the gateway gave at creation. A reviewer of the
	// same name can never decide its requests.
	Requester string    `json:"requester"`
	CreatedAt time.Time `json:"created_at"`

	// Anchor is the process a local run is bound to (nil for a remote run);
	// Explicit says it registered itself (airlock run, airlock mcp).
	Anchor   *Process `json:"anchor,omitempty"`
	Explicit bool     `json:"explicit,omitempty"`
	// TokenExpiresAt is when a remote run's token stops working.
	TokenExpiresAt time.Time `json:"token_expires_at,omitzero"`

	// The decision on the run, if any.
	ApprovalID RequestID `json:"approval_id,omitempty"`
	DecidedBy  string    `json:"decided_by,omitempty"`
	DecidedAt  time.Time `json:"decided_at,omitzero"`
	Reason     string    `json:"reason,omitempty"`
	// Limits of an approved run: ExpiresAt always; MaxActions and Scope
	// when the reviewer set them (0 and empty mean no limit).
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	MaxActions int       `json:"max_actions,omitempty"`
	Scope      []Scope   `json:"scope,omitempty"`
	// Actions counts the actions the run approval let through.
	Actions int `json:"actions"`

	EndedAt   time.Time `json:"ended_at,omitzero"`
	EndReason EndReason `json:"end_reason,omitzero"`
	// EndedBy and EndNote name the reviewer who revoked the run and why.
	EndedBy string `json:"ended_by,omitempty"`
	EndNote string `json:"end_note,omitempty"`

	// AgentID is the agent token a remote run was created with, and
	// Limits that agent's limits: the targets (or accounts) every action
	// of the run must stay within, whatever any approval says.
	AgentID AgentID `json:"agent_id,omitempty"`
	Limits  []Scope `json:"limits,omitempty"`

	// Renews is the run this one renews: the same agent (anchor process
	// or run token) asking again after that run's approval ran out (see
	// Renewable); "" for a first run.
	Renews RunID `json:"renews,omitempty"`

	tokenHash  []byte
	anchorGone bool
	// host is the process space the anchor lives in (Options.Host of the
	// replica that made a local run); "" on SQLite and for older rows.
	host string
}

// Local reports whether the run is bound to an anchor process.
func (r *Run) Local() bool { return r.Anchor != nil }

func (r *Run) clone() *Run {
	c := *r
	c.Scope = slices.Clone(r.Scope)
	return &c
}

// inScope reports whether the approved run covers a.
func (r *Run) inScope(a Action) bool { return within(r.Scope, a) }

// within reports whether a is within scope (empty: anything).
func within(scope []Scope, a Action) bool {
	if len(scope) == 0 {
		return true
	}
	for _, s := range scope {
		if s.Target == a.Target && (s.Account == "" || s.Account == a.Account) {
			return true
		}
	}
	return false
}

// Scope limits a run approval to a target, or to one account of it when
// Account is set.
type Scope struct {
	Target  string `json:"target"`
	Account string `json:"account,omitempty"`
}

// Request is one approval request. The JSON names of the first fields are
// the contract's `approvals list --json` shape.
type Request struct {
	ID      RequestID `json:"id"`
	Kind    Kind      `json:"kind"`
	RunID   RunID     `json:"run_id"`
	Target  string    `json:"target"`
	Account string    `json:"account"`
	// Command and Timeout are the action that raised the request: for a
	// call request the one it authorises, for a run request the first
	// action of the run.
	Command     string        `json:"command"`
	RequestedAt time.Time     `json:"requested_at"`
	ExpiresAt   time.Time     `json:"expires_at"`
	Requester   string        `json:"requester"`
	Timeout     time.Duration `json:"timeout_ns"`
	// Stdin is the action's standard input, nil for none; AgentReason
	// the agent's own account of what the action is for.
	Stdin       *Stdin `json:"stdin,omitempty"`
	AgentReason string `json:"agent_reason,omitempty"`
	// Secret names the gateway-held secret the action's standard input
	// is, "" for none.
	Secret string `json:"secret,omitempty"`
	// Redactions say what of the command was replaced before it was
	// stored (Command is then the redacted text). Original is the command
	// itself, which the digest binds; it is kept in the state database
	// only while the request is pending, for a reviewer to reveal, and
	// erased when the request ends.
	Redactions []Redaction `json:"redactions,omitempty"`
	Original   string      `json:"-"`
	// Transfer is the file transfer the action is, nil for a command.
	Transfer *Transfer `json:"transfer,omitempty"`
	// Class, ClassReason and Escalation are the action's (see Action).
	Class       string `json:"class,omitempty"`
	ClassReason string `json:"class_reason,omitempty"`
	Escalation  string `json:"escalation,omitempty"`
	// Renews is the run that the request's run renews, "" when it is a
	// first run: the reviewer is asked to let the same agent go on.
	Renews RunID `json:"renews,omitempty"`
	// Digest binds a call approval to its action (see DigestOf).
	Digest    Digest    `json:"digest"`
	Status    Status    `json:"status"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	// ConsumedAt is when an approved call request let its action through.
	ConsumedAt time.Time `json:"consumed_at,omitzero"`
	// GrantUntil, on an approved call request, is until when the
	// reviewer let the same action (the same digest: same run, target,
	// account, command, timeout and input) pass again without asking;
	// zero for a one-time approval.
	GrantUntil time.Time `json:"grant_until,omitzero"`
}

// Decision is a reviewer's answer to a request.
type Decision struct {
	Verdict Verdict
	Reason  string
	// TTL applies to run approvals only: nil means the policy's run TTL;
	// zero or negative is ErrBadTTL; over the cap is ErrTTLOverCap.
	TTL *time.Duration
	// MaxActions (run approvals only) limits how many actions pass; 0 means
	// no limit, negative is ErrBadScope.
	MaxActions int
	// Scope (run approvals only) limits the run to these targets/accounts.
	Scope []Scope
	// Grant (call approvals only) lets the same action pass again for
	// this long without a reviewer (see Request.GrantUntil); 0 approves
	// it once. Past the policy's bound (Rule.MaxGrant), or on a request
	// whose action uses a gateway-held secret, it is ErrGrantNotAllowed.
	Grant time.Duration
}

// Result is how an action's approval ended.
type Result struct {
	// Status is StatusApproved, StatusDenied or StatusExpired.
	Status Status
	Mode   Mode
	// RequestID is the request that decided: the call request, or the
	// run request that approved (or denied) the run.
	RequestID RequestID
	Reviewer  string
	Reason    string
	// Digest is the authorised action's digest (call mode).
	Digest Digest
	// GrantUntil is set when an earlier call approval's grant let the
	// action through (RequestID is that approval); it says until when.
	GrantUntil time.Time
	// Unreviewed is set when the account's policy let the action through
	// without a reviewer (Action.Unreviewed).
	Unreviewed bool
}
