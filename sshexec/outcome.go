package sshexec

import "github.com/airlockgw/airlock/sshexec/outcome"

// Outcome is the single terminal result of an action: see package outcome,
// which holds the closed set apart from the SSH client.
type Outcome = outcome.Outcome

// The outcomes, in the contract's order (see package outcome).
const (
	Rejected         = outcome.Rejected
	Denied           = outcome.Denied
	Expired          = outcome.Expired
	AuditUnavailable = outcome.AuditUnavailable
	DialFailed       = outcome.DialFailed
	HandshakeFailed  = outcome.HandshakeFailed
	HostKeyUnknown   = outcome.HostKeyUnknown
	HostKeyMismatch  = outcome.HostKeyMismatch
	HostKeyRevoked   = outcome.HostKeyRevoked
	AuthFailed       = outcome.AuthFailed
	SessionFailed    = outcome.SessionFailed
	Exited           = outcome.Exited
	Signaled         = outcome.Signaled
	ExitMissing      = outcome.ExitMissing
	TimedOut         = outcome.TimedOut
	Cancelled        = outcome.Cancelled
	ConnectionLost   = outcome.ConnectionLost
	Interrupted      = outcome.Interrupted
)

// Outcomes returns every valid outcome in persisted order.
func Outcomes() []Outcome { return outcome.Outcomes() }

// Termination says what became of a command that we tried to stop, or that
// we never started (see package outcome).
type Termination = outcome.Termination

// The termination states.
const (
	NotStarted  = outcome.NotStarted
	Confirmed   = outcome.Confirmed
	Unconfirmed = outcome.Unconfirmed
)

// Terminations returns every valid termination state in persisted order.
func Terminations() []Termination { return outcome.Terminations() }
