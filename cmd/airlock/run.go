package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/gateway/api"
)

func init() {
	commands["run"] = command{summary: "start a command as the anchor of a new run (run -- CMD...)", run: runRun}
}

// runGrace is how long the processes of a run's command get between
// SIGTERM and SIGKILL when the run ends (docs/agents.md).
const runGrace = 5 * time.Second

// killWait bounds the wait for processes sent SIGKILL to be gone.
const killWait = 2 * time.Second

// revokePoll is how often airlock run asks the gateway whether a reviewer
// ended its run (docs/approvals.md).
const revokePoll = 2 * time.Second

// runRun registers this process as the anchor of a new run, then runs CMD
// as its child, in a process group of its own: CMD and everything it
// starts act within that run, and the run ends when this process does.
// When CMD exits, what it left running is ended (unless --keep-children);
// when a reviewer ends the run, CMD and all it started are ended.
func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock run", "airlock run [--config FILE] [--keep-children] [--] CMD [ARGS...]", stderr)
	cfgPath := configFlag(fs)
	keep := fs.Bool("keep-children", false, "leave running what CMD started (daemons) when CMD exits; by default it is ended with CMD")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return failf(stderr, "give the command to run: airlock run -- CMD [ARGS...]")
	}
	socket, err := localSocket(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	c, err := localClient(socket) // the socket also goes to CMD
	if err != nil {
		return failf(stderr, "%v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var run api.Run
	if err := c.Do(ctx, http.MethodPost, "/v1/runs", struct{}{}, &run); err != nil {
		return failf(stderr, "registering the run: %v", err)
	}
	fmt.Fprintf(stderr, "airlock: run %s started for %s (a reviewer approves it at its first action)\n", run.ID, argv[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+socket, "AIRLOCK_RUN_ID="+run.ID)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	a, err := startAgent(cmd, !*keep)
	if err != nil {
		c.EndRun(ctx, run.ID)
		return failf(stderr, "%v", err)
	}
	revoked, watching := watchRevoked(ctx, c, run.ID)
	ended := false
wait:
	for {
		select {
		case <-a.exited:
			break wait
		case s := <-sigs:
			syscall.Kill(-a.pgid, s.(syscall.Signal))
		case <-chld:
			proctree.ReapOrphans(a.pid)
		case <-revoked:
			revoked, ended = nil, true
			fmt.Fprintf(stderr, "airlock: run %s was ended by a reviewer; ending %s and what it started\n", run.ID, argv[0])
			a.end(stderr, true)
		}
	}
	a.takeTerminal()
	cancel()
	<-watching
	if err := c.EndRun(context.Background(), run.ID); err != nil && !runEnded(err) {
		fmt.Fprintf(stderr, "airlock: ending run %s: %v (it ends anyway now that this process exits)\n", run.ID, err)
	}
	if !*keep && !ended {
		a.end(stderr, false)
	}
	return exitStatus(cmd.Wait(), stderr)
}

// exitStatus is airlock run's exit status for CMD's end: its own, or
// 128+N when signal N ended it.
func exitStatus(err error, stderr io.Writer) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return failf(stderr, "%v", err)
}

// watchRevoked asks the gateway every revokePoll whether a reviewer ended
// run id, or the run that renews it, until ctx ends: revoked is closed when one did, done when it
// stopped asking. The run's own end (this process exiting) needs no
// asking. A gateway that cannot be reached ends nothing: only its answer
// that the run was revoked does.
func watchRevoked(ctx context.Context, c *api.Client, id string) (revoked, done <-chan struct{}) {
	rc, dc := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(dc)
		t := time.NewTicker(revokePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var run api.Run
			err := c.Do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &run)
			if err == nil && run.RenewedBy != "" {
				// Its approval ran out and a renewal goes on: watch that.
				id = run.RenewedBy
				continue
			}
			// A revoked run is no longer its anchor's to read (not
			// found); a denied or expired one reads as it is, and its
			// agent may go on without the gateway.
			if (err == nil && run.State == api.RunEnded && run.EndReason == "revoked") || runEnded(err) {
				close(rc)
				return
			}
		}
	}()
	return rc, dc
}

