package sshexec

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults applied to zero Config fields.
const (
	// DefaultTimeout bounds an action whose Config.Timeout is zero.
	DefaultTimeout = 60 * time.Second
	// DefaultKillGrace is how long Run waits for an exit report after it
	// sent "signal KILL".
	DefaultKillGrace = 2 * time.Second
	// DefaultOutputLimit is how many bytes of each of stdout and stderr are
	// kept when Config.OutputLimit is zero.
	DefaultOutputLimit = 8 << 20
)

// clientVersion is the identification string we send (RFC 4253 §4.2).
const clientVersion = "SSH-2.0-airlock"

// ErrInvalidConfig is wrapped by every error Run returns for a Config it
// cannot use. Nothing is dialed in that case.
var ErrInvalidConfig = errors.New("invalid SSH target config")

// Config describes one action's connection. It is read, never modified, by
// Run, and may be shared by concurrent calls.
type Config struct {
	// Addr is the server's "host:port". It must be supplied; Run never
	// dials anything else.
	Addr string

	// User is the remote account. It must be supplied.
	User string

	// Signers are offered, in order, for public key authentication. At
	// least one must be supplied. RSA keys sign with SHA-2 only
	// (rsa-sha2-512, rsa-sha2-256), never SHA-1. A certificate signer made
	// with ssh.NewCertSigner works like any other.
	Signers []ssh.Signer

	// HostKeys says which host keys are trusted for Addr. At least one
	// pinned key or known_hosts file must be supplied: there is no
	// insecure mode and no trust on first use.
	HostKeys HostKeys

	// Timeout bounds the whole action: dial, key exchange, authentication,
	// exec and the output drain. Zero means DefaultTimeout. A deadline on
	// the context passed to Run applies as well; the earlier one wins.
	Timeout time.Duration

	// KillGrace is how long Run waits, after the deadline or a cancel made
	// it send "signal KILL", for the server to report that the command
	// ended. Zero means DefaultKillGrace. It is the only time Run may take
	// beyond the deadline. After the command reported its end, it is also
	// how long Run waits with nothing arriving before it asks the server
	// whether the link still answers, and how long it waits for that
	// answer; those waits end at the deadline.
	KillGrace time.Duration

	// OutputLimit is how many bytes of stdout, and separately of stderr,
	// Run keeps in the Result. Bytes beyond it are read (so the command is
	// never blocked on a full pipe), counted and dropped, and the stream
	// is flagged truncated. Zero means DefaultOutputLimit; negative keeps
	// nothing.
	OutputLimit int64
	// Via are the jump hosts Addr is reached through, in order: the first
	// is dialed over TCP, each next one, and Addr last, over a
	// "direct-tcpip" channel (RFC 4254 §7.2) of the one before. Each hop
	// is a full SSH connection of its own, with its own host key check
	// and credential, and nothing but that one channel is ever opened on
	// it: no session, no shell, no agent forwarding. Every hop is closed
	// before Run returns. At most MaxHops.
	Via []Hop

	// Name names the target in Result.Hop when Via is set; Addr when empty.
	Name string

	// Stdin is sent to the command's standard input once the server has
	// accepted the exec request, followed by its end (EOF); nil sends
	// only the end. A command that does not read it is not held up by it.
	Stdin []byte
	// StdinFrom, when set, is streamed to the command's standard input
	// instead of Stdin (a file transfer through a forced command). It is
	// read as the command reads; a read from it is not cut by the
	// deadline.
	StdinFrom io.Reader

	// TailLimit, when positive, also keeps the last TailLimit bytes of
	// each stream (Result.StdoutTail, StderrTail) when the stream is
	// longer than OutputLimit: the end of an output the head cut.
	TailLimit int64

	// Started, if not nil, is called once, from Run's goroutine, when the
	// server accepted the exec request: the command is running.
	Started func()

	// Output, if not nil, is called with every chunk of stdout or stderr
	// as it arrives, including chunks beyond OutputLimit. It is called
	// from one goroutine per stream and must not keep p after it returns.
	// It may block: that stream is then not read, its SSH window fills and
	// the command waits to write (back-pressure, as ssh gives a slow
	// terminal). Run returns only once every call has returned, so a
	// caller that blocks must stop blocking by the deadline.
	Output func(s Stream, p []byte)
}

// MaxHops bounds Config.Via: the jump hosts of one action.
const MaxHops = 4

// Hop is one jump host on the way to the target.
type Hop struct {
	// Name names the hop in Result.Hop and Result.Via.
	Name string
	// Addr is the hop's "host:port", dialed over TCP for the first hop and
	// through the hop before it otherwise (the name resolved there).
	Addr string
	// User, Signers and HostKeys are as in Config, for this hop.
	User     string
	Signers  []ssh.Signer
	HostKeys HostKeys
}

// Stream names one of the command's output streams.
type Stream uint8

// The output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", uint8(s))
}

func (c *Config) validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil config", ErrInvalidConfig)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("%w: address %q is not host:port", ErrInvalidConfig, c.Addr)
	}
	if c.User == "" {
		return fmt.Errorf("%w: no user", ErrInvalidConfig)
	}
	if len(c.Signers) == 0 {
		return fmt.Errorf("%w: no signers", ErrInvalidConfig)
	}
	for i, s := range c.Signers {
		if s == nil {
			return fmt.Errorf("%w: signer %d is nil", ErrInvalidConfig, i)
		}
	}
	if err := c.HostKeys.validate(); err != nil {
		return err
	}
	if len(c.Via) > MaxHops {
		return fmt.Errorf("%w: %d jump hosts, more than the %d allowed", ErrInvalidConfig, len(c.Via), MaxHops)
	}
	for i, h := range c.Via {
		if _, _, err := net.SplitHostPort(h.Addr); err != nil {
			return fmt.Errorf("%w: jump host %d (%s): address %q is not host:port", ErrInvalidConfig, i, h.Name, h.Addr)
		}
		if h.User == "" || len(h.Signers) == 0 || slices.Contains(h.Signers, nil) {
			return fmt.Errorf("%w: jump host %d (%s): a user and signers are needed", ErrInvalidConfig, i, h.Name)
		}
		if err := h.HostKeys.validate(); err != nil {
			return fmt.Errorf("jump host %d (%s): %w", i, h.Name, err)
		}
	}
	if c.Timeout < 0 || c.KillGrace < 0 {
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	return nil
}

func (hk *HostKeys) validate() error {
	if len(hk.Pinned) == 0 && len(hk.KnownHostsFiles) == 0 {
		return fmt.Errorf("%w: no pinned host keys and no known_hosts files", ErrInvalidConfig)
	}
	for i, k := range hk.Pinned {
		if k == nil {
			return fmt.Errorf("%w: pinned host key %d is nil", ErrInvalidConfig, i)
		}
	}
	return nil
}

func (c *Config) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c *Config) killGrace() time.Duration {
	if c.KillGrace == 0 {
		return DefaultKillGrace
	}
	return c.KillGrace
}

func (c *Config) outputLimit() int64 {
	switch {
	case c.OutputLimit == 0:
		return DefaultOutputLimit
	case c.OutputLimit < 0:
		return 0
	}
	return c.OutputLimit
}
