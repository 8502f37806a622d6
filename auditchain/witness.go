package auditchain

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// runWitness hands each signed checkpoint to the witness command, one at a
// time and bounded by WitnessTimeout. When the witness is slower than the
// log, only the newest note waits; a later checkpoint is consistent with
// (and so vouches for) every earlier one.
func (l *Log) runWitness() {
	defer close(l.witnessDone)
	for msg := range l.witness {
		var out bytes.Buffer
		err := l.witnessOnce(msg, &limitedBuffer{buf: &out, max: 4096})
		if err != nil {
			l.log.Error("witness command failed: the signed checkpoint was not kept elsewhere; run the command by hand with a note on its standard input to see why",
				"command", l.opts.WitnessCommand, "error", err, "output", out.String())
		} else {
			l.log.Debug("witness accepted checkpoint", "command", l.opts.WitnessCommand[0])
		}
		if l.opts.OnWitness != nil {
			l.opts.OnWitness(err)
		}
	}
}

// witnessOnce runs the witness command once with msg on its standard
// input. The command leads a process group of its own, and the whole
// group is killed when the command exits or WitnessTimeout passes,
// whichever comes first: a witness cannot leave processes behind (a
// background child, one holding its output open) that outlive its bound.
// A process that moves itself out of the group (setsid) is not followed.
func (l *Log) witnessOnce(msg []byte, out *limitedBuffer) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.WitnessTimeout)
	defer cancel()
	cmd := exec.Command(l.opts.WitnessCommand[0], l.opts.WitnessCommand[1:]...)
	cmd.Stdin = bytes.NewReader(msg)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	pgid := cmd.Process.Pid
	// The leader is reaped only by cmd.Wait below: until then its pid,
	// which names the group, cannot be another process's.
	exited := make(chan error, 1)
	go func() { exited <- waitExited(pgid) }()
	timedOut := false
	select {
	case <-exited:
		exited = nil
	case <-ctx.Done():
		timedOut = true
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // what it left in its group goes with it
	err := cmd.Wait()
	if exited != nil {
		<-exited // the leader was killed: its waiter returns
	}
	if timedOut && err == nil {
		err = ctx.Err()
	}
	return err
}

// waitExited waits, without reaping it, until child pid has exited.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// limitedBuffer keeps the first max bytes written and discards the rest,
// so a chatty witness cannot grow the gateway's memory.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