// agentProc is a run's command, started in a process group of its own.
type agentProc struct {
	cmd       *exec.Cmd
	pid, pgid int
	// tty is the controlling terminal's descriptor (-1: none).
	tty int
	// exited is closed when the command has exited (not yet reaped).
	exited chan struct{}
}

// startAgent starts cmd as the leader of a new process group; with
// subreaper, this process first becomes the child subreaper of all it
// starts. When this process is in the foreground of its terminal, the
// command's group takes the terminal (as a shell gives it a job); with a
// terminal, this process passes the command's stops on to the shell
// (Ctrl-Z, SIGTTIN) as its own.
func startAgent(cmd *exec.Cmd, subreaper bool) (*agentProc, error) {
	if subreaper {
		if err := becomeSubreaper(); err != nil {
			return nil, fmt.Errorf("cannot become the subreaper of the command's processes: %w (run with --keep-children to do without)", err)
		}
	}
	a := &agentProc{cmd: cmd, tty: -1, exited: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if fd, fg, ok := terminal(); ok {
		a.tty = fd
		if fg {
			cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, fd
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a.pid, a.pgid = cmd.Process.Pid, cmd.Process.Pid
	go a.follow()
	return a, nil
}

// follow waits for the command to exit, and passes its stops to the
// shell: the terminal comes back here, this process stops; when the
// shell continues it, the command's group gets the terminal back (if
// this process has it: fg) and is continued.
func (a *agentProc) follow() {
	defer close(a.exited)
	for {
		stopped, err := waitChange(a.pid)
		if err != nil || !stopped {
			return
		}
		if a.tty < 0 {
			continue // no job control to pass on
		}
		a.takeTerminal()
		stopSelf()
		if pgrp, err := foregroundOf(a.tty); err == nil && pgrp == syscall.Getpgrp() {
			setForeground(a.tty, a.pgid)
		}
		syscall.Kill(-a.pgid, syscall.SIGCONT)
	}
}

// takeTerminal makes this process's group the terminal's foreground group
// again, if the command's group has it.
func (a *agentProc) takeTerminal() {
	if a.tty < 0 {
		return
	}
	if pgrp, err := foregroundOf(a.tty); err == nil && pgrp == a.pgid {
		setForeground(a.tty, syscall.Getpgrp())
	}
}

// end ends the command's processes: SIGTERM (and SIGCONT, for stopped
// ones) to its process group and to every process this one is an
// ancestor of; after runGrace, SIGKILL to those still running. With
// withAgent the command itself is one of them (a revoked run); else it
// has exited, and only what it left behind is ended. Those that could
// not be ended are named on stderr.
func (a *agentProc) end(stderr io.Writer, withAgent bool) {
	look := func() []proctree.Proc {
		proctree.ReapOrphans(a.pid)
		left, err := leftBehind(a.pgid, a.pid)
		if err != nil {
			fmt.Fprintf(stderr, "airlock: cannot see the processes the command left: %v\n", err)
			return nil
		}
		if withAgent && proctree.Alive(a.pid) {
			left = append(left, proctree.Proc{PID: a.pid, Comm: a.cmd.Path})
		}
		return left
	}
	left := look()
	if len(left) == 0 {
		return
	}
	if !withAgent {
		fmt.Fprintf(stderr, "airlock: ending %d process(es) the command left running (airlock run --keep-children leaves them)\n", len(left))
	}
	signalAll(a.pgid, left, syscall.SIGTERM)
	signalAll(a.pgid, left, syscall.SIGCONT)
	if left = until(runGrace, look); len(left) == 0 {
		return
	}
	signalAll(a.pgid, left, syscall.SIGKILL)
	if left = until(killWait, look); len(left) > 0 {
		fmt.Fprintf(stderr, "airlock: %d process(es) of the run still run after SIGKILL; first: %s\n", len(left), left[0])
	}
}

// signalAll sends sig to process group pgid and to each of procs.
func signalAll(pgid int, procs []proctree.Proc, sig syscall.Signal) {
	syscall.Kill(-pgid, sig)
	for _, p := range procs {
		syscall.Kill(p.PID, sig)
	}
}

// until calls look until it returns nothing, for up to d, and returns
// what it returned last.
func until(d time.Duration, look func() []proctree.Proc) []proctree.Proc {
	deadline := time.Now().Add(d)
	pause := 5 * time.Millisecond
	for {
		left := look()
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
