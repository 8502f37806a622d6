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
	j := newJumpHosts(t)
	for _, tt := range jumpHostCases {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, j) })
	}
}

// jumpHostCases run one after another on the same two sshds.
var jumpHostCases = []struct {
	name string
	run  func(t *testing.T, j *jumpHosts)
}{
	{"the target is out of reach without the jump host", jumpOutOfReach},
	{"through the jump host", jumpThrough},
	{"two hops", jumpTwoHops},
	{"the inner host key is wrong", jumpInnerKeyWrong},
	{"the jump host's key is wrong", jumpBastionKeyWrong},
	{"the jump host refuses the credential", jumpCredentialRefused},
	{"the jump host forwards nowhere else", jumpForwardsNowhereElse},
	{"the jump key opens no listener on the jump host", jumpNoListener},
	{"the jump host never runs a session", jumpNoSession},
	{"a deadline through the jump host kills the command", jumpDeadline},
	{"a jump host that hangs mid-command does not hold the action", jumpHungBastion},
	{"too many hops", jumpTooManyHops},
}

// jumpHosts is a target sshd that only a jump host (bastion) can reach,
// both in a network namespace of their own.
type jumpHosts struct {
	inner, bastion *sshtest.SSHD
	bastionAddr    string     // where the test reaches the bastion
	jumpKey        ssh.Signer // the bastion lets it forward, nothing else
}

// newJumpHosts starts both sshds: the jump account has the sshd settings
// docs/operators.md gives, and its key may forward to the inner sshd and
// to the bastion itself (for a chain of two hops through it), nothing else.
func newJumpHosts(t *testing.T) *jumpHosts {
	t.Helper()
	sshtest.Need(t)
	ns := sshtest.NewNetNS(t)
	inner := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns})
	user, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	// Local forwarding only (port-forwarding in authorized_keys turns
	// remote forwarding on too).
	bastion := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns, Config: []string{"Match User " + user,
		"  AllowTcpForwarding local", "  PermitListen none", "  AllowStreamLocalForwarding no", "  AllowAgentForwarding no", "  X11Forwarding no", "  PermitTTY no"}})
	j := &jumpHosts{inner: inner, bastion: bastion, bastionAddr: ns.Expose(t, bastion.Addr), jumpKey: sshtest.NewKey()}
	line := fmt.Sprintf(`restrict,port-forwarding,permitopen="%s",permitopen="%s",command="/bin/false" %s`,
		inner.Addr, bastion.Addr, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(j.jumpKey.PublicKey()))))
	if err := bastion.Authorize(line); err != nil {
		t.Fatal(err)
	}
	return j
}

// jump is the bastion as a hop.
func (j *jumpHosts) jump() sshexec.Hop {
	return sshexec.Hop{Name: "bastion", Addr: j.bastionAddr, User: j.bastion.User, Signers: []ssh.Signer{j.jumpKey},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{j.bastion.HostKey}}}
}

// cfg reaches the inner sshd, named db-1, through the bastion.
func (j *jumpHosts) cfg() *sshexec.Config {
	c := configFor(j.inner)
	c.Name = "db-1"
	c.Via = []sshexec.Hop{j.jump()}
	return c
}

// logins counts the logins each sshd accepted: the bastion's, the inner's.
func (j *jumpHosts) logins() [2]int { return [2]int{j.bastion.Accepted(), j.inner.Accepted()} }

// wantLogins checks how many logins each sshd accepted since before.
func (j *jumpHosts) wantLogins(t *testing.T, before [2]int, dBastion, dInner int) {
	t.Helper()
	now := j.logins()
	if now[0]-before[0] != dBastion || now[1]-before[1] != dInner {
		t.Errorf("logins: bastion +%d, target +%d; want +%d, +%d", now[0]-before[0], now[1]-before[1], dBastion, dInner)
	}
}

func jumpOutOfReach(t *testing.T, j *jumpHosts) {
	res, _ := sshexec.Run(context.Background(), configFor(j.inner), "true")
	if res.Outcome != sshexec.DialFailed {
		t.Fatalf("direct: outcome %v (%s), want dial_failed", res.Outcome, res.Detail)
	}
}

func jumpThrough(t *testing.T, j *jumpHosts) {
	before := j.logins()
	c := j.cfg()
	c.Stdin = []byte("through\n")
	res, err := sshexec.Run(context.Background(), c, "cat; echo on $SSH_CONNECTION")
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %+v", err, res)
	}
	if !strings.HasPrefix(string(res.Stdout), "through\non ") {
		t.Errorf("stdout %q", res.Stdout)
	}
	if res.Hop != "" {
		t.Errorf("Hop = %q on success", res.Hop)
	}
	if res.HostKeyFingerprint != ssh.FingerprintSHA256(j.inner.HostKey) {
		t.Errorf("target fingerprint %s, want the inner sshd's", res.HostKeyFingerprint)
	}
	if len(res.Via) != 1 || res.Via[0].Name != "bastion" || res.Via[0].HostKeyFingerprint != ssh.FingerprintSHA256(j.bastion.HostKey) ||
		!strings.HasPrefix(res.Via[0].ServerVersion, "SSH-2.0-OpenSSH") {
		t.Errorf("Via = %+v", res.Via)
	}
	// One login per hop; the jump host's connection is gone too.
	j.wantLogins(t, before, 1, 1)
	if n := len(j.bastion.SessionProcesses()); n != 0 {
		t.Logf("bastion session processes still there: %d (they end with the connection)", n)
	}
}

