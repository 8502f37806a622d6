package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/airlockgw/airlock/sshexec/outcome"
)

// ActionRequest is the body of POST /v1/actions.
type ActionRequest struct {
	Target   string `json:"target"`
	Account  string `json:"account,omitempty"`
	Command  string `json:"command"`
	TimeoutS int    `json:"timeout_s,omitempty"`
	// Stdin is the command's standard input, base64 (standard, padded);
	// empty sends none. The account's max_stdin bounds it.
	Stdin string `json:"stdin,omitempty"`
	// Secret names a gateway-held secret to write to the command's
	// standard input instead (it cannot be combined with Stdin). The
	// agent never sees its value; occurrences of it in the output are
	// replaced by "[secret NAME]".
	Secret string `json:"secret,omitempty"`
	// Reason is what the agent says the action is for (at most
	// MaxReason characters): shown to reviewers as the agent's claim.
	Reason string `json:"reason,omitempty"`
	// Put or Get makes the action a file transfer instead of a command
	// (Command is then left empty: the gateway describes the transfer).
	Put *PutRequest `json:"put,omitempty"`
	Get *GetRequest `json:"get,omitempty"`
}

// PutRequest writes an uploaded file (POST /v1/uploads) to Path on the
// target: to a temporary name first, published only once every byte
// arrived with the approved digest.
type PutRequest struct {
	Upload string `json:"upload"`
	Path   string `json:"path"`
	// Mode is the file's permission bits in octal ("0644", the default);
	// setuid, setgid and sticky are refused.
	Mode string `json:"mode,omitempty"`
	// Overwrite allows replacing an existing file.
	Overwrite bool `json:"overwrite,omitempty"`
}

// GetRequest reads the file at Path on the target; once the action
// succeeded, GET /v1/actions/{id}/file gives its bytes.
type GetRequest struct {
	Path string `json:"path"`
}

// Upload is the answer to POST /v1/uploads: the bytes, held by the
// gateway for a put of the same run until ExpiresAt.
type Upload struct {
	ID        string    `json:"upload"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Transfer is what a put or get did, in the action object.
type Transfer struct {
	Direction string `json:"direction"` // put or get
	Path      string `json:"path"`
	Mode      string `json:"mode,omitempty"`
	Overwrite bool   `json:"overwrite,omitempty"`
	// Size and SHA256 are the file's: for a put the approved bytes, for
	// a get the bytes read (all of them when the action succeeded).
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Published (put) says the file is at Path, Replaced that it
	// replaced one; Leftover names a temporary file a failed put could
	// not remove (never published).
	Published bool   `json:"published,omitempty"`
	Replaced  bool   `json:"replaced,omitempty"`
	Leftover  string `json:"leftover,omitempty"`
	// File (get) is where the agent fetches the bytes, until FileExpires.
	File        string     `json:"file,omitempty"`
	FileExpires *time.Time `json:"file_expires_at,omitempty"`
}

// MaxReason bounds an action's reason, in characters.
const MaxReason = 500

// MaxStdin is the most standard input an action can send (the output
// store keeps it whole); an account's max_stdin is at most this.
const MaxStdin = outputCap

// outputCap is sshexec.DefaultOutputLimit, the gateway's cap on each output
// stream (a test holds the two equal: this package does not link the SSH
// client, for airlock-ssh's sake).
const outputCap = 8 << 20

// Action is the action object of the contract. Outcome is empty while the
// action is in flight; State says where it is.
type Action struct {
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
	Target   string `json:"target"`
	Account  string `json:"account"`
	Command  string `json:"command"`
	TimeoutS int    `json:"timeout_s"`
	State    State  `json:"state"`

	// Outcome and Termination are zero (and not sent) while the action
	// is in flight.
	Outcome            outcome.Outcome     `json:"outcome,omitempty"`
	Detail             string              `json:"detail,omitempty"`
	ExitCode           *int                `json:"exit_code,omitempty"`
	Signal             string              `json:"signal,omitempty"`
	Termination        outcome.Termination `json:"termination,omitempty"`
	HostKeyFingerprint string              `json:"host_key_fingerprint,omitempty"`
	// Hop names where an action to a target behind a jump host failed
	// before its command started: the jump host (a target name) or the
	// target itself. Absent for direct targets and once the command ran.
	Hop string `json:"hop,omitempty"`
	// Transfer is set for a file transfer (put or get) instead of a
	// command.
	Transfer *Transfer `json:"transfer,omitempty"`

	// Stdout and Stderr are what the account's output policy returns.
	// They hold the bytes as text when those are valid UTF-8; otherwise
	// they hold base64 and the Encoding field says so.
	Stdout          string `json:"stdout"`
	StdoutEncoding  string `json:"stdout_encoding,omitempty"`
	Stderr          string `json:"stderr"`
	StderrEncoding  string `json:"stderr_encoding,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// OutputPolicy is the account's output policy that Stdout and Stderr
	// follow (full, tail or none); absent when no output was stored.
	OutputPolicy  string         `json:"output_policy,omitempty"`
	OutputDropped *OutputDropped `json:"output_dropped,omitempty"` // output no page returns

	// StdinBytes and StdinSHA256 (hex) describe the standard input the
	// action sent; absent for none.
	StdinBytes  int64  `json:"stdin_bytes,omitempty"`
	StdinSHA256 string `json:"stdin_sha256,omitempty"`
	// Reason is what the agent said the action is for.
	Reason string `json:"reason,omitempty"`
	// Redactions say what of the command looked like a credential and was
	// replaced ("[redacted:RULE]") in Command before it was stored: the
	// rule, and where in the command as sent.
	Redactions []Redaction `json:"redactions,omitempty"`
	// Class is the command's class: read_only, mutating, destructive,
	// privileged or forbidden.
	Class string `json:"class,omitempty"`
	// Secret is the gateway-held secret the action's standard input was;
	// SecretReplacements counts the occurrences of its value replaced in
	// the output ("[secret NAME]"), where sizes count the replaced output.
	Secret             string `json:"secret,omitempty"`
	SecretReplacements int    `json:"secret_replacements,omitempty"`

	// NextStep is what to do after an action that did not succeed: retry
	// or not, who must act, in words; absent after a success and while
	// in flight.
	NextStep *NextStepInfo `json:"next_step,omitempty"`

	RequestedAt time.Time  `json:"requested_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`

	Approval ApprovalInfo `json:"approval"`

	// Replica names the gateway replica that holds the action in flight
	// when another replica answers for it (storage on PostgreSQL); absent
	// otherwise.
	Replica string `json:"replica,omitempty"`
}

