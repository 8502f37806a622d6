package main

import (
	"errors"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/proctree"
)

// becomeSubreaper makes this process the child subreaper
// (PR_SET_CHILD_SUBREAPER, prctl(2)) of everything it starts: a process
// whose parent exits — a double fork, a daemon that left its process
// group with setsid — comes to it instead of to init, and so stays its
// descendant (and the run's anchor's) until it is ended.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// terminal returns a descriptor of this process's controlling terminal
// (standard input, output or error, the first that is it) and whether this
// process's group is its foreground group: the command's group must then
// take its place, or it would be stopped (SIGTTIN) when it reads it.
func terminal() (fd int, foreground, ok bool) {
	for fd := 0; fd <= 2; fd++ {
		if pgrp, err := foregroundOf(fd); err == nil {
			return fd, pgrp == unix.Getpgrp(), true
		}
	}
	return 0, false, false
}

// foregroundOf is the foreground group of the terminal at fd (tcgetpgrp).
func foregroundOf(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }

// setForeground makes pgid the foreground group of the terminal at fd
// (tcsetpgrp). SIGTTOU, which a process of a background group gets for
// it, is blocked meanwhile on this thread only: ignoring it instead would
// pass SIG_IGN on to the command (tcsetpgrp(3)).
func setForeground(fd, pgid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	set.Val[(syscall.SIGTTOU-1)/64] |= 1 << ((uint(syscall.SIGTTOU) - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgid)
}

// Values of siginfo's si_code for SIGCHLD (<signal.h>, the kernel's ABI).
const (
	cldTrapped = 4
	cldStopped = 5
)

// waitChange waits until child pid exits (it is left to be reaped: its
// pid, which names its process group, stays its own) or stops; a stop is
// consumed, so that the next call waits for the next change.
func waitChange(pid int) (stopped bool, err error) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || (info.Code != cldStopped && info.Code != cldTrapped) {
			return false, err
		}
		unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED, nil)
		return true, nil
	}
}

// stopSelf stops this process (SIGSTOP) as the shell's job: it returns
// when the job is continued (fg, bg).
func stopSelf() { syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

// leftBehind returns the processes the command left running: those in
// its process group pgid and every descendant of this process, except
// the command's own (pid) and those that already ended.
func leftBehind(pgid, pid int) ([]proctree.Proc, error) {
	table, err := proctree.Table()
	if err != nil {
		return nil, err
	}
	var out []proctree.Proc
	seen := map[int]bool{pid: true}
	for _, p := range append(proctree.Group(table, pgid), proctree.Descendants(table, os.Getpid())...) {
		if !seen[p.PID] && !p.Exited() {
			seen[p.PID] = true
			out = append(out, p)
		}
	}
	return out, nil
}
