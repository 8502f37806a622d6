// Package outcome holds the closed sets an action ends in: its Outcome and,
// for a command that was stopped, its Termination. They live apart from
// package sshexec, which names them too (as aliases), so that a small
// program that only reads results (airlock-ssh starts once per action) does
// not link an SSH client.
package outcome

import "fmt"

// Outcome is the single terminal result of an action. The set is closed and
// its names are persisted in the audit log: append new values at the end,
// never reorder, never rename.
//
// sshexec itself produces the connection and command outcomes (DialFailed
// through ConnectionLost); the gateway produces the others (Rejected,
// Denied, Expired, AuditUnavailable, Interrupted).
type Outcome uint8

// The outcomes, in the contract's order. Append only, never reorder.
const (
	// invalidOutcome is the zero value; it is never a valid result.
	invalidOutcome Outcome = iota

	Rejected         // request malformed or not allowed by configuration
	Denied           // a reviewer denied the run or the call
	Expired          // no reviewer decision before the approval deadline
	AuditUnavailable // the intent (or result) could not be made durable
	DialFailed       // TCP connect failed or timed out
	HandshakeFailed  // version or key exchange failed, not because of the host key
	HostKeyUnknown   // the server's host key is not pinned for this target
	HostKeyMismatch  // the server presented a different key than pinned
	HostKeyRevoked   // the key is marked @revoked
	AuthFailed       // the server refused our credential
	SessionFailed    // the server refused the session channel or the exec request
	Exited           // the command ran and sent an exit status
	Signaled         // the command was ended by a signal we did not send
	ExitMissing      // the channel closed cleanly without exit status or signal
	TimedOut         // the action deadline passed after exec started
	Cancelled        // the caller went away or cancelled
	ConnectionLost   // the transport broke after exec started; remote state unknown
	Interrupted      // the gateway stopped while the action was in flight

	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	invalidOutcome:   "",
	Rejected:         "rejected",
	Denied:           "denied",
	Expired:          "expired",
	AuditUnavailable: "audit_unavailable",
	DialFailed:       "dial_failed",
	HandshakeFailed:  "handshake_failed",
	HostKeyUnknown:   "host_key_unknown",
	HostKeyMismatch:  "host_key_mismatch",
	HostKeyRevoked:   "host_key_revoked",
	AuthFailed:       "auth_failed",
	SessionFailed:    "session_failed",
	Exited:           "exited",
	Signaled:         "signaled",
	ExitMissing:      "exit_missing",
	TimedOut:         "timed_out",
	Cancelled:        "cancelled",
	ConnectionLost:   "connection_lost",
	Interrupted:      "interrupted",
}

// Outcomes returns every valid outcome in persisted order.
func Outcomes() []Outcome {
	out := make([]Outcome, 0, numOutcomes-1)
	for o := Rejected; o < numOutcomes; o++ {
		out = append(out, o)
	}
	return out
}

// Valid reports whether o is one of the named outcomes.
func (o Outcome) Valid() bool { return o > invalidOutcome && o < numOutcomes }

// String returns the persisted name, or "Outcome(N)" for an invalid value.
func (o Outcome) String() string {
	if !o.Valid() {
		return fmt.Sprintf("Outcome(%d)", uint8(o))
	}
	return outcomeNames[o]
}

// MarshalText returns the persisted name; it fails for an invalid value so
// that a zero Outcome can never be written as if it were a result.
func (o Outcome) MarshalText() ([]byte, error) {
	if !o.Valid() {
		return nil, fmt.Errorf("invalid outcome %d", uint8(o))
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText parses a persisted name.
func (o *Outcome) UnmarshalText(b []byte) error {
	v, err := ParseOutcome(string(b))
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// ParseOutcome returns the outcome with the given persisted name and rejects
// every other string.
func ParseOutcome(s string) (Outcome, error) {
	for o := Rejected; o < numOutcomes; o++ {
		if outcomeNames[o] == s {
			return o, nil
		}
	}
	return invalidOutcome, fmt.Errorf("unknown outcome %q", s)
}

// Termination says what became of a command that we tried to stop, or that
// we never started. Persisted: append only, never reorder.
type Termination uint8

// The termination states.
const (
	invalidTermination Termination = iota
	// NotStarted: no exec request was sent, so nothing needs stopping.
	NotStarted
	// Confirmed: after our signal KILL the server reported exit-status or
	// exit-signal, so the command is known to have ended.
	Confirmed
	// Unconfirmed: we asked the command to stop but no exit report came
	// back before we closed the connection; it may still be running.
	Unconfirmed

	numTerminations
)

var terminationNames = [numTerminations]string{
	NotStarted:  "not_started",
	Confirmed:   "confirmed",
	Unconfirmed: "unconfirmed",
}

// Terminations returns every valid termination state in persisted order.
func Terminations() []Termination {
	out := make([]Termination, 0, numTerminations-1)
	for t := NotStarted; t < numTerminations; t++ {
		out = append(out, t)
	}
	return out
}

// Valid reports whether t is one of the named termination states.
func (t Termination) Valid() bool { return t > invalidTermination && t < numTerminations }

// String returns the persisted name, or "" for the zero value (no
// termination applies).
func (t Termination) String() string {
	if t == invalidTermination {
		return ""
	}
	if !t.Valid() {
		return fmt.Sprintf("Termination(%d)", uint8(t))
	}
	return terminationNames[t]
}

// MarshalText returns the persisted name; it fails for invalid values.
func (t Termination) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid termination %d", uint8(t))
	}
	return []byte(terminationNames[t]), nil
}

// UnmarshalText parses a persisted name.
func (t *Termination) UnmarshalText(b []byte) error {
	v, err := ParseTermination(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseTermination returns the termination state with the given name.
func ParseTermination(s string) (Termination, error) {
	for t := NotStarted; t < numTerminations; t++ {
		if terminationNames[t] == s {
			return t, nil
		}
	}
	return invalidTermination, fmt.Errorf("unknown termination %q", s)
}
