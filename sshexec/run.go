package sshexec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/pprof"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Run runs command on cfg.Addr as cfg.User over one new SSH connection and
// closes the connection before it returns.
//
// If cfg cannot be used, Run returns a nil Result and an error wrapping
// ErrInvalidConfig; nothing is dialed. Otherwise the Result is never nil and
// its Outcome is set. The error is nil when the command ran to an end the
// server reported (Exited with any code, Signaled, ExitMissing) and an
// *Error carrying the outcome otherwise.
//
// The command string is sent as it is in one "exec" request (RFC 4254
// §6.5); how it is interpreted is up to the server (OpenSSH passes it to the
// account's shell with -c). Nothing is sent on the command's stdin, which is
// closed at once.
func Run(ctx context.Context, cfg *Config, command string) (*Result, error) {
	return start(ctx, cfg, command, nil)
}

// onTarget is what an action does on the target's authenticated
// connection: run a command (action.session), or transfer a file.
type onTarget func(a *action, ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, stopCut func() bool, cut *links) error

// start runs one action: the route dialed, then do (nil: command) on the
// target.
func start(ctx context.Context, cfg *Config, command string, do onTarget) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	route := make([]*hop, 0, len(cfg.Via)+1)
	for _, h := range cfg.Via {
		p, err := prepareHop(h, true)
		if err != nil {
			return nil, err
		}
		route = append(route, p)
	}
	target, err := prepareHop(Hop{Name: cmp.Or(cfg.Name, cfg.Addr), Addr: cfg.Addr, User: cfg.User, Signers: cfg.Signers, HostKeys: cfg.HostKeys}, false)
	if err != nil {
		return nil, err
	}
	route = append(route, target)

	a := &action{cfg: cfg, command: command, start: time.Now(), res: &Result{}, route: route, do: do}
	if a.do == nil {
		a.do = (*action).session
	}
	dctx, cancel := context.WithDeadline(ctx, a.start.Add(cfg.timeout()))
	defer cancel()
	err = a.run(ctx, dctx)
	a.res.Timings.Total = time.Since(a.start)
	return a.res, err
}

// hop is one SSH server of an action's route, ready to connect to: a jump
// host, or the target last.
type hop struct {
	name, addr, user string
	signers          []ssh.Signer
	hk               *hostKeyChecker
	jump             bool
}

func prepareHop(h Hop, jump bool) (*hop, error) {
	what := ""
	if jump {
		what = fmt.Sprintf("jump host %s: ", h.Name)
	}
	p := &hop{name: h.Name, addr: h.Addr, user: h.User, jump: jump, signers: make([]ssh.Signer, len(h.Signers))}
	for i, s := range h.Signers {
		ss, err := strongSigner(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %ssigner %d: %v", ErrInvalidConfig, what, i, err)
		}
		p.signers[i] = ss
	}
	hk, err := newHostKeyChecker(h.Addr, h.HostKeys)
	if err != nil {
		return nil, fmt.Errorf("%w: %s%v", ErrInvalidConfig, what, err)
	}
	p.hk = hk
	return p, nil
}

// action is the state of one Run.
type action struct {
	cfg     *Config
	command string
	start   time.Time
	res     *Result
	route   []*hop
	do      onTarget
}

// end sets the outcome and returns the error Run reports for it.
func (a *action) end(o Outcome, t Termination, cause error) error {
	a.res.Outcome = o
	a.res.Termination = t
	if t == NotStarted && len(a.route) > 1 && a.res.Hop == "" {
		// Behind jump hosts, what failed before the command started and
		// is not a jump host's failure is the target's.
		a.res.Hop = a.route[len(a.route)-1].name
	}
	if cause != nil {
		// The outcome is reported beside the detail: don't repeat it.
		a.res.Detail = cause.Error()
	} else {
		a.res.Detail = o.String()
	}
	switch o {
	case Exited, Signaled, ExitMissing:
		return nil
	}
	return &Error{Outcome: o, Err: cause}
}

// endAt ends an action that failed on the way to hop h, before its
// command started: behind jump hosts the result names the hop, and a jump
// host's failure says which one it was.
func (a *action) endAt(h *hop, o Outcome, cause error) error {
	if len(a.route) > 1 {
		a.res.Hop = h.name
		if h.jump {
			cause = &hopError{hop: h, err: cause}
		}
	}
	return a.end(o, NotStarted, cause)
}

