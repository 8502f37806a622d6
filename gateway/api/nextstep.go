package api

import (
	"fmt"

	"github.com/airlockgw/airlock/sshexec/outcome"
)

// NextStepInfo is what an agent should do after a finished action that did
// not succeed, as data: the action object's next_step.
type NextStepInfo struct {
	// Retry is "no" (the same request fails again, or must not be
	// repeated), "yes" (a retry may work, now or later) or "after_check"
	// (the command may have run: look at its effects first).
	Retry string `json:"retry"`
	// Who must act before anything changes: "agent", "reviewer" or
	// "operator".
	Who string `json:"who"`
	// Text says it in words, as airlock-ssh prints it.
	Text string `json:"text"`
}

// The values of NextStepInfo.Retry and Who.
const (
	RetryNo         = "no"
	RetryYes        = "yes"
	RetryAfterCheck = "after_check"

	WhoAgent    = "agent"
	WhoReviewer = "reviewer"
	WhoOperator = "operator"
)

// NextStepOf returns what an agent should do after a finished action:
// retry or not, and who must act; nil after a success or while in flight.
func NextStepOf(a *Action) *NextStepInfo {
	step := func(retry, who, text string) *NextStepInfo { return &NextStepInfo{retry, who, text} }
	switch a.Outcome {
	case outcome.Exited:
		switch {
		case a.Success():
			return nil
		case a.Transfer != nil:
			return step(RetryAfterCheck, WhoAgent, "the transfer failed: its detail says why; check the file on the target before retrying")
		}
		return step(RetryAfterCheck, WhoAgent, "the command ran and failed; read its output before retrying")
	case outcome.Rejected:
		if a.NextStep != nil {
			// The gateway said what to do: a refused run, not a wrong request.
			return a.NextStep
		}
		return step(RetryNo, WhoAgent, "fix the request; the same request will be rejected again")
	case outcome.Denied:
		if a.Approval.Reason != "" {
			return step(RetryNo, WhoReviewer, fmt.Sprintf("the reviewer's reason: %q; do not retry without asking a human", a.Approval.Reason))
		}
		return step(RetryNo, WhoReviewer, "do not retry without asking a human")
	case outcome.Expired:
		return step(RetryYes, WhoReviewer, "ask a reviewer to watch for the request, then retry")
	case outcome.AuditUnavailable:
		if a.StartedAt != nil {
			return step(RetryAfterCheck, WhoOperator, "check the target before retrying; an operator must fix the audit log")
		}
		return step(RetryYes, WhoOperator, "an operator must fix the audit log; retry later")
	case outcome.DialFailed:
		return step(RetryYes, WhoOperator, "the target did not accept a connection; check that it is up; a retry may work")
	case outcome.HandshakeFailed:
		return step(RetryYes, WhoOperator, "the SSH handshake with the target failed; an operator should check its sshd; a retry may work if it was transient")
	case outcome.HostKeyUnknown:
		return step(RetryNo, WhoOperator, "the target's host key is not pinned; an operator must confirm and pin it (airlock hosts pin); do not retry")
	case outcome.HostKeyMismatch:
		return step(RetryNo, WhoOperator, "the target presented a different host key; an operator must verify and re-pin the host key; do not retry")
	case outcome.HostKeyRevoked:
		return step(RetryNo, WhoOperator, "the target's host key is revoked; an operator must act; do not retry")
	case outcome.AuthFailed:
		return step(RetryNo, WhoOperator, "the target refused the gateway's credential; an operator must install its authorized_keys line or CA; do not retry")
	case outcome.SessionFailed:
		return step(RetryNo, WhoOperator, "the target refused the session or the command; nothing ran; an operator should check its sshd or forced-command policy")
	case outcome.Signaled:
		return step(RetryAfterCheck, WhoAgent, "check its effects before retrying")
	case outcome.ExitMissing:
		return step(RetryAfterCheck, WhoAgent, "the command ended without an exit status; check its effects before retrying")
	case outcome.TimedOut:
		return timedOutStep(a)
	case outcome.Cancelled:
		if a.Termination == outcome.NotStarted {
			return step(RetryYes, WhoAgent, "nothing ran; a retry may work")
		}
		return step(RetryAfterCheck, WhoAgent, "the command may have run in part; check before retrying")
	case outcome.ConnectionLost:
		return step(RetryAfterCheck, WhoAgent, "check the target before retrying")
	case outcome.Interrupted:
		return step(RetryAfterCheck, WhoAgent, "check the target before retrying")
	}
	return nil
}

// timedOutStep is the next step after timed_out. A deadline that passed
// before the command started (waiting for a connection slot) ran
// nothing. Once it started, a kill, confirmed or not, may have cut it
// anywhere: a migration, an upgrade or a copy may be half done. The
// action object does not say which client asked (airlock-ssh's --timeout,
// the API's or MCP's timeout_s), so the text names neither.
func timedOutStep(a *Action) *NextStepInfo {
	if a.Termination == outcome.NotStarted {
		return &NextStepInfo{RetryYes, WhoAgent, "nothing ran: the deadline passed before the command started; a retry may work"}
	}
	had := "its timeout"
	if a.TimeoutS > 0 {
		had = fmt.Sprintf("its timeout of %ds", a.TimeoutS)
	}
	end := "it was killed and its end is not confirmed: it may still be running"
	if a.Termination == outcome.Confirmed {
		end = "it was killed and its end confirmed"
	}
	return &NextStepInfo{RetryAfterCheck, WhoAgent, "the command did not finish within " + had + "; " + end +
		"; it may have run in part: check its effects on the target before retrying, and ask for a longer timeout only if it needs more time"}
}

// NextStep is the text of the action's next step: a.NextStep as the
// gateway sent it (which knows why the engine stopped an action), else
// NextStepOf(a); "" after a success. airlock-ssh prints it after the
// outcome and MCP tools put it in their text result.
func NextStep(a *Action) string {
	if a.NextStep != nil {
		return a.NextStep.Text
	}
	if s := NextStepOf(a); s != nil {
		return s.Text
	}
	return ""
}
