package engine

import (
	"encoding/json"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// The gateway's audit records: one struct per entry kind it writes, its
// field names spelled once, in the tags (see auditchain.FieldsOf). What
// writes an entry builds one of these; what reads one back decodes into
// the same type.

// record is an audit record of a known kind.
type record interface {
	kind() auditchain.Kind
}

// gatewayStarted is gateway.started.
type gatewayStarted struct {
	PID     int64  `audit:"pid"`
	Host    string `audit:"host"`
	Version string `audit:"version"`
}

// gatewayStopped is gateway.stopped.
type gatewayStopped struct {
	PID int64 `audit:"pid"`
}

// configLoaded is config.loaded: which configuration (by digest) was in
// force from this entry on.
type configLoaded struct {
	Path    string `audit:"path"`
	SHA256  string `audit:"sha256"`
	Targets int64  `audit:"targets"`
}

// actionRequested is action.requested: the request as it arrived, and who
// sent it over which transport.
type actionRequested struct {
	Target    string `audit:"target"`
	Account   string `audit:"account"`
	Command   string `audit:"command"`
	TimeoutS  int64  `audit:"timeout_s"`
	Transport string `audit:"transport"` // "socket" or "http"
	// PeerPID and PeerUID are the kernel's word on a local caller.
	PeerPID *int64 `audit:"peer_pid"`
	PeerUID *int64 `audit:"peer_uid"`
	// RemoteAddr is an HTTP caller's address.
	RemoteAddr string `audit:"remote_addr,omitempty"`
	// StdinBytes and StdinSHA256 describe the standard input; absent for
	// none. Its bytes go to the output store once it is approved (see
	// actionConnecting.Stdin).
	StdinBytes  *int64    `audit:"stdin_bytes"`
	StdinSHA256 *[32]byte `audit:"stdin_sha256"`
	// Reason is what the agent said the action is for.
	Reason string `audit:"reason,omitempty"`
	// Secret is the gateway-held secret asked for as standard input, and
	// SecretGrant the grant of its block that allowed it ("target/account"
	// or "target"); never its value, nor a hash of it.
	Secret      string `audit:"secret,omitempty"`
	SecretGrant string `audit:"secret_grant,omitempty"`
	// Redactions say what of Command was replaced as a credential (a JSON
	// array of rule, offset and length in the original), and CommandHMAC
	// is HMAC-SHA256 of the original under the gateway's command key: who
	// holds the original can prove it is the command (`airlock audit
	// check-command`), the log never holds it.
	Redactions  jsonList[approvals.Redaction] `audit:"redactions,omitempty"`
	CommandHMAC *[32]byte                     `audit:"command_hmac"`
	// Class is the command's class (gateway/classify), ClassReason the
	// parts that decided it, and Escalation why no run approval covers it
	// (the account's policy), when none does.
	Class       string `audit:"class,omitempty"`
	ClassReason string `audit:"class_reason,omitempty"`
	Escalation  string `audit:"escalation,omitempty"`
	// Unreviewed is set when the account's policy lets the command's
	// class pass with no reviewer (allow_unreviewed).
	Unreviewed bool `audit:"unreviewed,omitempty"`
	// OPA is what the external policy engine answered, when it was asked.
	OPA *opaFacts `audit:"opa"`
	// Transfer is the file transfer the action asks for, instead of a
	// command.
	Transfer *transferFacts `audit:"transfer"`
}

// transferFacts describe a file transfer: direction (put, get), remote
// path, and for a put its mode, whether it may replace a file, and the
// size and SHA-256 of the bytes (the digest binds them: domain
// airlock/action/v4+transfer).
type transferFacts struct {
	Direction string    `audit:"direction"`
	Path      string    `audit:"path"`
	Mode      string    `audit:"mode,omitempty"`
	Overwrite bool      `audit:"overwrite,omitempty"`
	Size      *int64    `audit:"size"`
	SHA256    *[32]byte `audit:"sha256"`
}

// transferDone is what a transfer moved, in action.finished: the bytes
// and their SHA-256 (all of the file when complete), whether a put
// published the file (or replaced one), and the temporary file a failed
// put left.
type transferDone struct {
	Bytes     int64    `audit:"bytes"`
	SHA256    [32]byte `audit:"sha256"`
	Complete  bool     `audit:"complete"`
	Published bool     `audit:"published,omitempty"`
	Replaced  bool     `audit:"replaced,omitempty"`
	Leftover  string   `audit:"leftover,omitempty"`
}

// opaFacts are an OPA decision: "allow", "deny" or "error" (no usable
// answer; Error says why, FailClosed whether that refused the action),
// with the policy's rule, reason and decision id.
type opaFacts struct {
	Decision   string `audit:"decision"`
	Rule       string `audit:"rule,omitempty"`
	Reason     string `audit:"reason,omitempty"`
	DecisionID string `audit:"decision_id,omitempty"`
	Error      string `audit:"error,omitempty"`
	FailClosed bool   `audit:"fail_closed,omitempty"`
}

// jsonList is a list stored in one field as a JSON array (the audit log
// has no lists of groups).
type jsonList[T any] []T

func (l jsonList[T]) MarshalText() ([]byte, error) { return json.Marshal([]T(l)) }

func (l *jsonList[T]) UnmarshalText(b []byte) error { return json.Unmarshal(b, (*[]T)(l)) }

// actionConnecting is action.connecting, the durable intent written
// before anything is dialed.
type actionConnecting struct {
	Address    string `audit:"address"`
	Account    string `audit:"account"`
	Credential string `audit:"credential"`
	// Cert describes a per-action certificate (ca = true credentials).
	Cert *certIssued `audit:"cert"`
	// Stdin is the standard input about to be sent, in the output store.
	Stdin *auditchain.Blob `audit:"stdin"`
	// Secret is the gateway-held secret about to be written to the
	// command's standard input (its value is not stored anywhere).
	Secret string `audit:"secret,omitempty"`
	// Via is the way to a target behind jump hosts, the first dialed
	// first: "account@target address" each, separated by ", ".
	Via string `audit:"via,omitempty"`
}

// certIssued is a per-action certificate: its key ID names the action,
// its serial is the action.requested entry.
type certIssued struct {
	KeyID       string    `audit:"key_id"`
	Serial      uint64    `audit:"serial"`
	ValidBefore time.Time `audit:"valid_before"`
}

// actionFinished is action.finished: the one outcome of an action and
// every fact known about it.
type actionFinished struct {
	Outcome     sshexec.Outcome     `audit:"outcome"`
	Detail      string              `audit:"detail"`
	Termination sshexec.Termination `audit:"termination,omitempty"`
	// Approval is under which approval it ran or was refused.
	Approval *approvalFacts `audit:",inline"`
	// DecidedBy and ApprovalReason are the reviewer's, when one decided.
	DecidedBy      string `audit:"decided_by,omitempty"`
	ApprovalReason string `audit:"approval_reason,omitempty"`
	// Stdout and Stderr are the output store's blobs, when stored.
	Stdout *auditchain.Blob `audit:"stdout"`
	Stderr *auditchain.Blob `audit:"stderr"`
	// StdoutTail and StderrTail are the end of a stream longer than the
	// store's cap (the last 64 KiB), stored beside its head.
	StdoutTail *auditchain.Blob `audit:"stdout_tail"`
	StderrTail *auditchain.Blob `audit:"stderr_tail"`
	// StdoutSpill and StderrSpill are what was kept past the store's cap
	// (output "full"), and what was not (see spillFacts).
	StdoutSpill *spillFacts `audit:"stdout_spill"`
	StderrSpill *spillFacts `audit:"stderr_spill"`
	// Result is what the connection and the command did, when one was
	// attempted.
	Result *connResult `audit:",inline"`
	// RecordedLate marks an outcome the audit log first refused.
	RecordedLate bool `audit:"recorded_late,omitempty"`
	// Transfer is what a file transfer moved.
	Transfer *transferDone `audit:"transfer"`
	// OutputPolicy is the account's output policy when the output was
	// stored: what the agent may read of it, later too.
	OutputPolicy config.OutputPolicy `audit:"output_policy,omitempty"`
	// SecretReplacements counts the occurrences of a delivered secret's
	// value replaced in the output before it was stored.
	SecretReplacements *int64 `audit:"secret_replacements"`
	// Stopped says who or what cancelled the action before its end: a
	// reviewer, or its run's end.
	Stopped *stopFacts `audit:"stopped"`
}

// stopFacts say why the gateway cancelled an action (see stopCause).
type stopFacts struct {
	// Why is "reviewer" (a reviewer cancelled this action) or
	// "run_ended" (its run ended: RunEnd says how).
	Why    string              `audit:"why"`
	By     string              `audit:"by,omitempty"`
	Reason *string             `audit:"reason"`
	RunEnd approvals.EndReason `audit:"run_end,omitempty"`
}

// approvalFacts name the approval an action ran under.
type approvalFacts struct {
	ID   string   `audit:"approval_id"`
	Mode api.Mode `audit:"approval_mode"`
	// GrantUntil is set when the approval's grant covered a repeat of
	// the action it approved: until when it does.
	GrantUntil time.Time `audit:"grant_until,omitempty"`
}

// connResult is what sshexec reported, outputs aside.
type connResult struct {
	StdoutReceived     int64  `audit:"stdout_received"`
	StderrReceived     int64  `audit:"stderr_received"`
	HostKeyType        string `audit:"host_key_type"`
	HostKeyFingerprint string `audit:"host_key_fingerprint"`
	ServerVersion      string `audit:"server_version"`
	DialUS             int64  `audit:"dial_us"`
	HandshakeUS        int64  `audit:"handshake_us"`
	AuthUS             int64  `audit:"auth_us"`
	SessionUS          int64  `audit:"session_us"`
	CommandUS          int64  `audit:"command_us"`
	TotalUS            int64  `audit:"total_us"`
	ExitCode           *int64 `audit:"exit_code"`
	Signal             string `audit:"signal,omitempty"`
	CoreDumped         *bool  `audit:"core_dumped"`
	// Hop is where an action behind jump hosts failed before its command
	// started; ViaHops are the facts of each jump host reached.
	Hop     string                      `audit:"hop,omitempty"`
	ViaHops jsonList[sshexec.HopResult] `audit:"via_hops,omitempty"`
}

// resultOf turns sshexec's result into its audit facts.
func resultOf(r *sshexec.Result) *connResult {
	c := &connResult{
		StdoutReceived: r.StdoutBytes, StderrReceived: r.StderrBytes,
		HostKeyType: r.HostKeyType, HostKeyFingerprint: r.HostKeyFingerprint, ServerVersion: r.ServerVersion,
		DialUS: r.Timings.Dial.Microseconds(), HandshakeUS: r.Timings.Handshake.Microseconds(),
		AuthUS: r.Timings.Auth.Microseconds(), SessionUS: r.Timings.Session.Microseconds(),
		CommandUS: r.Timings.Command.Microseconds(), TotalUS: r.Timings.Total.Microseconds(),
		Hop: r.Hop, ViaHops: r.Via,
	}
	if r.HasExitCode {
		code := int64(r.ExitCode)
		c.ExitCode = &code
	}
	if r.Signal != "" {
		c.Signal, c.CoreDumped = r.Signal, &r.CoreDumped
	}
	return c
}

// runEvent is every run.* and approval.* entry: the approvals store's
// events, recorded before they take effect.
type runEvent struct {
	RunState  approvals.RunState `audit:"run_state"`
	Requester string             `audit:"requester"`
	// Anchor is the anchor process, on run.created of a local run.
	Anchor *anchorFacts `audit:"anchor"`
	// ExpiresAt and MaxActions are a run approval's limits, on
	// run.approved.
	ExpiresAt  time.Time `audit:"expires_at,omitempty"`
	MaxActions *int64    `audit:"max_actions"`
	// EndReason is why a run ended, on run.ended; EndedBy and EndNote
	// when a reviewer ended it.
	EndReason approvals.EndReason `audit:"end_reason,omitempty"`
	EndedBy   string              `audit:"ended_by,omitempty"`
	EndNote   *string             `audit:"end_note"`
	// Request is the approval request an approval.* entry is about.
	Request *requestFacts `audit:",inline"`
	// AgentID is the agent token a remote run was created with, on
	// run.created; Limits that agent's limits.
	AgentID approvals.AgentID `audit:"agent_id,omitempty"`
	Limits  string            `audit:"limits,omitempty"`
	// Renews is the run a renewal renews, on its run.created and the
	// approval.requested entries of its requests.
	Renews approvals.RunID `audit:"renews,omitempty"`
}

// agentEvent is agent.added or agent.revoked: an agent token an operator
// issued or revoked. The token itself is never recorded.
type agentEvent struct {
	AgentID   approvals.AgentID `audit:"agent_id"`
	Name      string            `audit:"name"`
	Limits    string            `audit:"limits,omitempty"`
	ExpiresAt time.Time         `audit:"expires_at,omitempty"`
	RevokedBy string            `audit:"revoked_by,omitempty"`
}

// reviewerEvent is reviewer.added, .disabled, .enabled, .removed or
// .password_changed: an operator's change to a reviewer account. No
// password or hash is ever recorded.
type reviewerEvent struct {
	Name string `audit:"name"`
	By   string `audit:"by"`
	// Offline: made while no gateway ran, recorded at the next start
	// (the entry's time is then the start's, not the change's).
	Offline bool `audit:"offline,omitempty"`
	// NewName: a renamed account's name from now on.
	NewName string `audit:"new_name,omitempty"`
	// Subject: the identity at the provider of an account single sign-on
	// made ("ISSUER SUBJECT").
	Subject string `audit:"subject,omitempty"`
}

// anchorFacts describe a local run's anchor process.
type anchorFacts struct {
	PID       int64  `audit:"pid"`
	StartTime uint64 `audit:"start_time"`
	Exe       string `audit:"exe"`
	ExeSHA256 string `audit:"exe_sha256"`
	UID       int64  `audit:"uid"`
	Cwd       string `audit:"cwd"`
	Argv      string `audit:"argv"` // each argument quoted
}

// requestFacts describe an approval request.
type requestFacts struct {
	ID        approvals.RequestID `audit:"approval_id"`
	Kind      approvals.Kind      `audit:"approval_kind"`
	Status    approvals.Status    `audit:"status"`
	Target    string              `audit:"target"`
	Account   string              `audit:"account"`
	Command   string              `audit:"command"`
	TimeoutS  int64               `audit:"timeout_s"`
	Digest    approvals.Digest    `audit:"digest"`
	DecidedBy string              `audit:"decided_by,omitempty"`
	Reason    *string             `audit:"reason"`
	// StdinBytes and StdinSHA256 are the standard input the digest binds
	// (digest domain airlock/action/v2+stdin), absent for none.
	StdinBytes  *int64    `audit:"stdin_bytes"`
	StdinSHA256 *[32]byte `audit:"stdin_sha256"`
	// Secret is the gateway-held secret the digest binds by name
	// (domain airlock/action/v3+secret).
	Secret string `audit:"secret,omitempty"`
	// Redacted marks a command stored redacted (its action.requested
	// entry says what was replaced); the digest binds the original.
	Redacted bool `audit:"command_redacted,omitempty"`
	// Class and Escalation are the action's (see actionRequested).
	Class      string `audit:"class,omitempty"`
	Escalation string `audit:"escalation,omitempty"`
	// GrantUntil is until when an approved call's exact action may pass
	// again (a reviewer's grant).
	GrantUntil time.Time `audit:"grant_until,omitempty"`
}

// commandRevealed is command.revealed: a reviewer read the original of a
// pending request's redacted command (via names the front end).
type commandRevealed struct {
	Reviewer   string              `audit:"reviewer"`
	Via        string              `audit:"via"`
	ApprovalID approvals.RequestID `audit:"approval_id"`
}

// outputRead is output.read: a reviewer read an action's output, through
// the pages (via "web": everything stored), the API (via "api": what the
// account's policy returns) or its event stream (via "api-events": as it
// comes; nothing is stored yet, so there are no digests or sizes).
type outputRead struct {
	Reviewer     string    `audit:"reviewer"`
	Via          string    `audit:"via"`
	StdoutSHA256 *[32]byte `audit:"stdout_sha256"`
	StderrSHA256 *[32]byte `audit:"stderr_sha256"`
	StdoutStored *int64    `audit:"stdout_stored"`
	StderrStored *int64    `audit:"stderr_stored"`
}

// authFailed is auth.failed: the first failed credential of a key in the
// limiter's window, and the one that blocks it.
type authFailed struct {
	Credential string `audit:"credential"`
	Subject    string `audit:"subject"`
	Failures   int64  `audit:"failures"`
	Blocked    bool   `audit:"blocked"`
	// Suppressed counts the failures held back since the last entry: the
	// log takes a bounded number a window (see authFailedLimit).
	Suppressed int64 `audit:"suppressed,omitempty"`
}

// tokenRotated is token.rotated.
type tokenRotated struct {
	ConnectionsCut int64 `audit:"connections_cut"`
}

func (gatewayStarted) kind() auditchain.Kind   { return auditchain.KindGatewayStarted }
func (gatewayStopped) kind() auditchain.Kind   { return auditchain.KindGatewayStopped }
func (configLoaded) kind() auditchain.Kind     { return auditchain.KindConfigLoaded }
func (actionRequested) kind() auditchain.Kind  { return auditchain.KindActionRequested }
func (actionConnecting) kind() auditchain.Kind { return auditchain.KindActionConnecting }
func (actionFinished) kind() auditchain.Kind   { return auditchain.KindActionFinished }
func (outputRead) kind() auditchain.Kind       { return auditchain.KindOutputRead }
func (commandRevealed) kind() auditchain.Kind  { return auditchain.KindCommandRevealed }
func (authFailed) kind() auditchain.Kind       { return auditchain.KindAuthFailed }
func (tokenRotated) kind() auditchain.Kind     { return auditchain.KindTokenRotated }
func (linkIssued) kind() auditchain.Kind       { return auditchain.KindReviewerLinkIssued }

// linkIssued is reviewer.link_issued: a one-time login link was made for
// reviewer Name, asked for by By, working until ExpiresAt. The link's
// token is never recorded.
type linkIssued struct {
	Name      string    `audit:"name"`
	By        string    `audit:"by"`
	ExpiresAt time.Time `audit:"expires_at"`
}

// held says where the output f of action id names is, for the policy p,
// its spill files in spills; nil when f names none.
func (f *actionFinished) held(id string, p config.OutputPolicy, spills *spillDir) *heldOutput {
	if f.Stdout == nil || f.Stderr == nil {
		return nil
	}
	ref := func(head, tail *auditchain.Blob, received int64, spill *spillFacts, s sshexec.Stream) streamRef {
		r := streamRef{head: head.Digest, total: max(received, head.Size), spill: spill}
		if tail != nil {
			d := tail.Digest
			r.tail = &d
		}
		if spill != nil && spill.Bytes > 0 {
			r.spillPath = spills.path(spillName(id, s))
		}
		return r
	}
	var outN, errN int64
	if f.Result != nil {
		outN, errN = f.Result.StdoutReceived, f.Result.StderrReceived
	}
	return &heldOutput{stdout: ref(f.Stdout, f.StdoutTail, outN, f.StdoutSpill, sshexec.Stdout),
		stderr: ref(f.Stderr, f.StderrTail, errN, f.StderrSpill, sshexec.Stderr), policy: p}
}
