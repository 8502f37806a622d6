package approvals

import "fmt"

// The closed sets below are persisted in the state database and carried in
// audit events: append new values only, never rename or reorder.

// Mode is how often a reviewer is asked: once per run, or once per call.
type Mode uint8

const (
	// ModeRun asks a reviewer once per run; the approved run's later
	// actions pass until it expires, runs out of actions, ends or is revoked.
	ModeRun Mode = iota + 1
	// ModeCall asks a reviewer for every action, also inside an approved run.
	ModeCall
)

var modeNames = map[Mode]string{ModeRun: "run", ModeCall: "call"}

func (m Mode) String() string { return enumString(modeNames, m, "Mode") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (m Mode) MarshalText() ([]byte, error) { return enumMarshal(modeNames, m, "mode") }

// UnmarshalText implements encoding.TextUnmarshaler using ParseMode.
func (m *Mode) UnmarshalText(b []byte) error { return enumUnmarshal(modeNames, m, b, "mode") }

// ParseMode parses "run" or "call"; anything else is an error.
func ParseMode(s string) (Mode, error) { return enumParse(modeNames, s, "mode") }

// Stronger reports whether m asks the reviewer more often than o.
func (m Mode) Stronger(o Mode) bool { return m > o }

// RunState is where a run is in its life.
type RunState uint8

const (
	// RunPending: created, not (yet) approved as a whole. Call-mode
	// actions may still be approved one by one.
	RunPending RunState = iota + 1
	// RunApproved: a reviewer approved the run; see Run.ExpiresAt,
	// Run.MaxActions and Run.Scope for its limits.
	RunApproved
	// RunDenied: a reviewer denied the run; every later action is refused.
	RunDenied
	// RunEnded: the anchor process exited, the requester ended the run, or a
	// reviewer revoked it.
	RunEnded
	// RunExpired: the approval's TTL passed, its action budget was used up,
	// or a remote run's token expired.
	RunExpired
)

var runStateNames = map[RunState]string{
	RunPending: "pending", RunApproved: "approved", RunDenied: "denied",
	RunEnded: "ended", RunExpired: "expired",
}

func (s RunState) String() string { return enumString(runStateNames, s, "RunState") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (s RunState) MarshalText() ([]byte, error) { return enumMarshal(runStateNames, s, "run state") }

// UnmarshalText implements encoding.TextUnmarshaler using ParseRunState.
func (s *RunState) UnmarshalText(b []byte) error {
	return enumUnmarshal(runStateNames, s, b, "run state")
}

// ParseRunState parses a run state name.
func ParseRunState(s string) (RunState, error) { return enumParse(runStateNames, s, "run state") }

// Terminal reports whether no action can ever pass in a run in state s.
func (s RunState) Terminal() bool { return s == RunDenied || s == RunEnded || s == RunExpired }

// Kind says what an approval request asks for.
type Kind uint8

const (
	// KindRun asks to approve a whole run.
	KindRun Kind = iota + 1
	// KindCall asks to approve one action, bound to its Digest.
	KindCall
)

var kindNames = map[Kind]string{KindRun: "run", KindCall: "call"}

func (k Kind) String() string { return enumString(kindNames, k, "Kind") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (k Kind) MarshalText() ([]byte, error) { return enumMarshal(kindNames, k, "kind") }

// UnmarshalText implements encoding.TextUnmarshaler using ParseKind.
func (k *Kind) UnmarshalText(b []byte) error { return enumUnmarshal(kindNames, k, b, "kind") }

// ParseKind parses "run" or "call".
func ParseKind(s string) (Kind, error) { return enumParse(kindNames, s, "kind") }

// Status is the state of an approval request.
type Status uint8

const (
	// StatusPending: waiting for a reviewer.
	StatusPending Status = iota + 1
	// StatusApproved: a reviewer approved it.
	StatusApproved
	// StatusDenied: a reviewer denied it.
	StatusDenied
	// StatusExpired: no decision before its deadline, its run ended first,
	// or the gateway restarted while it was pending.
	StatusExpired
	// StatusWithdrawn: its action was cancelled (the agent went away)
	// before a decision.
	StatusWithdrawn
)

var statusNames = map[Status]string{
	StatusPending: "pending", StatusApproved: "approved",
	StatusDenied: "denied", StatusExpired: "expired", StatusWithdrawn: "withdrawn",
}

func (s Status) String() string { return enumString(statusNames, s, "Status") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (s Status) MarshalText() ([]byte, error) { return enumMarshal(statusNames, s, "status") }

// UnmarshalText implements encoding.TextUnmarshaler using ParseStatus.
func (s *Status) UnmarshalText(b []byte) error { return enumUnmarshal(statusNames, s, b, "status") }

// ParseStatus parses a request status name.
func ParseStatus(s string) (Status, error) { return enumParse(statusNames, s, "status") }

// Verdict is a reviewer's answer.
type Verdict uint8

const (
	// Approve grants the request.
	Approve Verdict = iota + 1
	// Deny refuses it.
	Deny
)

var verdictNames = map[Verdict]string{Approve: "approve", Deny: "deny"}

func (v Verdict) String() string { return enumString(verdictNames, v, "Verdict") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (v Verdict) MarshalText() ([]byte, error) { return enumMarshal(verdictNames, v, "verdict") }

// UnmarshalText implements encoding.TextUnmarshaler: "approve" or "deny"
// (the API's decision field).
func (v *Verdict) UnmarshalText(b []byte) error {
	return enumUnmarshal(verdictNames, v, b, "verdict")
}

// EndReason says why a run left the pending or approved state for ended
// or expired.
type EndReason uint8

const (
	// EndAnchorExited: the anchor process exited (or was gone at start-up).
	EndAnchorExited EndReason = iota + 1
	// EndClosed: the requester ended its own run (DELETE /v1/runs/{id}).
	EndClosed
	// EndRevoked: a reviewer revoked the run.
	EndRevoked
	// EndTTL: the run approval's TTL passed.
	EndTTL
	// EndMaxActions: the approved number of actions was used up.
	EndMaxActions
	// EndTokenExpired: a remote run's token expired.
	EndTokenExpired
	// EndAgentRevoked: an operator revoked the agent token the remote
	// run was created with (EndedBy says who).
	EndAgentRevoked
)

var endReasonNames = map[EndReason]string{
	EndAnchorExited: "anchor_exited", EndClosed: "closed", EndRevoked: "revoked",
	EndTTL: "ttl", EndMaxActions: "max_actions", EndTokenExpired: "token_expired",
	EndAgentRevoked: "agent_revoked",
}

func (r EndReason) String() string { return enumString(endReasonNames, r, "EndReason") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (r EndReason) MarshalText() ([]byte, error) {
	return enumMarshal(endReasonNames, r, "end reason")
}

// UnmarshalText implements encoding.TextUnmarshaler using ParseEndReason.
func (r *EndReason) UnmarshalText(b []byte) error {
	return enumUnmarshal(endReasonNames, r, b, "end reason")
}

// ParseEndReason parses an end reason name.
func ParseEndReason(s string) (EndReason, error) {
	return enumParse(endReasonNames, s, "end reason")
}

// state is the run state a run ends in for reason r.
func (r EndReason) state() RunState {
	switch r {
	case EndTTL, EndMaxActions, EndTokenExpired:
		return RunExpired
	}
	return RunEnded
}

// EventKind names an event; the names are the audit entry kinds of the
// contract.
type EventKind uint8

const (
	// EventRunCreated: a run was created (local anchor or remote).
	EventRunCreated EventKind = iota + 1
	// EventRunApproved: a reviewer approved a run.
	EventRunApproved
	// EventRunDenied: a reviewer denied a run.
	EventRunDenied
	// EventRunEnded: a run ended or expired (Event.EndReason says why).
	EventRunEnded
	// EventApprovalRequested: an approval request was raised.
	EventApprovalRequested
	// EventApprovalDecided: a request was approved, denied or expired.
	EventApprovalDecided
	// EventAgentAdded: an operator issued an agent token.
	EventAgentAdded
	// EventAgentRevoked: an agent token was revoked.
	EventAgentRevoked
	// EventReviewerAdded, EventReviewerDisabled, EventReviewerEnabled,
	// EventReviewerRemoved and EventReviewerPassword: an operator changed
	// a reviewer account (Event.Reviewer says which and who).
	EventReviewerAdded
	EventReviewerDisabled
	EventReviewerEnabled
	EventReviewerRemoved
	EventReviewerPassword
	// EventReviewerRenamed: an operator renamed a reviewer account
	// (ReviewerChange.NewName).
	EventReviewerRenamed
	// EventReviewerSessionsEnded: a reviewer's sessions and tokens ended
	// without a change to the account (single sign-on found it outside
	// the reviewer groups).
	EventReviewerSessionsEnded
)

var eventKindNames = map[EventKind]string{
	EventRunCreated: "run.created", EventRunApproved: "run.approved",
	EventRunDenied: "run.denied", EventRunEnded: "run.ended",
	EventApprovalRequested: "approval.requested", EventApprovalDecided: "approval.decided",
	EventAgentAdded: "agent.added", EventAgentRevoked: "agent.revoked",
	EventReviewerAdded: "reviewer.added", EventReviewerDisabled: "reviewer.disabled",
	EventReviewerEnabled: "reviewer.enabled", EventReviewerRemoved: "reviewer.removed",
	EventReviewerPassword: "reviewer.password_changed", EventReviewerRenamed: "reviewer.renamed",
	EventReviewerSessionsEnded: "reviewer.sessions_ended",
}

func (k EventKind) String() string { return enumString(eventKindNames, k, "EventKind") }

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (k EventKind) MarshalText() ([]byte, error) {
	return enumMarshal(eventKindNames, k, "event kind")
}

// UnmarshalText implements encoding.TextUnmarshaler: an audit entry kind
// owned by this package.
func (k *EventKind) UnmarshalText(b []byte) error {
	return enumUnmarshal(eventKindNames, k, b, "event kind")
}

func enumString[T ~uint8](names map[T]string, v T, typ string) string {
	if s, ok := names[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

func enumMarshal[T ~uint8](names map[T]string, v T, what string) ([]byte, error) {
	if s, ok := names[v]; ok {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("state database: invalid %s %d", what, uint8(v))
}

func enumUnmarshal[T ~uint8](names map[T]string, v *T, b []byte, what string) error {
	p, err := enumParse(names, string(b), what)
	if err != nil {
		return err
	}
	*v = p
	return nil
}

func enumParse[T ~uint8](names map[T]string, s, what string) (T, error) {
	for v, name := range names {
		if name == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q: %w", what, s, ErrUnknownValue)
}
