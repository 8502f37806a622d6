package web

import (
	"context"
	"errors"
	"time"
)

// Backend is what the pages need from the gateway. It is declared here, by
// its one consumer, so that the pages can be tested against a fake and the
// gateway's stores stay behind it. Every method is called with the
// request's context; errors that a reviewer can act on are the sentinels
// below (compared with errors.Is), anything else is shown as an internal
// error.
type Backend interface {
	// Login verifies a reviewer's name and password from a browser that
	// sent device (the proof a password login gave it before, or "").
	// It rate-limits per address (remoteAddr is the client's host:port),
	// per name, and per remembered device, and returns ErrRateLimited
	// (a *LimitError when it says more) or ErrBadCredentials. With the
	// reviewer it returns the device proof for the browser to keep.
	Login(ctx context.Context, name, password, device, remoteAddr string) (Reviewer, Device, error)
	// LoginLink consumes a one-time login link's token (the gateway
	// makes them, e.g. for `airlock demo`): ErrBadCredentials when it is
	// unknown, used or expired, ErrRateLimited as Login.
	LoginLink(ctx context.Context, token, remoteAddr string) (Reviewer, error)
	// Enabled reports whether rv may still act: a reviewer disabled since
	// login is logged out at the next request.
	Enabled(ctx context.Context, rv Reviewer) bool
	// Pending lists every pending run and call approval, newest first.
	Pending(ctx context.Context) ([]Card, error)
	// Decide records a decision, refusing it (ErrChanged) unless the
	// request still has the digest the reviewer was shown. It returns the
	// decided request.
	Decide(ctx context.Context, rv Reviewer, d Decision) (Card, error)
	// Runs lists active runs and recently ended ones, newest first, each
	// with its recent actions.
	Runs(ctx context.Context) ([]Run, error)
	// Revoke ends a run at a reviewer's wish.
	Revoke(ctx context.Context, rv Reviewer, runID, note string) error
	// Action returns one action with its audit trail.
	Action(ctx context.Context, id string) (Action, error)
	// Cancel stops one action at a reviewer's wish and returns once it
	// has its outcome (cancelled); ErrFinished when it had one already.
	Cancel(ctx context.Context, rv Reviewer, actionID, reason string) error
	// ReadOutput returns an action's stored output after recording in the
	// audit log that rv read it; if that record cannot be made, it returns
	// an error and no output.
	ReadOutput(ctx context.Context, rv Reviewer, actionID string) (Output, error)
	// RevealCommand returns the original of a pending request's redacted
	// command after recording in the audit log that rv read it; ErrNotFound
	// when there is none (not redacted, or no longer pending).
	RevealCommand(ctx context.Context, rv Reviewer, approvalID string) (string, error)
	// AuditStatus summarises the audit log: size, last checkpoint, the
	// last verification and the latest entries.
	AuditStatus(ctx context.Context) (AuditStatus, error)
	// VerifyAudit verifies the whole log now and remembers the result for
	// AuditStatus.
	VerifyAudit(ctx context.Context, rv Reviewer) (Verification, error)
}

// Reviewer is a verified reviewer as Backend.Login returns it. The pages
// show its name and hand it back to the backend with every change; they
// never make one.
type Reviewer interface {
	Name() string
}

// Errors a Backend returns for what a reviewer can act on.
var (
	ErrBadCredentials = errors.New("wrong reviewer name or password")
	ErrRateLimited    = errors.New("too many failed attempts")
	ErrNotFound       = errors.New("not found")
	// ErrAlreadyDecided: someone approved or denied the request first.
	ErrAlreadyDecided = errors.New("request already decided")
	// ErrExpired: the request's deadline passed before the decision.
	ErrExpired = errors.New("request expired")
	// ErrRunEnded: the run ended (process exited, closed or revoked), so
	// its requests can no longer be decided.
	ErrRunEnded = errors.New("run ended")
	// ErrChanged: the request is not the one the reviewer was shown (its
	// digest differs).
	ErrChanged = errors.New("request changed since it was shown")
	// ErrSelfApproval: the reviewer is the requester.
	ErrSelfApproval = errors.New("reviewer is the requester")
	// ErrForbidden: the reviewer may not do this (for example, the
	// account was disabled since login).
	ErrForbidden = errors.New("not allowed")
	// ErrInvalid: the decision's limits are invalid (TTL over the cap, a
	// negative action limit); wrap it with the reason.
	ErrInvalid = errors.New("invalid decision")
	// ErrUnavailable: the change could not be recorded in the audit log,
	// so it did not happen.
	ErrUnavailable = errors.New("audit log unavailable")
	// ErrFinished: the action has its outcome already; nothing to cancel.
	ErrFinished = errors.New("action finished")
)

// Decision is a reviewer's answer to one pending request, as submitted
// from its card.
type Decision struct {
	RequestID string
	// Digest is the request digest the card showed (hex).
	Digest  string
	Approve bool
	Reason  string
	// TTL, MaxActions and OnlyThisAccount apply to run approvals: zero TTL
	// means the policy's default, zero MaxActions no limit.
	TTL             time.Duration
	MaxActions      int
	OnlyThisAccount bool
	// Grant (call approvals) lets the exact action pass again this long;
	// zero approves it once.
	Grant time.Duration
}

