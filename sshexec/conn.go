package sshexec

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// lostGrace is how long a failed read waits for the session channel to be
// seen closed before it counts as a broken transport. x/crypto/ssh closes a
// channel both when the server sends CHANNEL_CLOSE and when the transport
// dies, and says nothing of which. The mux reads CHANNEL_CLOSE, closes the
// channel, and only then reads on; a transport failure is read first and
// closes the channel after. So a read error that is not followed by a
// channel close within this grace came first: the connection was lost.
const lostGrace = 100 * time.Millisecond

// headLimit bounds the bytes kept from the start of the stream, enough for
// the server's identification line (RFC 4253 §4.2: at most 255 bytes, after
// optional lines of other text).
const headLimit = 2048

// watchConn is the TCP connection of one action. It remembers the first
// bytes the server sent (for its version string) and the first I/O error
// that was not caused by our own Close.
type watchConn struct {
	net.Conn

	mu         sync.Mutex
	head       []byte
	err        error
	local      bool
	chanClosed <-chan struct{}
	// progress, when set, gets a token (when it has room) for every read
	// that brought bytes.
	progress atomic.Pointer[chan struct{}]
}

// watchProgress makes every read that brings bytes leave a token in p
// (nil: none).
func (c *watchConn) watchProgress(p chan struct{}) {
	if p == nil {
		c.progress.Store(nil)
		return
	}
	c.progress.Store(&p)
}

func (c *watchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if pp := c.progress.Load(); pp != nil {
			select {
			case *pp <- struct{}{}:
			default:
			}
		}
		c.mu.Lock()
		if room := headLimit - len(c.head); room > 0 {
			c.head = append(c.head, p[:min(n, room)]...)
		}
		c.mu.Unlock()
	}
	if err != nil {
		c.note(err)
	}
	return n, err
}

func (c *watchConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.note(err)
	}
	return n, err
}

// watchChannel tells the connection which session channel's close decides
// whether a later I/O error still counts (see lostGrace).
func (c *watchConn) watchChannel(closed <-chan struct{}) {
	c.mu.Lock()
	c.chanClosed = closed
	c.mu.Unlock()
}

func (c *watchConn) note(err error) {
	c.mu.Lock()
	if c.local || c.err != nil {
		c.mu.Unlock()
		return
	}
	closed := c.chanClosed
	c.mu.Unlock()
	if closed != nil {
		t := time.NewTimer(lostGrace)
		defer t.Stop()
		select {
		case <-closed:
			return // the channel ended first: a clean close
		case <-t.C:
		}
	}
	c.mu.Lock()
	if !c.local && c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// transportError returns the first I/O error that we did not cause.
func (c *watchConn) transportError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection. Every Close is ours (x/crypto/ssh calls it
// too, on our side), so I/O errors after it do not count as transport
// failures.
func (c *watchConn) Close() error {
	c.mu.Lock()
	c.local = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// markLocal makes every later I/O error ours, as Close does, without
// closing: for a connection that closing the one beneath it ends.
func (c *watchConn) markLocal() {
	c.mu.Lock()
	c.local = true
	c.mu.Unlock()
}

// preambleLimit bounds what preamble returns.
const preambleLimit = 120

// preamble returns the first non-empty line the server sent, for a server
// that sent no identification line (RFC 4253 §4.2 lets a server send other
// lines first; some send their reason for closing), at most preambleLimit
// bytes, or "" if the server sent nothing but blank lines.
func (c *watchConn) preamble() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range bytes.Split(c.head, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > preambleLimit {
			line = line[:preambleLimit]
		}
		return printable(line)
	}
	return ""
}

// serverVersion returns the server's identification line, if one arrived.
func (c *watchConn) serverVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range bytes.Split(c.head, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("SSH-")) {
			return printable(bytes.TrimRight(line, "\r"))
		}
	}
	return ""
}

// printable shows b with every byte outside printable US-ASCII (all RFC
// 4253 §4.2 allows in an identification line) as '?', so that what a
// server sent cannot pass on control characters.
func printable(b []byte) string {
	return string(bytes.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, b))
}
