package sshtest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/netserve"
)

// FaultServer is an in-process SSH server on loopback for faults a real
// sshd cannot be made to produce on demand. It authenticates one client key
// and hands each exec request to a handler.
type FaultServer struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// HostKey is the server's host key; ClientSigner the only client key
	// it accepts.
	HostKey      ssh.PublicKey
	ClientSigner ssh.Signer

	opts FaultOptions
	srv  *netserve.Server

	quit     chan struct{}
	quitOnce sync.Once

	mu   sync.Mutex
	seen []string
}

// FaultOptions choose a FaultServer's behaviour.
type FaultOptions struct {
	// BannerDelay delays the server's version line.
	BannerDelay time.Duration
	// RefuseSession rejects every session channel.
	RefuseSession bool
	// RefuseExec answers every exec request with failure.
	RefuseExec bool
	// Exec handles an accepted exec request. It runs in its own
	// goroutine; when it returns without having closed the channel, the
	// channel is closed. Nil means: exit status 0 at once.
	Exec func(e *Exec)
}

// Exec is one exec request as the handler sees it.
type Exec struct {
	Command string
	// Channel is the session channel: write stdout to it, stderr to
	// Channel.Stderr().
	Channel ssh.Channel
	// Signals receives the name of every "signal" request.
	Signals <-chan string
	// Done is closed when the client closed the channel or the
	// connection ended.
	Done <-chan struct{}

	srv  *FaultServer
	conn *stallConn
	sc   *ssh.ServerConn
}

// ExitStatus sends exit-status (RFC 4254 §6.10).
func (e *Exec) ExitStatus(code uint32) error {
	_, err := e.Channel.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
	return err
}

// ExitSignal sends exit-signal with the signal name without "SIG".
func (e *Exec) ExitSignal(name string) error {
	_, err := e.Channel.SendRequest("exit-signal", false, ssh.Marshal(struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}{Signal: name}))
	return err
}

// Drop cuts the TCP connection without any SSH goodbye.
func (e *Exec) Drop() { e.conn.Close() }

// Stall makes the link silent from the server's side, as a blackhole on
// the way does: nothing the server writes from now on reaches the
// client (its writes wait until the connection closes), and the TCP
// connection stays up.
func (e *Exec) Stall() { e.conn.stall() }

// Throttle makes every later write of more than 200 bytes on the
// server's connection take d more (the transport writes a large packet in
// pieces of a few KiB): a thin link, on which bytes keep coming but a
// packet takes long.
func (e *Exec) Throttle(d time.Duration) { e.conn.throttle.Store(int64(d)) }

// stallConn is a server connection that Stall can silence.
type stallConn struct {
	net.Conn
	once    sync.Once
	closed  chan struct{}
	stalled chan struct{}
	stallMu sync.Once
	// throttle delays each write of more than 200 bytes (a packet with
	// data, not a keepalive's answer).
	throttle atomic.Int64
}

func newStallConn(c net.Conn) *stallConn {
	return &stallConn{Conn: c, closed: make(chan struct{}), stalled: make(chan struct{})}
}

func (c *stallConn) stall() { c.stallMu.Do(func() { close(c.stalled) }) }

func (c *stallConn) Write(p []byte) (int, error) {
	select {
	case <-c.stalled:
		<-c.closed
		return 0, net.ErrClosed
	default:
		if d := c.throttle.Load(); d > 0 && len(p) > 200 {
			time.Sleep(time.Duration(d))
		}
		return c.Conn.Write(p)
	}
}

// Read reads from the client; once the client went away, stalled writes
// end too.
func (c *stallConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { close(c.closed) })
	}
	return n, err
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// OpenToClient tries to open a channel of the given type toward the
// client, as a hostile server would for forwarding, and records the result
// as "open-to-client:TYPE:accepted" or ":rejected".
func (e *Exec) OpenToClient(typ string, payload []byte) error {
	ch, reqs, err := e.sc.OpenChannel(typ, payload)
	if err != nil {
		e.srv.record("open-to-client:" + typ + ":rejected")
		return err
	}
	e.srv.record("open-to-client:" + typ + ":accepted")
	go ssh.DiscardRequests(reqs)
	ch.Close()
	return nil
}