// hopError names the jump host an error happened at.
type hopError struct {
	hop *hop
	err error
}

func (e *hopError) Error() string {
	return fmt.Sprintf("jump host %s (%s): %s", e.hop.name, e.hop.addr, e.err)
}

func (e *hopError) Unwrap() error { return e.err }

// stopped returns the outcome for a deadline or cancel: Cancelled when the
// caller cancelled ctx, TimedOut otherwise.
func stopped(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return Cancelled
	}
	return TimedOut
}

// links are the connections of an action's route, closed together: by the
// deadline or a cancel before exec (a cut), and at the end.
type links struct {
	mu     sync.Mutex
	closed bool
	conns  []io.Closer
}

func (l *links) add(c io.Closer) {
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.conns = append(l.conns, c)
	}
	l.mu.Unlock()
	if closed {
		c.Close()
	}
}

// close closes every connection, the outermost (the TCP connection to the
// first hop) first: that ends every connection inside it at once, where
// closing an inner one first would send its close through hops that may
// have stopped reading.
func (l *links) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (a *action) run(ctx, dctx context.Context) error {
	res := a.res
	var cut links
	// Until exec is sent, the deadline or a cancel simply cuts the
	// connections: nothing has started on the server.
	stopCut := context.AfterFunc(dctx, cut.close)
	defer stopCut()
	// Every goroutine below ends when the connections are closed; the
	// deferred calls run in reverse order: close, then wait.
	var hopWG sync.WaitGroup
	defer hopWG.Wait()
	defer cut.close()

	// Dial: the first hop over TCP, each next one over a direct-tcpip
	// channel of the hop before.
	var d net.Dialer
	dial := func(addr string) (net.Conn, error) { return d.DialContext(dctx, "tcp", addr) }
	var via *hop
	for _, h := range a.route {
		raw, err := dial(h.addr)
		if err != nil {
			if stopped(ctx) == Cancelled && dctx.Err() != nil {
				return a.endAt(h, Cancelled, fmt.Errorf("cancelled while connecting to %s", h.addr))
			}
			if via != nil {
				err = fmt.Errorf("jump host %s could not open a connection to %s: %w", via.name, h.addr, err)
			}
			res.Timings.Dial = time.Since(a.start)
			return a.endAt(h, DialFailed, err)
		}
		wc := &watchConn{Conn: raw}
		cut.add(wc)
		if !h.jump {
			res.Timings.Dial = time.Since(a.start)
			conn, chans, reqs, err := a.handshake(ctx, dctx, h, wc)
			if err != nil {
				return err
			}
			return a.do(a, ctx, dctx, wc, conn, chans, reqs, stopCut, &cut)
		}
		conn, chans, reqs, err := a.handshake(ctx, dctx, h, wc)
		if err != nil {
			return err
		}
		// A jump host: nothing but direct-tcpip channels are opened on
		// it, and every channel or request it sends is refused.
		client := ssh.NewClient(conn, chans, reqs)
		cut.add(client)
		hopWG.Go(func() { client.Wait() })
		dial = func(addr string) (net.Conn, error) { return client.DialContext(dctx, "tcp", addr) }
		via = h
	}
	panic("unreachable: the route ends with the target")
}

