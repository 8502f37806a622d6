package sshexec

import (
	"fmt"
	"time"
)

// Result is what one action did. Run fills in every fact it learned, also
// when the action failed: a refused host key still has a fingerprint, a
// timed-out command still has its partial output.
type Result struct {
	// Outcome is the action's single terminal outcome.
	Outcome Outcome
	// Detail says in one line what happened, for people; never branch on
	// it.
	Detail string

	// ExitCode is the command's exit status (0–255) when Outcome is
	// Exited, or when a timed-out or cancelled command reported one after
	// our KILL. Meaningless otherwise; see HasExitCode.
	ExitCode    int
	HasExitCode bool
	// Signal is the signal name without "SIG" ("TERM", "KILL") when the
	// server reported exit-signal: for Signaled, or after our KILL.
	Signal string
	// CoreDumped is the server's core-dumped flag of an exit-signal.
	CoreDumped bool
	// Termination is set for TimedOut and Cancelled (Confirmed or
	// Unconfirmed), and is NotStarted for outcomes in which no exec
	// request was sent.
	Termination Termination

	// HostKeyType and HostKeyFingerprint ("SHA256:…") describe the key
	// the server offered, whether or not it was trusted. Empty when the
	// handshake never got that far.
	HostKeyType        string
	HostKeyFingerprint string
	// ServerVersion is the server's identification string
	// ("SSH-2.0-OpenSSH_9.2p1 …"), when one was received.
	ServerVersion string

	// Hop names where an action behind jump hosts (Config.Via) failed
	// before its command started: a jump host's name, or the target's
	// (Config.Name). Empty without jump hosts, and once the command ran.
	Hop string
	// Via are the facts of each jump host reached, in order.
	Via []HopResult

	// Stdout and Stderr hold at most Config.OutputLimit bytes each, from
	// the start of the stream. StdoutBytes and StderrBytes count every
	// byte received; the Truncated flags say bytes were dropped.
	Stdout, Stderr                   []byte
	StdoutBytes, StderrBytes         int64
	StdoutTruncated, StderrTruncated bool
	// StdoutTail and StderrTail hold the last Config.TailLimit bytes of a
	// stream that Stdout or Stderr holds only the start of; nil when the
	// head holds it all (or TailLimit is not set).
	StdoutTail, StderrTail []byte

	// Transfer is what a Put or Get moved; nil for a command.
	Transfer *Transfer

	// Timings of each phase.
	Timings Timings
}

// HopResult is what one jump host showed of itself.
type HopResult struct {
	Name               string `json:"name"`
	Addr               string `json:"address"`
	HostKeyType        string `json:"host_key_type,omitempty"`
	HostKeyFingerprint string `json:"host_key_fingerprint,omitempty"`
	ServerVersion      string `json:"server_version,omitempty"`
}

// Success reports whether the command ran and exited with status 0, the
// only outcome that counts as success.
func (r *Result) Success() bool {
	return r.Outcome == Exited && r.HasExitCode && r.ExitCode == 0
}

// Timings are the durations of an action's phases; a phase that did not
// happen is zero.
type Timings struct {
	// Dial is the TCP connect.
	Dial time.Duration
	// Handshake is version exchange and key exchange, up to the host key
	// check.
	Handshake time.Duration
	// Auth is from the host key check to the end of authentication.
	Auth time.Duration
	// Session is opening the session channel.
	Session time.Duration
	// Command is from sending exec to the end of the command (or to the
	// end of our wait after KILL).
	Command time.Duration
	// Total is the whole of Run.
	Total time.Duration
}

// Error is the error Run returns whenever the command did not run to an end
// the server reported: every outcome but Exited, Signaled and ExitMissing.
// Branch on Outcome (or on the Result's Outcome), never on the text.
type Error struct {
	Outcome Outcome
	// Err is the underlying cause, when there is one. For host key
	// outcomes it is a *HostKeyError.
	Err error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("SSH action: %s", e.Outcome)
	}
	return fmt.Sprintf("SSH action: %s: %s", e.Outcome, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