// SendGlobal sends a global request toward the client and records whether
// it was accepted.
func (e *Exec) SendGlobal(name string) {
	ok, _, err := e.sc.SendRequest(name, true, nil)
	switch {
	case err != nil:
		e.srv.record("global-to-client:" + name + ":error")
	case ok:
		e.srv.record("global-to-client:" + name + ":accepted")
	default:
		e.srv.record("global-to-client:" + name + ":rejected")
	}
}

// NewFaultServer starts a FaultServer for one test and stops it, waiting
// for every goroutine, when the test ends.
func NewFaultServer(tb testing.TB, opts FaultOptions) *FaultServer {
	tb.Helper()
	return NewFaultServerWithClient(tb, opts, NewKey())
}

// NewFaultServerWithClient is NewFaultServer accepting the given client key
// instead of a key of its own.
func NewFaultServerWithClient(tb testing.TB, opts FaultOptions, client ssh.Signer) *FaultServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	host := NewKey()
	f := &FaultServer{
		Addr:         ln.Addr().String(),
		HostKey:      host.PublicKey(),
		ClientSigner: client,
		opts:         opts,
		quit:         make(chan struct{}),
	}
	want := string(client.PublicKey().Marshal())
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == want {
				return &ssh.Permissions{}, nil
			}
			return nil, errUnknownKey
		},
	}
	cfg.AddHostKey(host)
	f.srv = netserve.Serve(ln, func(c net.Conn) { f.serve(c, cfg) })
	tb.Cleanup(f.Close)
	return f
}

type faultError string

func (e faultError) Error() string { return string(e) }

const errUnknownKey = faultError("sshtest: unknown client key")

// Seen returns, in order, what the server saw: "global:TYPE" and
// "req:TYPE" for requests from the client, "channel:TYPE" for channel
// opens, and the results of OpenToClient and SendGlobal.
func (f *FaultServer) Seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func (f *FaultServer) record(s string) {
	f.mu.Lock()
	f.seen = append(f.seen, s)
	f.mu.Unlock()
}

// Close stops the server and waits for all its goroutines.
func (f *FaultServer) Close() {
	f.quitOnce.Do(func() { close(f.quit) })
	f.srv.Close()
}

func (f *FaultServer) serve(raw net.Conn, cfg *ssh.ServerConfig) {
	c := newStallConn(raw)
	defer c.Close()
	if f.opts.BannerDelay > 0 {
		t := time.NewTimer(f.opts.BannerDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-f.quit:
			return
		}
	}
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for r := range reqs {
			f.record("global:" + r.Type)
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
	})
	for nc := range chans {
		f.record("channel:" + nc.ChannelType())
		if nc.ChannelType() != "session" || f.opts.RefuseSession {
			nc.Reject(ssh.Prohibited, "refused by the fault server")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Go(func() { f.session(c, sc, ch, creqs) })
	}
}

func (f *FaultServer) session(c *stallConn, sc *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	signals := make(chan string, 16)
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		ch.Close()
		wg.Wait()
	}()
	started := false
	for r := range reqs {
		var env struct{ Name, Value string }
		if r.Type == "env" && ssh.Unmarshal(r.Payload, &env) == nil {
			f.record("req:env:" + env.Name + "=" + env.Value)
		} else {
			f.record("req:" + r.Type)
		}
		switch {
		case r.Type == "exec" && !started:
			var m struct{ Command string }
			if ssh.Unmarshal(r.Payload, &m) != nil || f.opts.RefuseExec {
				r.Reply(false, nil)
				continue
			}
			r.Reply(true, nil)
			started = true
			e := &Exec{Command: m.Command, Channel: ch, Signals: signals, Done: done, srv: f, conn: c, sc: sc}
			handler := f.opts.Exec
			if handler == nil {
				handler = func(e *Exec) { e.ExitStatus(0) }
			}
			wg.Go(func() {
				handler(e)
				e.Channel.Close()
			})
		case r.Type == "signal":
			var m struct{ Signal string }
			ssh.Unmarshal(r.Payload, &m)
			select {
			case signals <- m.Signal:
			default:
			}
			if r.WantReply {
				r.Reply(true, nil)
			}
		default:
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
	}
}
