package forcedcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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

// Reap is airlock-action --reap -- argv…: the supervisor sudo runs for a
// run_as verb, as the verb's user, so that the verb can be stopped whole
// by the account that cannot signal it. It runs argv (an absolute path,
// no shell, the environment sudo gives it) in a process group of its own
// and is the child subreaper (PR_SET_CHILD_SUBREAPER) of everything the
// program starts, so that no process of the verb — not even one that left
// the group with setsid — escapes it.
//
// SIGHUP, SIGINT and SIGTERM are passed on to the program's process
// group. SIGUSR1 (airlock-action stopping the verb, relayed by sudo) and
// the death of its parent (sudo killed) stop the verb: every descendant is
// killed and reaped, for up to reapGrace; if any still runs then, Reap
// names them on stderr and returns ExitUnconfirmed.
//
// When the program ends by itself, what is left in its process group is
// killed, as airlock-action does for a verb without run_as.
func Reap(argv []string, stderr io.Writer) ReapStatus {
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		fmt.Fprintln(stderr, "airlock-action: --reap runs one program by its absolute path: airlock-action --reap -- /usr/bin/PROGRAM [ARGS…]")
		return ReapStatus{Code: ExitRefused}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	parent := os.Getppid()
	if err := errors.Join(
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0),
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGUSR1), 0, 0, 0),
	); err != nil {
		fmt.Fprintf(stderr, "airlock-action: --reap: %v\n", err)
		return ReapStatus{Code: ExitCannotRun}
	}
	stopping := os.Getppid() != parent // sudo ended before the prctl
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if stopping {
		fmt.Fprintln(stderr, "airlock-action: --reap: its parent ended before the program started; nothing ran")
		return ReapStatus{Code: ExitCannotRun}
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
		case s := <-sigs:
			if s != syscall.SIGUSR1 {
				syscall.Kill(-pgid, s.(syscall.Signal))
				continue
			}
			stopping = true
			syscall.Kill(-pgid, syscall.SIGKILL)
			killDescendants()
		}
	}
	if !stopping {
		syscall.Kill(-pgid, syscall.SIGKILL)
		reapChildren()
		return statusOf(cmd.ProcessState)
	}
	if left := confirmReaped(); len(left) > 0 {
		fmt.Fprintf(stderr, "airlock-action: --reap: the verb was stopped but its end is unconfirmed: %s\n", leftSentence(describeLeft(left)))
		return ReapStatus{Code: ExitUnconfirmed}
	}
	return statusOf(cmd.ProcessState)
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
			return []proctree.Proc{{PID: -1, Comm: "unreadable /proc: " + strings.TrimSpace(err.Error()), UID: -1}}
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
