package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestJumpHostAgainstSSHD reaches a target through a jump host, both real
// sshds in a network namespace of their own: the target listens where only
// the jump host can reach it, and the jump host lets its key forward to the
// target's address and nothing else (restrict, permitopen, a forced
// /bin/false for any session).
func TestJumpHostAgainstSSHD(t *testing.T) {
	sshtest.Need(t)
	ns := sshtest.NewNetNS(t)
	inner := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns})
	user, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	// The jump account's sshd settings docs/operators.md gives: local
	// forwarding only (port-forwarding in authorized_keys turns remote
	// forwarding on too).
	bastion := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns, Config: []string{"Match User " + user,
		"  AllowTcpForwarding local", "  PermitListen none", "  AllowStreamLocalForwarding no", "  AllowAgentForwarding no", "  X11Forwarding no", "  PermitTTY no"}})
	bastionAddr := ns.Expose(t, bastion.Addr)
	jumpKey := sshtest.NewKey()
	// Forwarding to the inner sshd and to the bastion itself (for a chain
	// of two hops through it); nothing else.
	line := fmt.Sprintf(`restrict,port-forwarding,permitopen="%s",permitopen="%s",command="/bin/false" %s`,
		inner.Addr, bastion.Addr, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(jumpKey.PublicKey()))))
	if err := bastion.Authorize(line); err != nil {
		t.Fatal(err)
	}
	jump := func() sshexec.Hop {
		return sshexec.Hop{Name: "bastion", Addr: bastionAddr, User: bastion.User, Signers: []ssh.Signer{jumpKey},
			HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{bastion.HostKey}}}
	}
	cfg := func() *sshexec.Config {
		c := configFor(inner)
		c.Name = "db-1"
		c.Via = []sshexec.Hop{jump()}
		return c
	}
	ctx := context.Background()
	logins := func() [2]int { return [2]int{bastion.Accepted(), inner.Accepted()} }
	wantLogins := func(t *testing.T, before [2]int, dBastion, dInner int) {
		t.Helper()
		now := logins()
		if now[0]-before[0] != dBastion || now[1]-before[1] != dInner {
			t.Errorf("logins: bastion +%d, target +%d; want +%d, +%d", now[0]-before[0], now[1]-before[1], dBastion, dInner)
		}
	}

	t.Run("the target is out of reach without the jump host", func(t *testing.T) {
		res, _ := sshexec.Run(ctx, configFor(inner), "true")
		if res.Outcome != sshexec.DialFailed {
			t.Fatalf("direct: outcome %v (%s), want dial_failed", res.Outcome, res.Detail)
		}
	})

	t.Run("through the jump host", func(t *testing.T) {
		before := logins()
		c := cfg()
		c.Stdin = []byte("through\n")
		res, err := sshexec.Run(ctx, c, "cat; echo on $SSH_CONNECTION")
		if err != nil || !res.Success() {
			t.Fatalf("Run: %v %+v", err, res)
		}
		if !strings.HasPrefix(string(res.Stdout), "through\non ") {
			t.Errorf("stdout %q", res.Stdout)
		}
		if res.Hop != "" {
			t.Errorf("Hop = %q on success", res.Hop)
		}
		if res.HostKeyFingerprint != ssh.FingerprintSHA256(inner.HostKey) {
			t.Errorf("target fingerprint %s, want the inner sshd's", res.HostKeyFingerprint)
		}
		if len(res.Via) != 1 || res.Via[0].Name != "bastion" || res.Via[0].HostKeyFingerprint != ssh.FingerprintSHA256(bastion.HostKey) ||
			!strings.HasPrefix(res.Via[0].ServerVersion, "SSH-2.0-OpenSSH") {
			t.Errorf("Via = %+v", res.Via)
		}
		// One login per hop; the jump host's connection is gone too.
		wantLogins(t, before, 1, 1)
		if n := len(bastion.SessionProcesses()); n != 0 {
			t.Logf("bastion session processes still there: %d (they end with the connection)", n)
		}
	})

	t.Run("two hops", func(t *testing.T) {
		before := logins()
		c := cfg()
		second := jump()
		second.Name, second.Addr = "bastion-2", bastion.Addr
		c.Via = append(c.Via, second)
		res, err := sshexec.Run(ctx, c, "echo two")
		if err != nil || !res.Success() || string(res.Stdout) != "two\n" {
			t.Fatalf("Run: %v %+v", err, res)
		}
		if len(res.Via) != 2 || res.Via[1].Name != "bastion-2" {
			t.Errorf("Via = %+v", res.Via)
		}
		wantLogins(t, before, 2, 1)
	})

	t.Run("the inner host key is wrong", func(t *testing.T) {
		before := logins()
		c := cfg()
		c.HostKeys.Pinned = []ssh.PublicKey{sshtest.NewKey().PublicKey()}
		res, err := sshexec.Run(ctx, c, "touch /tmp/airlock-must-not-run")
		var se *sshexec.Error
		if !errors.As(err, &se) || res.Outcome != sshexec.HostKeyMismatch || res.Hop != "db-1" || res.Termination != sshexec.NotStarted {
			t.Fatalf("outcome %v hop %q (%v), want host_key_mismatch at db-1", res.Outcome, res.Hop, err)
		}
		if res.HostKeyFingerprint != ssh.FingerprintSHA256(inner.HostKey) || len(res.Via) != 1 {
			t.Errorf("facts: %s %+v", res.HostKeyFingerprint, res.Via)
		}
		wantLogins(t, before, 1, 0)
	})

	t.Run("the jump host's key is wrong", func(t *testing.T) {
		before := logins()
		c := cfg()
		c.Via[0].HostKeys.Pinned = []ssh.PublicKey{sshtest.NewKey().PublicKey()}
		res, _ := sshexec.Run(ctx, c, "true")
		if res.Outcome != sshexec.HostKeyMismatch || res.Hop != "bastion" || !strings.Contains(res.Detail, "jump host bastion") {
			t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
		}
		if res.HostKeyFingerprint != "" || len(res.Via) != 1 || res.Via[0].HostKeyFingerprint != ssh.FingerprintSHA256(bastion.HostKey) {
			t.Errorf("facts: target %q, via %+v", res.HostKeyFingerprint, res.Via)
		}
		wantLogins(t, before, 0, 0)
	})

	t.Run("the jump host refuses the credential", func(t *testing.T) {
		c := cfg()
		c.Via[0].Signers = []ssh.Signer{sshtest.NewKey()}
		res, _ := sshexec.Run(ctx, c, "true")
		if res.Outcome != sshexec.AuthFailed || res.Hop != "bastion" {
			t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
		}
	})

	t.Run("the jump host forwards nowhere else", func(t *testing.T) {
		before := logins()
		c := cfg()
		c.Addr = "127.0.0.1:1"
		res, _ := sshexec.Run(ctx, c, "true")
		if res.Outcome != sshexec.DialFailed || res.Hop != "db-1" || !strings.Contains(res.Detail, "prohibited") {
			t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
		}
		wantLogins(t, before, 1, 0)
		if !bastion.WaitLog("to connect to host 127.0.0.1 port 1, but the request was denied", testkit.Patience) {
			t.Errorf("the bastion's log does not show the refusal")
		}
	})

	t.Run("the jump key opens no listener on the jump host", func(t *testing.T) {
		conn, err := net.Dial("tcp", bastionAddr)
		if err != nil {
			t.Fatal(err)
		}
		sc, chans, reqs, err := ssh.NewClientConn(conn, bastionAddr, &ssh.ClientConfig{User: bastion.User,
			Auth: []ssh.AuthMethod{ssh.PublicKeys(jumpKey)}, HostKeyCallback: ssh.FixedHostKey(bastion.HostKey)})
		if err != nil {
			t.Fatal(err)
		}
		client := ssh.NewClient(sc, chans, reqs)
		defer client.Close()
		if l, err := client.Listen("tcp", "127.0.0.1:0"); err == nil {
			l.Close()
			t.Error("the jump key opened a remote listener on the jump host")
		}
	})

	t.Run("the jump host never runs a session", func(t *testing.T) {
		if strings.Contains(bastion.Log(), "Starting session") {
			t.Errorf("the bastion started a session:\n%s", bastion.Log())
		}
	})

	t.Run("a deadline through the jump host kills the command", func(t *testing.T) {
		c := cfg()
		c.Timeout = 2 * time.Second
		res, _ := sshexec.Run(ctx, c, "sleep 60")
		if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Confirmed {
			t.Fatalf("outcome %v %v detail %q", res.Outcome, res.Termination, res.Detail)
		}
	})

	t.Run("a jump host that hangs mid-command does not hold the action", func(t *testing.T) {
		// The bastion's connection processes are stopped (SIGSTOP) once
		// the command runs: its TCP connection stays open, nothing moves.
		var stopped []int
		t.Cleanup(func() {
			for _, pid := range stopped {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		})
		c := cfg()
		c.Timeout, c.KillGrace = 2*time.Second, time.Second
		c.Started = func() {
			stopped = bastion.SessionProcesses()
			for _, pid := range stopped {
				syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		done := make(chan *sshexec.Result, 1)
		go func() { r, _ := sshexec.Run(ctx, c, "sleep 60"); done <- r }()
		select {
		case res := <-done:
			if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Unconfirmed {
				t.Errorf("outcome %v %v (%s), want timed_out, unconfirmed", res.Outcome, res.Termination, res.Detail)
			}
		case <-time.After(testkit.Patience):
			t.Fatal("Run did not return: a hung jump host holds the action past its deadline")
		}
	})

	t.Run("too many hops", func(t *testing.T) {
		c := cfg()
		for len(c.Via) <= sshexec.MaxHops {
			c.Via = append(c.Via, jump())
		}
		if _, err := sshexec.Run(ctx, c, "true"); !errors.Is(err, sshexec.ErrInvalidConfig) {
			t.Fatalf("err = %v, want ErrInvalidConfig", err)
		}
	})
}
