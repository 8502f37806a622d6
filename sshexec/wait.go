package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// outputWatch tells the wait for a command's end how its output is
// going: that bytes arrived, and that both streams ended.
type outputWatch struct {
	progress chan struct{} // one token: bytes arrived since it was taken
	done     chan struct{} // closed when both streams' readers returned
	cleanEnd atomic.Int32  // streams that ended at the server's EOF, the transport intact
	busy     atomic.Int32  // drains inside the Output callback, which may block

	wg sync.WaitGroup
}

func newOutputWatch() *outputWatch {
	return &outputWatch{progress: make(chan struct{}, 1), done: make(chan struct{})}
}

// drain reads one stream into c until its end, noting progress, and
// whether the end was the server's (an EOF while the transport is
// intact) or the connection's.
func (o *outputWatch) drain(wc *watchConn, c *capture, r io.Reader) {
	o.wg.Go(func() {
		err := c.drain(r, o.progress, &o.busy)
		if errors.Is(err, io.EOF) && wc.transportError() == nil {
			o.cleanEnd.Add(1)
		}
	})
}

// start closes done once both streams ended; call it after both drains.
func (o *outputWatch) start(wg *sync.WaitGroup) {
	wg.Go(func() {
		o.wg.Wait()
		close(o.done)
	})
}

// complete says both streams ended at the server's EOF.
func (o *outputWatch) complete() bool { return o.cleanEnd.Load() == 2 }

// waitEnd is what the wait for a command's end saw.
type waitEnd struct {
	// acked: the server answered the exec request; killed: we sent KILL.
	acked, killed bool
	// outputCut: the command reported its end, then the connection broke
	// or stopped answering before its output ended.
	outputCut bool
	// stoppedAfterReport: the deadline or a cancel came after the command
	// reported its end but before its output ended.
	stoppedAfterReport bool
	// heldOpen: the command reported its end, the connection still
	// answers, but the server kept the output open and sent nothing for a
	// grace period (a background process holding it, as with `cmd &`).
	heldOpen bool
}

// await waits for the end of the command the exec request (answered on
// execReply) started. Before the command reports its end, the deadline or
// a cancel sends KILL and waits a grace period for the report. After the
// report it waits for the output to end and the channel to close, as long
// as output keeps arriving (a slow link delivers it well after the
// report) and within the deadline; when nothing arrives for a grace
// period it asks the server whether the connection still answers, so
// that a stalled link is never taken for a complete output.
func (a *action) await(dctx context.Context, wc *watchConn, conn ssh.Conn, ch ssh.Channel, wg *sync.WaitGroup, ex *exitWatcher, out *outputWatch, execReply chan error) (w waitEnd, refused error) {
	var (
		stop     = dctx.Done()
		reported = ex.reported
		drained  = out.done
		// Any bytes from the server, not only whole output packets, show
		// the link is alive: after the report, watchConn.Read leaves a
		// token here.
		link = make(chan struct{}, 1)
		t    = &settle{a: a, wc: wc, conn: conn, wg: wg, ex: ex, out: out, link: link}
	)
	defer wc.watchProgress(nil)
	defer t.stop()
	// after: the command reported its end, and not to our KILL.
	after := func() bool { return isClosed(ex.reported) && !w.killed }
	for {
		select {
		case err := <-execReply:
			execReply = nil
			if errors.Is(err, errExecRefused) {
				return w, err
			}
			w.acked = err == nil
			if w.acked {
				// Stdin, then its end, after the exec reply: sshd drops an
				// EOF that comes before it, and a command reading stdin
				// would wait for the deadline. In its own goroutine: a
				// command that does not read its input, or a stalled
				// transport, must not hold the deadline off.
				wg.Go(func() { a.sendStdin(ch) })
				if a.cfg.Started != nil {
					a.cfg.Started()
				}
			}
		case <-ex.closed:
			// After the report, a channel that closed because the
			// connection broke may have taken output with it.
			w.outputCut = after() && wc.transportError() != nil && !out.complete()
			return w, nil
		case <-drained:
			drained = nil
			if after() && !out.complete() {
				w.outputCut = true
				return w, nil
			}
		case <-link:
			// Bytes on the link, not yet whole output: the link is alive,
			// and an answer to a probe may be queued behind them, so the
			// grace starts again. After an answer (whose own bytes were
			// dropped), they are more output on its way.
			if after() {
				if t.answered {
					t.probe, t.answered = nil, false
				}
				t.arm()
			}
		case <-out.progress:
			if after() {
				// Output still arriving: the link is alive and the grace
				// starts again.
				t.probe, t.answered = nil, false
				t.arm()
			}
		case <-reported:
			if w.killed {
				return w, nil // our KILL is confirmed; don't wait for more
			}
			// RFC 4254 §6.10: the channel should close right after the
			// exit report. Give a server that leaves it open a grace
			// period, not the rest of the deadline.
			reported = nil
			// From here, and not before, bytes on the link count.
			wc.watchProgress(link)
			t.arm()
		case <-stop:
			stop = nil
			if after() {
				// The command ended; its output did not, in time.
				w.stoppedAfterReport = !t.ended()
				return w, nil
			}
			// RFC 4254 §6.9. OpenSSH delivers it to the session's
			// process (not its process group); sshd refuses it for
			// forced-command sessions, which then end unconfirmed.
			w.killed = true
			wg.Go(func() {
				ch.SendRequest("signal", false, ssh.Marshal(struct{ Signal string }{"KILL"}))
			})
			t.arm()
		case err := <-t.probe:
			if t.answer(err, &w) {
				return w, nil
			}
		case <-t.grace:
			if t.expired(&w, after()) {
				return w, nil
			}
		}
	}
}

