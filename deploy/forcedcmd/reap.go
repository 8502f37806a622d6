package forcedcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/proctree"
)

// reapGrace is how long the supervisor keeps killing the verb's
// processes before it gives up on confirming their end.
const reapGrace = 3 * time.Second

// ReapStatus is how the supervisor ends: with Code, or — when the
// program died of a signal and its end is confirmed — by the same
// Signal, so that sudo and airlock-action see what the program saw.
type ReapStatus struct {
	Code   int
	Signal syscall.Signal
}

// Reap is airlock-action --reap -- argv…: the supervisor of every verb,
// which sudo runs as the verb's user for a run_as verb, so that the verb
// can be stopped whole, also by an account that cannot signal it. It runs argv (an absolute path,
// no shell, the environment sudo gives it with the fixed non-interactive
// set on top, withBatchEnv) in a process group of its own
// and is the child subreaper (PR_SET_CHILD_SUBREAPER) of everything the
// program starts, so that no process of the verb — not even one that left
// the group with setsid — escapes it.
//
// SIGHUP, SIGINT and SIGTERM are passed on to the program's process
// group. SIGUSR1 (airlock-action stopping the verb, relayed by sudo for
// run_as) and the death of its parent stop the verb: the program's group
// is killed. However the program ends, every process left under the
// supervisor is then killed and reaped, for up to reapGrace; if any still
// runs then, Reap names them on stderr and returns ExitUnconfirmed. A
// stopped verb's status is always a code (128+N for signal N): only an
// unstopped program's death by a signal is passed on as that signal.
//
// With readOnly (airlock-action --reap --read-only, which only Serve
// runs, for a request marked read-only) it first confines what it starts:
// every mount read-only, no_new_privs; when it cannot, it starts nothing
// and returns ExitRefused.
func Reap(argv []string, readOnly bool, stderr io.Writer) ReapStatus {
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		fmt.Fprintln(stderr, "airlock-action: --reap runs one program by its absolute path: airlock-action --reap -- /usr/bin/PROGRAM [ARGS…]")
		return ReapStatus{Code: ExitRefused}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	// Orphans of the verb come here and are reaped as they end, so that
	// a long verb that forks much does not pile up zombies.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	parent := os.Getppid()
	if parent == 1 {
		fmt.Fprintln(stderr, "airlock-action: --reap: its parent (sudo) had ended before it started; nothing ran")
		return ReapStatus{Code: ExitCannotRun}
	}
	if err := errors.Join(
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0),
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGUSR1), 0, 0, 0),
	); err != nil {
		fmt.Fprintf(stderr, "airlock-action: --reap: %v\n", err)
		return ReapStatus{Code: ExitCannotRun}
	}
	stopping := os.Getppid() != parent // sudo ended before the prctl
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Env: withBatchEnv(os.Environ()), // sudo's env_reset dropped it for run_as
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if stopping {
		fmt.Fprintln(stderr, "airlock-action: --reap: its parent ended before the program started; nothing ran")
		return ReapStatus{Code: ExitCannotRun}
	}
	if readOnly {
		if told, err := enterReadOnly(); err != nil {
			if !told { // else airlock-action says it
				fmt.Fprintf(stderr, "airlock-action: --reap: read-only enforcement failed, so nothing ran: %s\n", oneLine(err))
			}
			return ReapStatus{Code: ExitRefused}
		}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "airlock-action: cannot run: %s\n", oneLine(err))
		return ReapStatus{Code: ExitCannotRun}
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-chld:
			proctree.ReapOrphans(pgid)
		case s := <-sigs:
			if s != syscall.SIGUSR1 {
				syscall.Kill(-pgid, s.(syscall.Signal))
				continue
			}
			stopping = true
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	// A stop asked for as the program ended is still a stop.
	for drained := false; !drained && !stopping; {
		select {
		case s := <-sigs:
			stopping = s == syscall.SIGUSR1
		default:
			drained = true
		}
	}
	// Whatever the program left behind goes with it, in its group or
	// not: a verb's work ends when its program does.
	syscall.Kill(-pgid, syscall.SIGKILL)
	killDescendants()
	if left := confirmReaped(); len(left) > 0 {
		fmt.Fprintf(stderr, "airlock-action: --reap: the verb's end is unconfirmed: %s\n", leftSentence(describeLeft(left)))
		return ReapStatus{Code: ExitUnconfirmed}
	}
	st := statusOf(cmd.ProcessState)
	if stopping {
		// A stopped verb ends with a status, never by a signal: that
		// is how airlock-action tells this confirmed end from the
		// supervisor's being killed.
		st.Signal = 0
	}
	return st
}

// statusOf is the program's end as a ReapStatus.
func statusOf(ps *os.ProcessState) ReapStatus {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return ReapStatus{Code: exitSignalBase + int(ws.Signal()), Signal: ws.Signal()}
	}
	return ReapStatus{Code: ws.ExitStatus()}
}

// killDescendants sends SIGKILL to every process under this one.
func killDescendants() {
	table, err := proctree.Table()
	if err != nil {
		return
	}
	for _, p := range proctree.Descendants(table, os.Getpid()) {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// reapChildren collects the exit status of every child that has ended
// (orphans of the verb come to the subreaper).
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// confirmReaped kills and reaps the processes under this one until none
// is left, for up to reapGrace, and returns those still running then.
func confirmReaped() []proctree.Proc {
	return killUntilGone(reapGrace, func() []proctree.Proc {
		reapChildren()
		table, err := proctree.Table()
		if err != nil {
			return []proctree.Proc{unreadable(err)}
		}
		var left []proctree.Proc
		for _, p := range proctree.Descendants(table, os.Getpid()) {
			if !p.Exited() {
				left = append(left, p)
			}
		}
		return left
	})
}

// ReapMain is the whole of airlock-action --reap: args are what follows
// --reap. It returns the exit status, or ends the process by the signal
// that killed the program.
func ReapMain(args []string, stderr io.Writer) int {
	readOnly := len(args) > 0 && args[0] == readOnlyFlag
	if readOnly {
		args = args[1:]
	}
	if len(args) == 0 || args[0] != "--" {
		fmt.Fprintln(stderr, "airlock-action: usage: airlock-action --reap -- /usr/bin/PROGRAM [ARGS…]")
		return 2
	}
	st := Reap(args[1:], readOnly, stderr)
	if st.Signal != 0 {
		raise(st.Signal)
	}
	return st.Code
}

// raise ends this process by sig, with the signal's default action. The
// Go runtime keeps its own handler for the signals it uses (SIGABRT,
// SIGSEGV, SIGQUIT…) even after signal.Reset, and would print a crash
// report and exit 2 instead: the default action is set in the kernel
// directly. If the process survives (a signal whose default is to be
// ignored), the caller exits 128+N.
func raise(sig syscall.Signal) {
	signal.Reset(sig)
	runtime.LockOSThread()
	// struct sigaction with every field zero: SIG_DFL, no flags, an
	// empty mask (four words hold it on every Linux layout).
	var act [4]uint64
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	var set unix.Sigset_t
	set.Val[(sig-1)/64] = 1 << ((uint(sig) - 1) % 64)
	unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
	time.Sleep(time.Second) // the signal ends the process; one ignored by default does not
}