// Card is one approval request as a reviewer judges it.
type Card struct {
	ID   string
	Kind string // "run" or "call"
	// Status is "pending", "approved", "denied" or "expired".
	Status     string
	RunID      string
	Target     string
	Address    string
	HostKeys   []string // pinned host key fingerprints (SHA256:…)
	KnownHosts bool     // the target also trusts a known_hosts file
	Account    string
	Command    string
	Timeout    time.Duration
	// Stdin is the action's standard input, nil for none.
	Stdin *StdinView
	// Secret names the gateway-held secret that is the standard input
	// instead, "" for none.
	Secret string
	// Redacted names the rules that replaced parts of Command (what
	// looked like credentials), in order; none when it is as sent.
	Redacted []string
	// Transfer is "put" or "get" for a file transfer (Command describes
	// it; a put's file is Stdin), "" for a command.
	Transfer string
	// Class is the command's class, ClassReason the parts that decided
	// it, Escalation why no run approval covers it.
	Class, ClassReason, Escalation string
	// AgentReason is what the agent says the action is for.
	AgentReason string
	Digest      string
	RequestedAt time.Time
	ExpiresAt   time.Time
	Requester   string
	DecidedBy   string
	Reason      string
	// Run is the requesting run, nil if it could not be read.
	Run *Run
	// Renews is the run the requesting run renews: the same agent asks
	// to go on after that run's approval ran out; "" for a first run.
	Renews string
	// TTLs are the run-approval lifetimes a reviewer may choose, within
	// policy; DefaultTTL is preselected.
	TTLs       []time.Duration
	DefaultTTL time.Duration
	// Grants are the grants a reviewer may give with a call approval
	// (none: the account allows none); GrantUntil the one given.
	Grants     []time.Duration
	GrantUntil time.Time
	// Waiting lists the actions waiting for this decision.
	Waiting []string
}

// StdinView is an action's standard input as a reviewer sees it: its
// size and SHA-256, and the text when it is short text.
type StdinView struct {
	Size   int
	SHA256 string
	Text   string
}

// Run is one run: whose authority, in what state, with what limits.
type Run struct {
	ID    string
	State string // pending, approved, denied, ended, expired
	Kind  string // local or remote
	// Requester is the anchor's user (local) or the API client (remote).
	Requester string
	CreatedAt time.Time
	// Process is the anchor process of a local run.
	Process *Process
	// Explicit: the process registered itself (airlock run, airlock mcp).
	Explicit   bool
	DecidedBy  string
	Reason     string
	ExpiresAt  time.Time
	MaxActions int
	Actions    int
	Scope      []string
	EndedAt    time.Time
	EndReason  string
	EndedBy    string
	EndNote    string
	// Recent are the run's latest actions, newest first.
	Recent []ActionSummary
}

// Active reports whether the run can still act (and be revoked).
func (r *Run) Active() bool { return r.State == "pending" || r.State == "approved" }

// Process is an anchor process as a reviewer sees it.
type Process struct {
	PID       int
	StartTime uint64
	Exe       string
	SHA256    string
	Argv      []string
	Cwd       string
	UID       int
	User      string
	// Parents is the chain from the parent up to pid 1.
	Parents []Parent
	// Warnings are sentences about weak evidence: the card flags them.
	Warnings []string
	// Covers is how many processes the anchor covers now (0: gone).
	Covers int
}

// Parent is one process of an anchor's parent chain.
type Parent struct {
	PID  int
	UID  int
	Comm string
	Exe  string
}

// ActionSummary is one line of a run's history.
type ActionSummary struct {
	ID          string
	Target      string
	Account     string
	Command     string
	State       string
	Outcome     string
	ExitCode    *int
	RequestedAt time.Time
}

// Action is one action in full.
type Action struct {
	ID                 string
	RunID              string
	Target             string
	Account            string
	Command            string
	Timeout            time.Duration
	State              string
	Outcome            string
	Detail             string
	ExitCode           *int
	Signal             string
	Termination        string
	HostKeyFingerprint string
	RequestedAt        time.Time
	StartedAt          time.Time
	FinishedAt         time.Time
	ApprovalMode       string
	ApprovalID         string
	DecidedBy          string
	Decision           string
	ApprovalReason     string
	StdoutBytes        int64
	StderrBytes        int64
	// OutputStored: the output store holds output for this action, which
	// ReadOutput can show.
	OutputStored bool
	// Trail is the action's audit entries, oldest first.
	Trail []Entry
}

// Output is an action's stored output.
type Output struct {
	Stdout, Stderr []byte
	// Received counts what the target sent; Stored what was kept.
	StdoutReceived, StderrReceived int64
}

// Entry is one audit entry, its fields already formatted.
type Entry struct {
	Seq      int64
	Time     time.Time
	Kind     string
	ActionID string
	RunID    string
	Fields   []Field
}

// Field is one named value of an audit entry.
type Field struct {
	Name  string
	Value string
}

// AuditStatus is the state of the audit log.
type AuditStatus struct {
	Origin  string
	Entries int64
	// LastCheckpoint is nil before the first signed checkpoint.
	LastCheckpoint *Checkpoint
	// Uncovered counts entries after the last checkpoint.
	Uncovered int64
	// LastVerify is nil until someone verifies.
	LastVerify *Verification
	Latest     []Entry
}

// Checkpoint is a signed checkpoint.
type Checkpoint struct {
	Size int64
	Note string
}

// Verification is the result of one full verification.
type Verification struct {
	At                 time.Time
	By                 string
	Intact             bool
	Entries            int64
	Verified           int64
	Checkpoints        int
	TrustedCheckpoints int
	Covered            int64
	Uncovered          int64
	// Problems describe each damage found, first first.
	Problems []string
	// Notes are findings that are not damage (entry times that step back).
	Notes []string
}