// settle is the wait's grace timer and its probe of the link.
type settle struct {
	a    *action
	wc   *watchConn
	conn ssh.Conn
	wg   *sync.WaitGroup
	ex   *exitWatcher
	out  *outputWatch
	link chan struct{}

	timer    *time.Timer
	grace    <-chan time.Time
	probe    chan error
	answered bool // the probe was answered; settling before deciding
}

func (t *settle) armFor(d time.Duration) {
	if t.timer == nil {
		t.timer = time.NewTimer(d)
	} else {
		if !t.timer.Stop() {
			select {
			case <-t.timer.C:
			default:
			}
		}
		t.timer.Reset(d)
	}
	t.grace = t.timer.C
}

func (t *settle) arm() { t.armFor(t.a.cfg.killGrace()) }

func (t *settle) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// ended says the output ended, or the channel closed cleanly (what the
// readers have not taken yet is buffered, and theirs).
func (t *settle) ended() bool {
	return t.out.complete() || isClosed(t.ex.closed) && t.wc.transportError() == nil
}

// answer takes the probe's answer; true ends the wait.
func (t *settle) answer(err error, w *waitEnd) bool {
	t.probe = nil
	if err != nil {
		w.outputCut = !t.ended()
		return true
	}
	// Alive. Data the server sent before its answer may still be on its
	// way to the readers: settle briefly, and any output meanwhile starts
	// the wait again. The answer's own bytes left a token on link: drop
	// it.
	select {
	case <-t.link:
	default:
	}
	t.answered = true
	t.armFor(lostGrace)
	return false
}

// expired handles the end of a grace period; after says the command
// reported its end (not to our KILL). True ends the wait.
func (t *settle) expired(w *waitEnd, after bool) bool {
	t.grace = nil
	switch {
	case !after || t.ended():
		// KILL unanswered, or the output ended but the channel was left
		// open.
		return true
	case t.out.busy.Load() > 0:
		// The Output callback holds a reader back (a slow follower):
		// that is not the server's silence.
		t.arm()
		return false
	case t.answered:
		w.heldOpen = true
		return true
	case t.probe != nil:
		w.outputCut = true // the probe went unanswered
		return true
	}
	// Nothing arrived for a grace period and the output has not ended.
	// The server answers a global request only after what it sent before
	// it: an answer means the link is alive.
	p := make(chan error, 1)
	t.probe = p
	t.wg.Go(func() {
		_, _, err := t.conn.SendRequest("keepalive@openssh.com", true, nil)
		p <- err
	})
	t.arm()
	return false
}

// cutDetail says what an action whose output was cut after its command
// reported its end received, and what the report said.
func (a *action) cutDetail(st exitState) string {
	end := fmt.Sprintf("exit status %d", st.code)
	if st.signal != "" {
		end = "signal " + st.signal
	}
	return fmt.Sprintf("the command ended (%s), but its output did not finish arriving: %d bytes of stdout and %d of stderr were received, more may be missing",
		end, a.res.StdoutBytes, a.res.StderrBytes)
}

// afterReport names the outcome of a command that reported its end when
// the wait ended without the output's end; ok is false when w saw no
// such thing.
func (a *action) afterReport(ctx context.Context, w waitEnd, st exitState) (error, bool) {
	switch {
	case w.stoppedAfterReport:
		o := stopped(ctx)
		return a.end(o, Confirmed, fmt.Errorf("%s while the output was still arriving; %s", stopReason(o), a.cutDetail(st))), true
	case w.outputCut:
		return a.end(ConnectionLost, 0, fmt.Errorf("the connection broke or stopped answering; %s", a.cutDetail(st))), true
	case w.heldOpen:
		o, what := Exited, fmt.Sprintf("exited with status %d", st.code)
		if st.signal != "" {
			o, what = Signaled, "the command was ended by signal "+st.signal
		}
		return a.end(o, 0, fmt.Errorf("%s; the server kept the output open after that and sent nothing for %s (a background process holding the command's output does this): output after that point was not collected",
			what, a.cfg.killGrace())), true
	}
	return nil, false
}
