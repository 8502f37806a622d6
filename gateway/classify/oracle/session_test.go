package oracle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
)

// The oracle runs each line in a session of its own on one SSH
// connection per account, not in a connection of its own as
// sshexec.Run does: sshd forks the login shell per session either way,
// with the same environment, and a connection per line (about 50 ms of
// key exchange and authentication) would make the corpus the grammars
// generate (thousands of lines) far too slow to run with every test.
// The connection is as strict as the gateway's: the host key pinned, no
// other host key algorithm offered.

// conn is an account's SSH connection, with the account's processes that
// serve it (sshd's unprivileged half), which are not the lines'.
type conn struct {
	client *ssh.Client
	own    map[int]bool
}

// dial connects to the account's sshd and learns which of the account's
// processes serve the connection: those running once a first session
// ended.
func (a *account) dial() error {
	if a.conn != nil {
		a.conn.client.Close()
		a.conn = nil
	}
	if err := a.killAll(); err != nil {
		return err
	}
	c, err := ssh.Dial("tcp", a.sshd.Addr, &ssh.ClientConfig{
		User:              a.name,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(a.sshd.ClientSigner)},
		HostKeyCallback:   ssh.FixedHostKey(a.sshd.CurrentHostKey()),
		HostKeyAlgorithms: []string{a.sshd.CurrentHostKey().Type()},
		Timeout:           lineTimeout,
	})
	if err != nil {
		return fmt.Errorf("oracle: %s: dial: %w", a.name, err)
	}
	s, err := c.NewSession()
	if err == nil {
		err = s.Run("true")
		s.Close()
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("oracle: %s: first session: %w", a.name, err)
	}
	a.conn = &conn{client: c, own: map[int]bool{}}
	for _, p := range a.processes() {
		if p.Comm == "sshd" {
			a.conn.own[p.PID] = true
		}
	}
	return nil
}

// ran is how a line ended: "exit 0", "exit 2", "signal KILL", "timed
// out", "connection lost"; with the start of what it printed on stderr.
type ran struct {
	how    string
	stderr []byte
}

func (r ran) String() string {
	if len(r.stderr) == 0 {
		return r.how
	}
	return r.how + ": " + strconv.Quote(string(r.stderr))
}

// errNotStarted says the line never ran: its session could not be
// opened or started.
var errNotStarted = errors.New("oracle: the session did not start")

// run runs line as the account, in a session of its own, with empty
// standard input, for at most the account's timeout. It fails only when the line
// could not be started (after one new connection): a line that exits
// non-zero, is killed or times out ran.
func (a *account) run(line string) (ran, error) {
	var err error
	for try := 0; try < 2; try++ {
		if a.conn == nil {
			if err = a.dial(); err != nil {
				continue
			}
		}
		var r ran
		r, err = a.session(line)
		if !errors.Is(err, errNotStarted) {
			return r, nil
		}
		a.conn.client.Close()
		a.conn = nil
	}
	if strings.ContainsRune(line, 0) {
		// sshd ends the connection rather than run a command with a NUL
		// byte in it: such a line runs nowhere, and changes nothing.
		return ran{how: "not run: sshd refuses a command with a NUL byte (" + err.Error() + ")"}, nil
	}
	return ran{}, fmt.Errorf("oracle: %s could not run %q: %w", a.name, line, err)
}

// session runs line in a new session. A line may end the connection
// (kill $PPID): the next line dials again.
func (a *account) session(line string) (ran, error) {
	s, err := a.conn.client.NewSession()
	if err != nil {
		return ran{}, fmt.Errorf("%w: %v", errNotStarted, err)
	}
	defer s.Close()
	stderr := &headBuffer{max: 160}
	s.Stdout, s.Stderr = io.Discard, stderr
	if err := s.Start(line); err != nil {
		return ran{}, fmt.Errorf("%w: %v", errNotStarted, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	var r ran
	select {
	case err = <-done:
	case <-time.After(a.timeout):
		s.Signal(ssh.SIGKILL)
		s.Close()
		<-done
		r.how, r.stderr = "timed out", stderr.bytes()
		return r, nil
	}
	var exit *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		r.how = "exit 0"
	case errors.As(err, &exit) && exit.Signal() != "":
		r.how = "signal " + exit.Signal()
	case errors.As(err, &exit):
		r.how = "exit " + strconv.Itoa(exit.ExitStatus())
	case errors.As(err, &missing):
		r.how = "no exit status"
	default:
		r.how = "connection lost: " + err.Error()
		a.conn.client.Close()
		a.conn = nil
	}
	r.stderr = stderr.bytes()
	return r, nil
}

// runExec runs line as run does, but through sshexec.Run, the
// gateway's own client: in a connection of its own, the host key pinned.
// The self-check runs both ways, and every disagreement is run again
// this way, so that a finding is one the gateway's path shows.
func (a *account) runExec(line string) (ran, error) {
	res, err := sshexec.Run(context.Background(), &sshexec.Config{
		Addr:        a.sshd.Addr,
		User:        a.name,
		Signers:     []ssh.Signer{a.sshd.ClientSigner},
		HostKeys:    sshexec.HostKeys{Pinned: []ssh.PublicKey{a.sshd.CurrentHostKey()}},
		Timeout:     a.timeout,
		KillGrace:   time.Second,
		OutputLimit: 160,
	}, line)
	if res == nil {
		return ran{}, fmt.Errorf("oracle: %s could not run %q: %w", a.name, line, err)
	}
	switch res.Outcome {
	case sshexec.Exited, sshexec.Signaled, sshexec.ExitMissing, sshexec.TimedOut:
	default:
		return ran{}, fmt.Errorf("oracle: %s could not run %q: %s: %w", a.name, line, res.Outcome, err)
	}
	r := ran{how: "sshexec: " + res.Outcome.String(), stderr: res.Stderr}
	if res.HasExitCode {
		r.how += " " + strconv.Itoa(res.ExitCode)
	}
	return r, nil
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.b.Len(); room > 0 {
		h.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (h *headBuffer) bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Clone(h.b.Bytes())
}
