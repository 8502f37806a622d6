package forcedcmd

import (
	"errors"
	"fmt"
	"os/exec"
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
// the supervisor (or sudo).
//
// The supervisor (airlock-action --reap, the child subreaper of every
// process the verb starts) is asked to stop the verb: it kills and reaps
// every process under it, confirms, and exits with a status (never by a
// signal). sudo relays the request to a run_as verb's supervisor. When the
// supervisor does not answer in time it is killed (through sudo's own
// escalation for run_as); then the end is unconfirmed. Either way, what
// was seen of the verb before and whatever is still in its process group
// must be gone for Confirmed.
func (t *verbTree) stop() (err error, term Termination, left []proctree.Proc) {
	seen, complete := t.collect()
	err, term = t.stopSupervised()
	left = t.survivors(seen)
	if len(left) > 0 || !complete {
		term = Unconfirmed
	}
	return err, term, left
}

// stopSupervised asks the verb's supervisor to stop it and waits for it
// (or sudo) to exit: Confirmed only when it exits with a status other
// than ExitUnconfirmed. An exit by a signal means it was killed before it
// could confirm anything.
func (t *verbTree) stopSupervised() (error, Termination) {
	wait := func(d time.Duration) (error, bool) {
		select {
		case err := <-t.done:
			return err, true
		case <-time.After(d):
			return nil, false
		}
	}
	// Asked again every half second: sudo drops a signal that comes
	// before its command exists.
	for deadline := time.Now().Add(reaperWait); time.Now().Before(deadline); {
		syscall.Kill(t.pid, syscall.SIGUSR1)
		if err, ok := wait(500 * time.Millisecond); ok {
			if supervisorConfirmed(err) {
				return err, Confirmed
			}
			return err, Unconfirmed
		}
	}
	if t.runAs {
		// sudo itself (as root) sends HUP and TERM to the supervisor,
		// and KILL 2 s later, on SIGALRM.
		syscall.Kill(t.pid, syscall.SIGALRM)
		if err, ok := wait(sudoWait); ok {
			return err, Unconfirmed
		}
	}
	syscall.Kill(-t.pid, syscall.SIGKILL)
	err, _ := wait(confirmWait)
	return err, Unconfirmed
}

// supervisorConfirmed reports whether the supervisor's (or sudo's) end
// says it confirmed the end of the verb: it exited with a status, and not
// ExitUnconfirmed.
func supervisorConfirmed(err error) bool {
	if err == nil {
		return true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Exited() && ws.ExitStatus() != ExitUnconfirmed
}

// collect returns the verb's processes that /proc shows: the process
// group and every descendant of the supervisor; complete is false when
// /proc could not be read.
func (t *verbTree) collect() (procs []proctree.Proc, complete bool) {
	table, err := proctree.Table()
	if err != nil {
		return nil, false
	}
	var out []proctree.Proc
	for _, p := range t.processes(table) {
		if !p.Exited() {
			out = append(out, p)
		}
	}
	return out, true
}

// processes are the verb's processes in table: its process group, and the
// descendants of its supervisor (or sudo) outside it.
func (t *verbTree) processes(table []proctree.Proc) []proctree.Proc {
	out := proctree.Group(table, t.pid)
	for _, p := range proctree.Descendants(table, t.pid) {
		if p.PGID != t.pid {
			out = append(out, p)
		}
	}
	return out
}

// survivors waits, up to confirmWait, for the processes seen, the whole
// process group and every descendant of the supervisor to be gone; it
// returns those that still run (one of pid -1 when /proc could not be
// read). Those the account may signal are killed again meanwhile.
func (t *verbTree) survivors(seen []proctree.Proc) []proctree.Proc {
	return killUntilGone(confirmWait, func() []proctree.Proc {
		var left []proctree.Proc
		for _, p := range seen {
			if proctree.Running(p) {
				left = append(left, p)
			}
		}
		table, err := proctree.Table()
		if err != nil {
			return append(left, unreadable(err))
		}
		for _, p := range t.processes(table) {
			if !p.Exited() && !contains(left, p.PID) {
				left = append(left, p)
			}
		}
		return left
	})
}

// unreadable stands for the processes that could not be looked at.
func unreadable(err error) proctree.Proc {
	return proctree.Proc{PID: -1, Comm: "unreadable /proc: " + strings.TrimSpace(err.Error()), UID: -1}
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