// RevealedCommand is the answer of GET /v1/approvals/{id}/command: the
// original of a pending request's redacted command.
type RevealedCommand struct {
	ApprovalID string `json:"approval_id"`
	Command    string `json:"command"`
}

// Redaction is one part of a command replaced before it was stored.
type Redaction struct {
	Rule   string `json:"rule"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

// State is where an action is in its lifecycle.
type State string

// The action states.
const (
	StateRequested       State = "requested"
	StateWaitingApproval State = "waiting_approval"
	StateConnecting      State = "connecting"
	StateRunning         State = "running"
	StateFinished        State = "finished"
)

// ApprovalInfo says under which approval an action ran or was refused.
// Mode is absent when no approval mode applied: a request rejected
// before it named a configured target and account.
type ApprovalInfo struct {
	Mode      Mode     `json:"mode,omitempty"`
	ID        string   `json:"id,omitempty"`
	DecidedBy string   `json:"decided_by,omitempty"`
	Decision  Decision `json:"decision,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Why       string   `json:"why,omitempty"` // why a reviewer is asked: escalated class and command, secret, or mode
	// GrantUntil is set when the approval ID's grant let this repeat of
	// the action it approved through: until when it does.
	GrantUntil *time.Time `json:"grant_until,omitempty"`
}

// The closed sets of the wire below are strings, as JSON carries them. A
// client keeps a name it does not know as it is (a newer gateway may send
// it); Valid says whether it is one of this version's.

// Mode is an approval mode: how often a reviewer is asked.
type Mode string

// The approval modes.
const (
	ModeRun  Mode = "run"  // once, for a whole run
	ModeCall Mode = "call" // for every action
	// ModeUnreviewed is how an action ran that no reviewer was asked
	// about: the account's policy lets its class through
	// (allow_unreviewed).
	ModeUnreviewed Mode = "unreviewed"
)

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m == ModeRun || m == ModeCall || m == ModeUnreviewed }

// Decision is what became of an approval request.
type Decision string

// The decisions. DecisionExpired is no reviewer's: the deadline passed.
const (
	DecisionApprove Decision = "approve"
	DecisionDeny    Decision = "deny"
	DecisionExpired Decision = "expired"
)

// Valid reports whether d is one of the decisions.
func (d Decision) Valid() bool {
	return d == DecisionApprove || d == DecisionDeny || d == DecisionExpired
}