// handshake runs the SSH handshake with hop h over wc: version exchange,
// key exchange, host key check, authentication. On failure it ends the
// action and returns the error Run reports.
func (a *action) handshake(ctx, dctx context.Context, h *hop, wc *watchConn) (ssh.Conn, <-chan ssh.NewChannel, <-chan *ssh.Request, error) {
	res := a.res
	hsStart := time.Now()
	pprof.SetGoroutineLabels(cpuHandshake)
	cfg := &ssh.ClientConfig{
		User:              h.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(h.signers...)},
		HostKeyCallback:   h.hk.check,
		HostKeyAlgorithms: h.hk.algorithms(),
		ClientVersion:     clientVersion,
	}
	conn, chans, reqs, err := ssh.NewClientConn(wc, h.addr, cfg)
	called, hkAt, keyType, keyFP, rejected := h.hk.seen()
	version := wc.serverVersion()
	if err == nil {
		version = string(conn.ServerVersion())
	}
	if h.jump {
		res.Via = append(res.Via, HopResult{Name: h.name, Addr: h.addr, HostKeyType: keyType, HostKeyFingerprint: keyFP, ServerVersion: version})
	} else {
		res.HostKeyType, res.HostKeyFingerprint, res.ServerVersion = keyType, keyFP, version
		if called {
			res.Timings.Handshake = hkAt.Sub(hsStart)
			res.Timings.Auth = time.Since(hkAt)
		} else {
			res.Timings.Handshake = time.Since(hsStart)
		}
	}
	if err == nil {
		return conn, chans, reqs, nil
	}
	switch {
	case rejected != nil:
		return nil, nil, nil, a.endAt(h, rejected.Outcome, rejected)
	case dctx.Err() != nil && stopped(ctx) == Cancelled:
		return nil, nil, nil, a.endAt(h, Cancelled, fmt.Errorf("cancelled during the SSH handshake: %w", err))
	case dctx.Err() != nil && called:
		return nil, nil, nil, a.endAt(h, HandshakeFailed, fmt.Errorf("deadline passed during authentication: %w", err))
	case dctx.Err() != nil:
		return nil, nil, nil, a.endAt(h, HandshakeFailed, fmt.Errorf("deadline passed during the SSH handshake: %w", err))
	case called && wc.transportError() == nil:
		// The host key was accepted and the connection is intact:
		// the server refused every credential we offered.
		return nil, nil, nil, a.endAt(h, AuthFailed, err)
	case version == "":
		// Say what the target sent instead: sshd past its MaxStartups
		// limit writes "Exceeded MaxStartups" and closes.
		if said := wc.preamble(); said != "" {
			return nil, nil, nil, a.endAt(h, HandshakeFailed, fmt.Errorf("the server sent no SSH version line but %q: %w", said, err))
		}
		return nil, nil, nil, a.endAt(h, HandshakeFailed, fmt.Errorf("the server closed the connection before sending anything (an sshd past its MaxStartups limit, a TCP wrapper or a firewall does this): %w", err))
	}
	return nil, nil, nil, a.endAt(h, HandshakeFailed, err)
}

// session runs the command on the target's authenticated connection.
func (a *action) session(ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, stopCut func() bool, cut *links) error {
	res := a.res
	ch, chReqs, wg, done, err := a.openSession(ctx, dctx, wc, conn, chans, reqs, cut)
	defer done()
	if err != nil {
		return err
	}
	ex := newExitWatcher()
	wc.watchChannel(ex.closed)
	wg.Go(func() { ex.collect(chReqs) })
	limit := a.cfg.outputLimit()
	stdout := &capture{Capture: Capture{Limit: limit, TailLimit: a.cfg.TailLimit}, stream: Stdout, out: a.cfg.Output}
	stderr := &capture{Capture: Capture{Limit: limit, TailLimit: a.cfg.TailLimit}, stream: Stderr, out: a.cfg.Output}
	out := newOutputWatch()
	out.drain(wc, stdout, ch)
	out.drain(wc, stderr, ch.Stderr())
	out.start(wg)

	if !stopCut() {
		// The deadline or a cancel already cut the connection.
		return a.notStarted(ctx, dctx, dctx.Err())
	}

	// One exec request (RFC 4254 §6.5). From here the deadline and
	// cancel are handled by signalling the command, not by cutting.
	execAt := time.Now()
	pprof.SetGoroutineLabels(cpuCommand)
	execReply := make(chan error, 1)
	wg.Go(func() {
		sendBatchEnv(ch)
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{a.command}))
		if err == nil && !ok {
			err = errExecRefused
		}
		execReply <- err
	})
	w, refused := a.await(dctx, wc, conn, ch, wg, ex, out, execReply)
	if refused != nil {
		res.Timings.Command = time.Since(execAt)
		return a.end(SessionFailed, NotStarted, refused)
	}
	res.Timings.Command = time.Since(execAt)

	// Closing keeps what the channel already buffered: after a clean
	// channel close that is every byte of output, which the readers still
	// drain to EOF.
	closedCleanly := isClosed(ex.closed) && wc.transportError() == nil
	wc.markLocal()
	cut.close()
	conn.Close()
	wg.Wait()
	// A reply the wait did not take, if the server sent one, was queued
	// before the channel closed; its goroutine has ended.
	select {
	case err := <-execReply:
		if errors.Is(err, errExecRefused) {
			return a.end(SessionFailed, NotStarted, err)
		}
		w.acked = err == nil
		if w.acked && a.cfg.Started != nil {
			a.cfg.Started()
		}
	default:
	}
	stdout.fill(&res.Stdout, &res.StdoutBytes, &res.StdoutTruncated, &res.StdoutTail)
	stderr.fill(&res.Stderr, &res.StderrBytes, &res.StderrTruncated, &res.StderrTail)

	return a.ended(ctx, wc, ex.result(), w, closedCleanly)
}

