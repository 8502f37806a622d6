package deploy

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Tests of generated lines and certificates against a real OpenSSH sshd.

// quotingCommand exercises sshd's option dequoting: double quotes inside,
// and backslashes that must reach the shell as single backslashes.
const quotingCommand = `printf '%s\n' 'a\b"c' "$SSH_ORIGINAL_COMMAND"`

func TestForcedCommandLineAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	tests := []struct {
		name string
		opts LineOptions
	}{
		{"restrict", LineOptions{Command: quotingCommand}},
		{"restrict and legacy options", LineOptions{Command: quotingCommand, Legacy: true}},
		{"from the client's address", LineOptions{Command: quotingCommand, From: "127.0.0.1"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := sshtest.NewKey()
			tt.opts.Target, tt.opts.Account = uniq(t, "forced"), s.User
			tt.opts.Target += string(rune('a' + i))
			l, err := AuthorizedKeysLine(key.PublicKey(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			authorize(t, s, l)

			// The forced command runs instead of the requested one, which
			// it gets verbatim in SSH_ORIGINAL_COMMAND.
			requested := "id; rm -rf /tmp/nothing-here"
			res, err := sshexec.Run(context.Background(), configFor(s, key), requested)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if want := "a\\b\"c\n" + requested + "\n"; string(res.Stdout) != want || !res.Success() {
				t.Fatalf("got %v %q, want exit 0 and %q", res.Outcome, res.Stdout, want)
			}

			c, err := dial(s, key, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			assertNoPTY(t, c)
			assertNoForwarding(t, c)
		})
	}
}

// assertNoPTY checks that the server refuses a PTY.
func assertNoPTY(t *testing.T, c *ssh.Client) {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.RequestPty("xterm", 40, 80, ssh.TerminalModes{}); err == nil {
		t.Error("PTY request accepted")
	}
}

// assertNoForwarding checks that the server refuses -L, -R, agent and X11
// forwarding.
func assertNoForwarding(t *testing.T, c *ssh.Client) {
	t.Helper()
	// Something to forward to, so that a refusal is the server's policy
	// and not a closed port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()

	conn, err := c.Dial("tcp", l.Addr().String())
	var oce *ssh.OpenChannelError
	if err == nil {
		conn.Close()
		t.Error("-L: direct-tcpip channel accepted")
	} else if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Errorf("-L: got %v, want an administratively prohibited refusal", err)
	}

	if rl, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		rl.Close()
		t.Error("-R: tcpip-forward accepted")
	}

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := agent.RequestAgentForwarding(sess); err == nil {
		t.Error("agent forwarding accepted")
	}
	x11 := struct {
		SingleConnection bool
		AuthProtocol     string
		AuthCookie       string
		ScreenNumber     uint32
	}{false, "MIT-MAGIC-COOKIE-1", strings.Repeat("ab", 16), 0}
	if ok, err := sess.SendRequest("x11-req", true, ssh.Marshal(&x11)); err != nil || ok {
		t.Errorf("x11-req: ok=%v err=%v, want refused", ok, err)
	}
}

func TestFromOptionAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	tests := []struct {
		name      string
		from      string
		allowed   []string
		forbidden []string
	}{
		{"address", "127.0.0.1", []string{"127.0.0.1"}, []string{"127.0.0.2"}},
		{"CIDR", "127.0.0.0/31", []string{"127.0.0.1"}, []string{"127.0.0.2"}},
		{"negation", "!127.0.0.2,127.0.0.0/8", []string{"127.0.0.1", "127.0.0.3"}, []string{"127.0.0.2"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := sshtest.NewKey()
			l, err := AuthorizedKeysLine(key.PublicKey(), LineOptions{Target: uniq(t, "from") + string(rune('a'+i)), Account: s.User, Command: "echo allowed", From: tt.from})
			if err != nil {
				t.Fatal(err)
			}
			authorize(t, s, l)
			for _, ip := range tt.allowed {
				if out, err := run(s, key, ip, "x"); err != nil || out != "allowed\n" {
					t.Errorf("from %s: %q, %v; want allowed", ip, out, err)
				}
			}
			for _, ip := range tt.forbidden {
				if _, err := run(s, key, ip, "x"); err == nil {
					t.Errorf("from %s: logged in, want refused", ip)
				}
			}
		})
	}
}

func TestActionCertificateAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	id := uniq(t, "act")
	cert, err := NewActionCert(sharedCA, CertRequest{ActionID: id, Account: s.User, Serial: 4242, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sshexec.Run(context.Background(), configFor(s, cert.Signer), "echo via-certificate")
	if err != nil {
		t.Fatalf("Run with the action certificate: %v", err)
	}
	if !res.Success() || string(res.Stdout) != "via-certificate\n" {
		t.Fatalf("got %v %q", res.Outcome, res.Stdout)
	}
	// The target's own log names the action and its audit sequence number.
	if want := "ID airlock:" + id + " (serial 4242) CA "; !s.WaitLog(want, testkit.Patience) {
		t.Errorf("sshd log lacks %q", want)
	}
	// No extensions: no PTY, no forwarding.
	c, err := dial(s, cert.Signer, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	assertNoPTY(t, c)
	assertNoForwarding(t, c)
}

func TestActionCertificateRefusedAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	otherCA := sshtest.NewKey()
	tests := []struct {
		name string
		ca   ssh.Signer
		req  CertRequest
	}{
		{"expired", sharedCA, CertRequest{Account: s.User, Timeout: time.Minute, Now: time.Now().Add(-time.Hour)}},
		{"not yet valid", sharedCA, CertRequest{Account: s.User, Timeout: time.Minute, Now: time.Now().Add(time.Hour)}},
		{"wrong principal", sharedCA, CertRequest{Account: "someone-else", Timeout: time.Minute}},
		{"untrusted CA", otherCA, CertRequest{Account: s.User, Timeout: time.Minute}},
		{"other source address", sharedCA, CertRequest{Account: s.User, Timeout: time.Minute, SourceAddress: "127.0.0.2/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.req.ActionID = uniq(t, "refused")
			cert, err := NewActionCert(tt.ca, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			cfg := configFor(s, cert.Signer)
			cfg.User = s.User
			res, err := sshexec.Run(context.Background(), cfg, "echo should-not-run")
			if err == nil || res.Outcome != sshexec.AuthFailed {
				t.Errorf("got %v (%v), want auth_failed", res.Outcome, err)
			}
		})
	}
}

func TestActionCertificateOptionsAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	cert, err := NewActionCert(sharedCA, CertRequest{
		ActionID: uniq(t, "forced"), Account: s.User, Timeout: time.Minute,
		ForceCommand: `printf 'forced:%s\n' "$SSH_ORIGINAL_COMMAND"`, SourceAddress: "127.0.0.1/32,::1",
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(s, cert.Signer, "127.0.0.1", "id")
	if err != nil || out != "forced:id\n" {
		t.Errorf("got %q, %v; want the forced command", out, err)
	}
}

// TestCertAuthorityLineAgainstSSHD trusts a CA for one account through
// authorized_keys (cert-authority,principals=…) rather than sshd_config.
func TestCertAuthorityLineAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	ca := sshtest.NewKey() // not in TrustedUserCAKeys
	l, err := AuthorizedKeysLine(ca.PublicKey(), LineOptions{Target: uniq(t, "ca-line"), Account: s.User, Command: "echo via-ca-line", CertAuthority: true})
	if err != nil {
		t.Fatal(err)
	}
	authorize(t, s, l)
	good, err := NewActionCert(ca, CertRequest{ActionID: uniq(t, "ok"), Account: s.User, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run(s, good.Signer, "", "id"); err != nil || out != "via-ca-line\n" {
		t.Errorf("certificate for %s: %q, %v; want the line's forced command", s.User, out, err)
	}
	wrong, err := NewActionCert(ca, CertRequest{ActionID: uniq(t, "wrong"), Account: "root", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(s, wrong.Signer, "", "id"); err == nil {
		t.Error("certificate for another principal accepted")
	}
	// The CA key itself is not a login key.
	if _, err := run(s, ca, "", "id"); err == nil {
		t.Error("the CA's own key logged in")
	}
}