// RunKind says how a run's agent is known.
type RunKind string

// The run kinds.
const (
	RunLocal  RunKind = "local"  // an anchor process on the gateway's host
	RunRemote RunKind = "remote" // a run token over HTTP
)

// Valid reports whether k is one of the kinds.
func (k RunKind) Valid() bool { return k == RunLocal || k == RunRemote }

// RunState is where a run is.
type RunState string

// The run states.
const (
	RunPending  RunState = "pending"  // no reviewer has approved it yet
	RunApproved RunState = "approved" // its actions pass within its limits
	RunDenied   RunState = "denied"   // a reviewer denied it
	RunEnded    RunState = "ended"    // its process exited, or it was ended or revoked
	RunExpired  RunState = "expired"  // its approval or token ran out
)

// Valid reports whether s is one of the states.
func (s RunState) Valid() bool {
	switch s {
	case RunPending, RunApproved, RunDenied, RunEnded, RunExpired:
		return true
	}
	return false
}

// Active reports whether the run may still act or be approved.
func (s RunState) Active() bool { return s == RunPending || s == RunApproved }

// EncodingBase64 marks a stream field holding base64.
const EncodingBase64 = "base64"

// EncodeBytes returns b as a JSON-safe string and its encoding ("" for
// text that is valid UTF-8, "base64" otherwise).
func EncodeBytes(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}

// StartOnRune drops the continuation bytes b starts with, up to a
// character's worth: a cut taken from the middle of text starts on a
// character.
func StartOnRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}

// DecodeBytes reverses EncodeBytes.
func DecodeBytes(s, encoding string) ([]byte, error) {
	if encoding == EncodingBase64 {
		return base64.StdEncoding.DecodeString(s)
	}
	return []byte(s), nil
}

// Success reports whether the action exited with status 0, the only
// success.
func (a *Action) Success() bool {
	return a.Outcome == outcome.Exited && a.ExitCode != nil && *a.ExitCode == 0
}

// StateEvent is the data of an SSE "state" event.
type StateEvent struct {
	State      State  `json:"state"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Kind is "run" or "call" for StateWaitingApproval.
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message,omitempty"`
	// Reason, for StateWaitingApproval, says why the action asks a call
	// approval of its own where a run approval would otherwise cover it
	// (the account's policy escalates its class, or it uses a
	// gateway-held secret); "" when nothing took it out.
	Reason string `json:"reason,omitempty"`
	// ExpiresAt, for StateWaitingApproval, is when the request expires
	// unless a reviewer decides first (the approval timeout).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// ActionID is set on the first event of an action.
	ActionID string `json:"action_id,omitempty"`
}

// OutputEvent is the data of an SSE "stdout" or "stderr" event.
type OutputEvent struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// OutputPage is one page of an action's stored output: GET
// /v1/actions/{id}/output?stream=&offset=&limit=, MCP get_action with
// stream.
type OutputPage struct {
	ActionID string `json:"action_id"`
	Stream   string `json:"stream"`
	// Offset is where Data starts in the stream; Bytes is its length.
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
	// Data is the bytes as text when they are valid UTF-8, else base64
	// (Encoding says so).
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
	// Total is what the command wrote to the stream.
	Total int64 `json:"total"`
	// NextOffset is where the next page starts; absent at the end.
	NextOffset *int64 `json:"next_offset,omitempty"`
	// Skipped counts bytes between this page and NextOffset that the
	// output store does not keep (the middle of a stream over its cap).
	Skipped int64 `json:"skipped,omitempty"`
}

// Error is the error envelope: {"error": {"code": …, "message": …}}.
type Error struct {
	Err ErrorBody `json:"error"`
	// Status is the HTTP status it came with (not sent).
	Status int `json:"-"`
}

// ErrorBody is the inside of the error envelope.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return "airlock: " + e.Err.Code + ": " + e.Err.Message
}

// Error codes. Callers branch on these, never on messages.
const (
	CodeBadRequest      = "bad_request"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeTooLarge        = "request_too_large"
	CodeUnsupportedType = "unsupported_media_type"
	CodeRateLimited     = "rate_limited"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
	// CodeInsufficientStorage: the gateway has no room to keep a file
	// (its transfer spool's budgets, or its disk's free-space floor).
	CodeInsufficientStorage = "insufficient_storage"
)