// sendStdin writes the action's input to the command, then its end. An
// error means the connection broke (or the command ended without reading
// it all), which the channel's close reports.
func (a *action) sendStdin(ch ssh.Channel) {
	switch {
	case a.cfg.StdinFrom != nil:
		if _, err := io.Copy(ch, a.cfg.StdinFrom); err != nil {
			return
		}
	case len(a.cfg.Stdin) > 0:
		if _, err := ch.Write(a.cfg.Stdin); err != nil {
			return
		}
	}
	ch.CloseWrite()
}

// ended names the outcome of a command that was sent: what the server
// reported (st), whether we sent KILL, whether the channel closed cleanly
// and whether the server answered the exec request.
func (a *action) ended(ctx context.Context, wc *watchConn, st exitState, w waitEnd, closedCleanly bool) error {
	res := a.res
	res.ExitCode, res.HasExitCode = st.code, st.hasCode
	res.Signal, res.CoreDumped = st.signal, st.coreDumped
	if err, ok := a.afterReport(ctx, w, st); ok {
		return err
	}
	switch {
	case w.killed:
		o := stopped(ctx)
		if st.reported() {
			return a.end(o, Confirmed, fmt.Errorf("%s; the command was killed and its end confirmed", stopReason(o)))
		}
		return a.end(o, Unconfirmed, fmt.Errorf("%s; the command was sent KILL but its end was not confirmed, it may still be running", stopReason(o)))
	case st.signal != "":
		return a.end(Signaled, 0, fmt.Errorf("the command was ended by signal %s", st.signal))
	case st.hasCode:
		return a.end(Exited, 0, nil)
	case !closedCleanly:
		err := wc.transportError()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return a.end(ConnectionLost, 0, fmt.Errorf("the connection broke while the command ran, it may still be running: %w", err))
	case !w.acked:
		return a.end(SessionFailed, NotStarted, errors.New("the server closed the session without answering the exec request"))
	}
	return a.end(ExitMissing, 0, errors.New("the server closed the session without an exit status or signal"))
}

// openSession opens the one session channel on the target's connection,
// with every channel and request the server sends toward us refused (no
// forwarding of any kind: forwarded-tcpip, auth-agent@openssh.com,
// x11). The caller defers done, which closes every connection of the
// route, the outermost first (behind a jump host the target's connection
// is a channel of the hop's, and closing it alone waits on a hop that
// may have stopped answering), then waits for the goroutines in wg. err
// is the action's end when no channel opened.
func (a *action) openSession(ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, cut *links) (ssh.Channel, <-chan *ssh.Request, *sync.WaitGroup, func(), error) {
	wg := &sync.WaitGroup{}
	done := func() {
		wc.markLocal()
		cut.close()
		conn.Close()
		wg.Wait()
		conn.Wait()
	}
	refuseAll(wg, chans, reqs)
	sessStart := time.Now()
	pprof.SetGoroutineLabels(cpuSession)
	ch, chReqs, err := conn.OpenChannel("session", nil)
	a.res.Timings.Session = time.Since(sessStart)
	if err != nil {
		return nil, nil, wg, done, a.notStarted(ctx, dctx, fmt.Errorf("open session: %w", err))
	}
	return ch, chReqs, wg, done, nil
}

var errExecRefused = errors.New("the server refused the exec request")

func stopReason(o Outcome) string {
	if o == Cancelled {
		return "cancelled"
	}
	return "the action deadline passed"
}

// notStarted ends an action that failed before exec was sent.
func (a *action) notStarted(ctx, dctx context.Context, err error) error {
	if dctx.Err() != nil {
		if stopped(ctx) == Cancelled {
			return a.end(Cancelled, NotStarted, fmt.Errorf("cancelled before the command started: %w", err))
		}
		return a.end(SessionFailed, NotStarted, fmt.Errorf("deadline passed before the command started: %w", err))
	}
	return a.end(SessionFailed, NotStarted, err)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
