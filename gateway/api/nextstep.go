package api

import "fmt"

// NextStep returns what an agent should do after a finished action: retry
// or not, and who must act. airlock-ssh prints it after the outcome and MCP
// tools put it in their text result.
func NextStep(a *Action) string {
	switch a.Outcome {
	case "exited":
		if a.Success() {
			return ""
		}
		return "the command ran and failed; read its output before retrying"
	case "rejected":
		return "fix the request; the same request will be rejected again"
	case "denied":
		if a.Approval.Reason != "" {
			return fmt.Sprintf("the reviewer's reason: %q; do not retry without asking a human", a.Approval.Reason)
		}
		return "do not retry without asking a human"
	case "expired":
		return "no reviewer decided in time; ask a reviewer to watch for the request, then retry"
	case "audit_unavailable":
		if a.StartedAt != nil {
			return "the result could not be recorded and the command may have run; check before retrying; an operator must fix the audit log"
		}
		return "nothing was run because the audit log is unavailable; an operator must fix it; retry later"
	case "dial_failed":
		return "the target did not accept a connection; check that it is up; a retry may work"
	case "handshake_failed":
		return "the SSH handshake with the target failed; an operator should check its sshd; a retry may work if it was transient"
	case "host_key_unknown":
		return "the target's host key is not pinned; an operator must confirm and pin it (airlock hosts pin); do not retry"
	case "host_key_mismatch":
		return "the target presented a different host key; an operator must verify and re-pin the host key; do not retry"
	case "host_key_revoked":
		return "the target's host key is revoked; an operator must act; do not retry"
	case "auth_failed":
		return "the target refused the gateway's credential; an operator must install its authorized_keys line or CA; do not retry"
	case "session_failed":
		return "the target refused the session or the command; nothing ran; an operator should check its sshd or forced-command policy"
	case "signaled":
		return "check its effects before retrying"
	case "exit_missing":
		return "the command ended without an exit status; check its effects before retrying"
	case "timed_out":
		if a.Termination == "confirmed" {
			return "retry with a longer timeout (airlock-ssh --timeout, timeout_s) only if it needs more time"
		}
		return "check the target before retrying: the command may still be running"
	case "cancelled":
		if a.Termination == "not_started" {
			return "cancelled before the command started; nothing ran"
		}
		return "cancelled; the command may have run in part; check before retrying"
	case "connection_lost":
		return "the connection broke and the command may still be running; check before retrying"
	case "interrupted":
		return "the gateway stopped during the action; the command may have run; check before retrying"
	}
	return ""
}