// StatusOf is the HTTP status that comes with an error code.
func StatusOf(code string) int {
	switch code {
	case CodeBadRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedType:
		return http.StatusUnsupportedMediaType
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInsufficientStorage:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// Run is a run as the API shows it.
type Run struct {
	ID        string     `json:"run_id"`
	State     RunState   `json:"state"`
	Kind      RunKind    `json:"kind"`
	Requester string     `json:"requester"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// TokenExpiresAt is when a remote run's token stops working.
	TokenExpiresAt *time.Time `json:"token_expires_at,omitempty"`
	Anchor         *Process   `json:"anchor,omitempty"`
	// Limits are the targets ("target" or "account@target") the run's
	// actions are held to, by its agent; empty: any.
	Limits []string `json:"limits,omitempty"`
	// EndReason, EndedBy and EndNote say why an ended run ended (and
	// which reviewer ended it, with what note).
	EndReason string `json:"end_reason,omitempty"`
	EndedBy   string `json:"ended_by,omitempty"`
	EndNote   string `json:"end_note,omitempty"`
	Actions   int    `json:"actions"`
	Renewal
	// Token is returned once, by POST /v1/runs.
	Token string `json:"token,omitempty"`
}

// EndReasonText is why a run ended, in words, as airlock runs list and
// the runs page say it: the reason's name, and for the three ways a run's
// approval runs out, which it was — a spent action budget is not an
// expiry. actions is how many actions the run made.
func EndReasonText(reason string, actions int) string {
	switch reason {
	case "max_actions":
		// The budget is spent when the actions reach it.
		return fmt.Sprintf("max_actions: its action budget (%d) is spent", actions)
	case "ttl":
		return "ttl: its approval's time ran out"
	case "token_expired":
		return "token_expired: its run token expired"
	}
	return reason
}

// Agent is an agent token an operator issued: GET /v1/agents, airlock
// agent list. Token is set once, in the answer to POST /v1/agents.
type Agent struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Subject is the requester its runs carry: "agent:NAME/ID".
	Subject string `json:"subject"`
	// Limits are the targets ("target" or "account@target") its runs may
	// act on; empty: any.
	Limits    []string   `json:"limits,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	RevokedBy string     `json:"revoked_by,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// Reloaded is the answer to POST /v1/config/reload: the configuration
// now in force.
type Reloaded struct {
	Path    string `json:"path"`
	SHA256  string `json:"sha256"`
	Targets int    `json:"targets"`
}

// Reviewer is a reviewer account: GET /v1/reviewers, airlock reviewer
// list.
type Reviewer struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	// Source is how it logs in: "password", or "sso" (made at its first
	// single sign-on).
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
}

// ReviewerRequest is the body of POST /v1/reviewers (name and password)
// and POST /v1/reviewers/{name}/password (password). The password never
// leaves the request.
type ReviewerRequest struct {
	Name     string `json:"name,omitempty"`
	Password string `json:"password,omitempty"`
}

// LoginLink is the answer of POST /v1/reviewers/{name}/link: a one-time
// link that logs the reviewer into the pages without a password. It is a
// credential: hand it only to that reviewer.
type LoginLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
	// Lifetime is how long every link works, in words ("15 minutes").
	Lifetime string `json:"lifetime"`
}

// LoginLinkURL is the address of the login link whose token is tok, on
// the reviewer pages at base (scheme://host:port).
func LoginLinkURL(base, tok string) string {
	return base + "/ui/login?link=" + url.QueryEscape(tok)
}

// RenameRequest is the body of POST /v1/reviewers/{name}/rename.
type RenameRequest struct {
	NewName string `json:"new_name"`
}

// AgentRequest is the body of POST /v1/agents.
type AgentRequest struct {
	Name   string   `json:"name"`
	Limits []string `json:"limits,omitempty"`
	TTLS   int64    `json:"ttl_s,omitempty"`
}

// Process describes a local anchor process for reviewers.
type Process struct {
	PID        int       `json:"pid"`
	StartTime  uint64    `json:"start_time"`
	Executable string    `json:"executable"`
	SHA256     string    `json:"sha256"`
	Argv       []string  `json:"argv"`
	Cwd        string    `json:"cwd"`
	UID        int       `json:"uid"`
	User       string    `json:"user"`
	Parents    []Process `json:"parents,omitempty"`
	// Warnings name weak evidence about an anchor: executable_deleted,
	// executable_unknown, executable_writable_by_agent, session_process.
	Warnings []string `json:"warnings,omitempty"`
	// Covers is how many processes the anchor covers now: itself and
	// every process under it (0 once it has exited).
	Covers int `json:"covers,omitempty"`
}

// Approval is a pending or decided approval request, as listed by
// GET /v1/approvals and `airlock approvals list --json`.
type Approval struct {
	ID       string `json:"id"`
	Kind     Mode   `json:"kind"`
	RunID    string `json:"run_id"`
	Target   string `json:"target"`
	Account  string `json:"account"`
	Command  string `json:"command"`
	TimeoutS int    `json:"timeout_s,omitempty"`
	// StdinBytes and StdinSHA256 (hex) describe the action's standard
	// input, StdinText is that input when it is short text; absent for
	// none. AgentReason is what the agent says the action is for: its
	// own claim.
	StdinBytes  int64  `json:"stdin_bytes,omitempty"`
	StdinSHA256 string `json:"stdin_sha256,omitempty"`
	StdinText   string `json:"stdin_text,omitempty"`
	// Secret names the gateway-held secret that is the action's
	// standard input (its value is never shown), "" for none.
	Secret string `json:"secret,omitempty"`
	// Redactions say what of Command was replaced; a reviewer may
	// reveal the original while the request is pending (recorded).
	Redactions []Redaction `json:"redactions,omitempty"`
	// Class is the command's class, ClassReason the parts that decided
	// it; Escalation says why no run approval covers this action.
	Class       string `json:"class,omitempty"`
	ClassReason string `json:"class_reason,omitempty"`
	Escalation  string `json:"escalation,omitempty"`
	// MaxGrantS is the longest grant a reviewer may give on this call
	// request (the account's max_grant), 0 for none (always for an
	// action that uses a gateway-held secret); GrantUntil is the
	// grant given, once approved with one.
	MaxGrantS int `json:"max_grant_s,omitempty"`
	// Transfer is the file transfer the request is for (its direction,
	// path, mode and overwrite; a put's bytes are StdinBytes and
	// StdinSHA256), nil for a command.
	Transfer    *Transfer  `json:"transfer,omitempty"`
	GrantUntil  *time.Time `json:"grant_until,omitempty"`
	AgentReason string     `json:"agent_reason,omitempty"`
	Digest      string     `json:"digest,omitempty"`
	RequestedAt time.Time  `json:"requested_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	Requester   string     `json:"requester"`
	State       string     `json:"state"`
	Run         *Run       `json:"run,omitempty"`
	DecidedBy   string     `json:"decided_by,omitempty"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	Renewal
}

// CancelRequest is the body of POST /v1/actions/{id}/cancel: a reviewer
// stops one action. Reason (at most MaxReason characters) is recorded
// and told to the agent.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// DecisionRequest is the body of POST /v1/approvals/{id}/decision.
type DecisionRequest struct {
	Decision Decision `json:"decision"` // approve or deny
	Reason   string   `json:"reason,omitempty"`
	TTLS     int      `json:"ttl_s,omitempty"`
	// MaxActions limits an approved run's actions; 0 means no limit.
	MaxActions int `json:"max_actions,omitempty"`
	// Digest, if set, must match the request's digest: the decision is
	// bound to what the reviewer saw.
	Digest string `json:"digest,omitempty"`
	// GrantS (call approvals only) lets the same action (same run,
	// target, account, command, timeout and input) pass again for this
	// many seconds without asking, up to the account's max_grant; 0
	// approves it once.
	GrantS int `json:"grant_s,omitempty"`
	// Scope limits an approved run to these targets ("target") or
	// accounts ("target/account"); empty: every run-mode account.
	Scope []string `json:"scope,omitempty"`
}

// Target is one entry of GET /v1/targets. It never carries secrets.
type Target struct {
	Name           string          `json:"name"`
	Address        string          `json:"address"`
	DefaultAccount string          `json:"default_account"`
	HostKeys       []string        `json:"host_key_fingerprints"`
	KnownHostsFile bool            `json:"known_hosts_file"`
	MaxParallel    int             `json:"max_parallel"`
	Accounts       []TargetAccount `json:"accounts"`
	// Via is the jump host (a target) this target is reached through.
	Via string `json:"via,omitempty"`
}

// TargetAccount is one account of a Target.
type TargetAccount struct {
	Name        string `json:"name"`
	Approval    Mode   `json:"approval"`
	MaxTimeoutS int    `json:"max_timeout_s"`
	Output      string `json:"output"`
	Certificate bool   `json:"certificate"`
	// Secrets names the gateway-held secrets the account may be given on
	// standard input (their names only).
	Secrets []string `json:"secrets,omitempty"`
	AccountPolicy
}
