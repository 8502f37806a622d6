package forcedcmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
)

// Termination says whether a verb that airlock-action stopped (its
// timeout passed, the client went away) is known to have ended. The names
// are part of the log format, as the gateway's termination states.
type Termination uint8

// The termination states.
const (
	// NotStopped: airlock-action did not stop the verb; it ended by
	// itself (or could not start).
	NotStopped Termination = iota
	// Confirmed: every process of the verb that could be seen is gone.
	Confirmed
	// Unconfirmed: processes of the verb still ran when airlock-action
	// stopped waiting for them (Record.Left names them), or the run_as
	// supervisor could not confirm the end of the verb's processes.
	Unconfirmed
)

func (t Termination) String() string {
	switch t {
	case NotStopped:
		return ""
	case Confirmed:
		return "confirmed"
	case Unconfirmed:
		return "unconfirmed"
	}
	return fmt.Sprintf("Termination(%d)", uint8(t))
}

// How long stopping a verb may take before airlock-action gives up on
// confirming its end. A run_as verb is stopped by its supervisor, as the
// verb's user: first asked (SIGUSR1, relayed by sudo), then through sudo's
// own escalation (SIGALRM: HUP, TERM, 2 s, KILL).
const (
	confirmWait = 2 * time.Second
	reaperWait  = reapGrace + 2*time.Second
	sudoWait    = 2*time.Second + 3*time.Second
)

// maxLeftLogged bounds how many surviving processes a log line names.
const maxLeftLogged = 8

// verbTree is the processes of one running verb: its program (or sudo,
// for run_as) at pid, which leads process group pid.
type verbTree struct {
	pid   int
	runAs bool
	done  <-chan error // the program's (or sudo's) Wait
}

// stop ends every process of the verb and reports whether their end is
// confirmed and which processes are left. It returns the Wait error of
// the program (or sudo).
//
// The processes of a verb that runs as the account itself are frozen
// (SIGSTOP) while they are collected — the process group and every
// descendant, so that none can fork out of sight — and then killed.
// The account cannot signal a run_as verb's processes: it asks the
// verb's supervisor (airlock-action --reap, running as the verb's user
// under sudo) to stop them, falls back on sudo's own escalation, and
// kills sudo only when both fail. Either way, what was collected before
// and whatever is still in the group must be gone for Confirmed.
func (t *verbTree) stop() (err error, term Termination, left []proctree.Proc) {
	var seen []proctree.Proc
	if t.runAs {
		seen = t.collect(false)
		err, term = t.stopSupervised()
	} else {
		syscall.Kill(-t.pid, syscall.SIGSTOP)
		seen = t.collect(true)
		syscall.Kill(-t.pid, syscall.SIGKILL)
		for _, p := range seen {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		err, term = <-t.done, Confirmed
	}
	left = t.survivors(seen)
	if len(left) > 0 {
		term = Unconfirmed
	}
	return err, term, left
}

// stopSupervised asks a run_as verb's supervisor to stop it and waits for
// sudo to exit; Unconfirmed when the supervisor says it could not confirm
// the end, or had to be killed.
func (t *verbTree) stopSupervised() (error, Termination) {
	wait := func(d time.Duration) (error, bool) {
		select {
		case err := <-t.done:
			return err, true
		case <-time.After(d):
			return nil, false
		}
	}
	// sudo relays SIGUSR1 to the supervisor, which kills the verb's
	// processes as their user, confirms and exits. Asked again every
	// half second: sudo drops a signal that comes before its command
	// exists.
	for deadline := time.Now().Add(reaperWait); time.Now().Before(deadline); {
		syscall.Kill(t.pid, syscall.SIGUSR1)
		if err, ok := wait(500 * time.Millisecond); ok {
			if supervisorUnsure(err) {
				return err, Unconfirmed
			}
			return err, Confirmed
		}
	}
	// sudo itself (as root) sends HUP and TERM to the supervisor, and
	// KILL 2 s later, on SIGALRM.
	syscall.Kill(t.pid, syscall.SIGALRM)
	if err, ok := wait(sudoWait); ok {
		return err, Unconfirmed
	}
	syscall.Kill(-t.pid, syscall.SIGKILL)
	return <-t.done, Unconfirmed
}

// supervisorUnsure reports whether sudo's exit says the supervisor could
// not confirm the end of the verb (it exits ExitUnconfirmed then).
func supervisorUnsure(err error) bool {
	var ee interface{ ExitCode() int }
	return errors.As(err, &ee) && ee.ExitCode() == ExitUnconfirmed
}

// collect returns the verb's processes that /proc shows: the process
// group and every descendant of pid. When freeze is set it stops each one
// it finds and looks again, until a look finds nothing new, so that a
// process forked meanwhile is collected too.
func (t *verbTree) collect(freeze bool) []proctree.Proc {
	seen := map[int]proctree.Proc{}
	var order []proctree.Proc
	for range 16 {
		table, err := proctree.Table()
		if err != nil {
			break
		}
		fresh := false
		for _, p := range append(proctree.Group(table, t.pid), proctree.Descendants(table, t.pid)...) {
			if _, ok := seen[p.PID]; ok || p.Exited() {
				continue
			}
			seen[p.PID], fresh = p, true
			order = append(order, p)
			if freeze {
				syscall.Kill(p.PID, syscall.SIGSTOP)
			}
		}
		if !fresh || !freeze {
			break
		}
	}
	return order
}

// survivors waits, up to confirmWait, for the processes seen and the
// whole process group to be gone; it returns those that still run. Those
// the account may signal are killed again meanwhile.
func (t *verbTree) survivors(seen []proctree.Proc) []proctree.Proc {
	return killUntilGone(confirmWait, func() []proctree.Proc {
		var left []proctree.Proc
		for _, p := range seen {
			if proctree.Running(p) {
				left = append(left, p)
			}
		}
		if table, err := proctree.Table(); err == nil {
			for _, p := range proctree.Group(table, t.pid) {
				if !p.Exited() && !contains(left, p.PID) {
					left = append(left, p)
				}
			}
		}
		return left
	})
}

// killUntilGone sends SIGKILL to what look returns until it returns
// nothing, for up to wait, and returns what it returned last. A pid of
// -1 (look could not look) is never signalled.
func killUntilGone(wait time.Duration, look func() []proctree.Proc) []proctree.Proc {
	deadline := time.Now().Add(wait)
	for {
		left := look()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		for _, p := range left {
			if p.PID > 0 {
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(ps []proctree.Proc, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// describeLeft names the first processes of left for a log line or a
// message: "812 ("sleep", uid 0), …".
func describeLeft(left []proctree.Proc) []string {
	var out []string
	for i, p := range left {
		if i == maxLeftLogged {
			out = append(out, "and "+strconv.Itoa(len(left)-i)+" more")
			break
		}
		out = append(out, p.String())
	}
	return out
}

// leftSentence is describeLeft as one clause.
func leftSentence(left []string) string {
	if len(left) == 0 {
		return "the supervisor could not confirm that every process ended"
	}
	return "still running: " + strings.Join(left, ", ")
}
