// Package demo is airlock's built-in demo SSH target: an in-process SSH
// server on loopback that runs each exec request with /bin/sh -c in a
// scratch directory, reporting exit status and signals as sshd does, so
// that `airlock demo` shows the whole flow without an sshd, a config file or
// root. It is for demonstration only: it trusts exactly one client key and
// offers nothing but exec.
package demo

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/netserve"
)

// Target is a running demo SSH server.
type Target struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// Dir is the scratch directory commands run in.
	Dir string

	srv    *netserve.Server
	client ssh.PublicKey

	mu      sync.Mutex
	hostKey ssh.Signer
}

// Start starts a demo target in dir that accepts only clientKey.
func Start(dir string, clientKey ssh.PublicKey) (*Target, error) {
	host, err := newSigner()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo target: %w", err)
	}
	t := &Target{Addr: ln.Addr().String(), Dir: dir, client: clientKey, hostKey: host}
	t.srv = netserve.Serve(ln, t.serve)
	return t, nil
}

func newSigner() (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// HostKey is the key the target presents now.
func (t *Target) HostKey() ssh.PublicKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hostKey.PublicKey()
}

// RotateHostKey gives the target a new host key, as a reinstalled or
// impersonated server would have: the gateway must refuse it.
func (t *Target) RotateHostKey() error {
	s, err := newSigner()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.hostKey = s
	t.mu.Unlock()
	return nil
}

// Close stops the target, ends every connection and waits for them.
func (t *Target) Close() error { return t.srv.Close() }

func (t *Target) serve(c net.Conn) {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(t.client.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("demo target: unknown client key")
		},
		ServerVersion: "SSH-2.0-airlock-demo-target",
	}
	t.mu.Lock()
	cfg.AddHostKey(t.hostKey)
	t.mu.Unlock()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ssh.DiscardRequests(reqs) })
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.Prohibited, "the demo target offers sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Go(func() { t.session(ch, creqs) })
	}
}

// session serves one session channel: one exec, signals, nothing else.
func (t *Target) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var (
		cmd  *exec.Cmd
		done = make(chan struct{})
	)
	for r := range reqs {
		switch {
		case r.Type == "exec" && cmd == nil:
			var m struct{ Command string }
			if ssh.Unmarshal(r.Payload, &m) != nil {
				r.Reply(false, nil)
				continue
			}
			cmd = exec.Command("/bin/sh", "-c", m.Command)
			cmd.Dir = t.Dir
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.Dir, "LANG=C.UTF-8"}
			cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				r.Reply(false, nil)
				cmd = nil
				continue
			}
			r.Reply(true, nil)
			go func() {
				defer close(done)
				t.report(ch, cmd.Wait())
				ch.CloseWrite()
				ch.Close()
			}()
		case r.Type == "signal" && cmd != nil:
			var m struct{ Signal string }
			if ssh.Unmarshal(r.Payload, &m) == nil {
				if sig, ok := signals[m.Signal]; ok {
					syscall.Kill(-cmd.Process.Pid, sig)
				}
			}
			if r.WantReply {
				r.Reply(true, nil)
			}
		default:
			// pty-req, env, x11-req, auth-agent-req@openssh.com, subsystem…
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
	}
	// The client closed the channel: stop what it started.
	if cmd != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// report sends exit-status or exit-signal (RFC 4254 §6.10).
func (t *Target) report(ch ssh.Channel, err error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}{Signal: signalName(ws.Signal()), CoreDumped: ws.CoreDump()}))
			return
		}
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(ee.ExitCode())}))
	default:
		io.WriteString(ch.Stderr(), err.Error()+"\n")
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{255}))
	}
}

// signals are the names of RFC 4254 §6.10 without "SIG".
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

func signalName(s syscall.Signal) string {
	for name, sig := range signals {
		if sig == s {
			return name
		}
	}
	return fmt.Sprintf("SIG%d", int(s))
}