func jumpTwoHops(t *testing.T, j *jumpHosts) {
	before := j.logins()
	c := j.cfg()
	second := j.jump()
	second.Name, second.Addr = "bastion-2", j.bastion.Addr
	c.Via = append(c.Via, second)
	res, err := sshexec.Run(context.Background(), c, "echo two")
	if err != nil || !res.Success() || string(res.Stdout) != "two\n" {
		t.Fatalf("Run: %v %+v", err, res)
	}
	if len(res.Via) != 2 || res.Via[1].Name != "bastion-2" {
		t.Errorf("Via = %+v", res.Via)
	}
	j.wantLogins(t, before, 2, 1)
}

func jumpInnerKeyWrong(t *testing.T, j *jumpHosts) {
	before := j.logins()
	c := j.cfg()
	c.HostKeys.Pinned = []ssh.PublicKey{sshtest.NewKey().PublicKey()}
	res, err := sshexec.Run(context.Background(), c, "touch /tmp/airlock-must-not-run")
	var se *sshexec.Error
	if !errors.As(err, &se) || res.Outcome != sshexec.HostKeyMismatch || res.Hop != "db-1" || res.Termination != sshexec.NotStarted {
		t.Fatalf("outcome %v hop %q (%v), want host_key_mismatch at db-1", res.Outcome, res.Hop, err)
	}
	if res.HostKeyFingerprint != ssh.FingerprintSHA256(j.inner.HostKey) || len(res.Via) != 1 {
		t.Errorf("facts: %s %+v", res.HostKeyFingerprint, res.Via)
	}
	j.wantLogins(t, before, 1, 0)
}

func jumpBastionKeyWrong(t *testing.T, j *jumpHosts) {
	before := j.logins()
	c := j.cfg()
	c.Via[0].HostKeys.Pinned = []ssh.PublicKey{sshtest.NewKey().PublicKey()}
	res, _ := sshexec.Run(context.Background(), c, "true")
	if res.Outcome != sshexec.HostKeyMismatch || res.Hop != "bastion" || !strings.Contains(res.Detail, "jump host bastion") {
		t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
	}
	if res.HostKeyFingerprint != "" || len(res.Via) != 1 || res.Via[0].HostKeyFingerprint != ssh.FingerprintSHA256(j.bastion.HostKey) {
		t.Errorf("facts: target %q, via %+v", res.HostKeyFingerprint, res.Via)
	}
	j.wantLogins(t, before, 0, 0)
}

func jumpCredentialRefused(t *testing.T, j *jumpHosts) {
	c := j.cfg()
	c.Via[0].Signers = []ssh.Signer{sshtest.NewKey()}
	res, _ := sshexec.Run(context.Background(), c, "true")
	if res.Outcome != sshexec.AuthFailed || res.Hop != "bastion" {
		t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
	}
}

func jumpForwardsNowhereElse(t *testing.T, j *jumpHosts) {
	before := j.logins()
	c := j.cfg()
	c.Addr = "127.0.0.1:1"
	res, _ := sshexec.Run(context.Background(), c, "true")
	if res.Outcome != sshexec.DialFailed || res.Hop != "db-1" || !strings.Contains(res.Detail, "prohibited") {
		t.Fatalf("outcome %v hop %q detail %q", res.Outcome, res.Hop, res.Detail)
	}
	j.wantLogins(t, before, 1, 0)
	if !j.bastion.WaitLog("to connect to host 127.0.0.1 port 1, but the request was denied", testkit.Patience) {
		t.Errorf("the bastion's log does not show the refusal")
	}
}

func jumpNoListener(t *testing.T, j *jumpHosts) {
	conn, err := net.Dial("tcp", j.bastionAddr)
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, j.bastionAddr, &ssh.ClientConfig{User: j.bastion.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(j.jumpKey)}, HostKeyCallback: ssh.FixedHostKey(j.bastion.HostKey)})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	if l, err := client.Listen("tcp", "127.0.0.1:0"); err == nil {
		l.Close()
		t.Error("the jump key opened a remote listener on the jump host")
	}
}

func jumpNoSession(t *testing.T, j *jumpHosts) {
	if strings.Contains(j.bastion.Log(), "Starting session") {
		t.Errorf("the bastion started a session:\n%s", j.bastion.Log())
	}
}

func jumpDeadline(t *testing.T, j *jumpHosts) {
	c := j.cfg()
	c.Timeout = 2 * time.Second
	res, _ := sshexec.Run(context.Background(), c, "sleep 60")
	if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Confirmed {
		t.Fatalf("outcome %v %v detail %q", res.Outcome, res.Termination, res.Detail)
	}
}

func jumpHungBastion(t *testing.T, j *jumpHosts) {
	// The bastion's connection processes are stopped (SIGSTOP) once
	// the command runs: its TCP connection stays open, nothing moves.
	var stopped []int
	t.Cleanup(func() {
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	c := j.cfg()
	c.Timeout, c.KillGrace = 2*time.Second, time.Second
	c.Started = func() {
		stopped = j.bastion.SessionProcesses()
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
	done := make(chan *sshexec.Result, 1)
	go func() { r, _ := sshexec.Run(context.Background(), c, "sleep 60"); done <- r }()
	select {
	case res := <-done:
		if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Unconfirmed {
			t.Errorf("outcome %v %v (%s), want timed_out, unconfirmed", res.Outcome, res.Termination, res.Detail)
		}
	case <-time.After(testkit.Patience):
		t.Fatal("Run did not return: a hung jump host holds the action past its deadline")
	}
}

func jumpTooManyHops(t *testing.T, j *jumpHosts) {
	c := j.cfg()
	for len(c.Via) <= sshexec.MaxHops {
		c.Via = append(c.Via, j.jump())
	}
	if _, err := sshexec.Run(context.Background(), c, "true"); !errors.Is(err, sshexec.ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
}
