package api

import (
	"fmt"

	"github.com/airlockgw/airlock/sshexec"
)

// NextStep returns what an agent should do after a finished action: retry
// or not, and who must act. airlock-ssh prints it after the outcome and MCP
// tools put it in their text result.
func NextStep(a *Action) string {
	switch a.Outcome {
	case sshexec.Exited:
		if a.Success() {
			return ""
		}
		return "the command ran and failed; read its output before retrying"
	case sshexec.Rejected:
		return "fix the request; the same request will be rejected again"
	case sshexec.Denied:
		if a.Approval.Reason != "" {
			return fmt.Sprintf("the reviewer's reason: %q; do not retry without asking a human", a.Approval.Reason)
		}
		return "do not retry without asking a human"
	case sshexec.Expired:
		return "no reviewer decided in time; ask a reviewer to watch for the request, then retry"
	case sshexec.AuditUnavailable:
		if a.StartedAt != nil {
			return "the result could not be recorded and the command may have run; check before retrying; an operator must fix the audit log"
		}
		return "nothing was run because the audit log is unavailable; an operator must fix it; retry later"
	case sshexec.DialFailed:
		return "the target did not accept a connection; check that it is up; a retry may work"
	case sshexec.HandshakeFailed:
		return "the SSH handshake with the target failed; an operator should check its sshd; a retry may work if it was transient"
	case sshexec.HostKeyUnknown:
		return "the target's host key is not pinned; an operator must confirm and pin it (airlock hosts pin); do not retry"
	case sshexec.HostKeyMismatch:
		return "the target presented a different host key; an operator must verify and re-pin the host key; do not retry"
	case sshexec.HostKeyRevoked:
		return "the target's host key is revoked; an operator must act; do not retry"
	case sshexec.AuthFailed:
		return "the target refused the gateway's credential; an operator must install its authorized_keys line or CA; do not retry"
	case sshexec.SessionFailed:
		return "the target refused the session or the command; nothing ran; an operator should check its sshd or forced-command policy"
	case sshexec.Signaled:
		return "check its effects before retrying"
	case sshexec.ExitMissing:
		return "the command ended without an exit status; check its effects before retrying"
	case sshexec.TimedOut:
		if a.Termination == sshexec.Confirmed {
			return "retry with a longer timeout (airlock-ssh --timeout, timeout_s) only if it needs more time"
		}
		return "check the target before retrying: the command may still be running"
	case sshexec.Cancelled:
		if a.Termination == sshexec.NotStarted {
			return "cancelled before the command started; nothing ran"
		}
		return "cancelled; the command may have run in part; check before retrying"
	case sshexec.ConnectionLost:
		return "the connection broke and the command may still be running; check before retrying"
	case sshexec.Interrupted:
		return "the gateway stopped during the action; the command may have run; check before retrying"
	}
	return ""
}
