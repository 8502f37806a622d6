package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestTargetBehindBastion runs actions on a target that only a bastion
// reaches: both are real sshds in a network namespace of their own, the
// bastion is exposed to the gateway, and its authorized_keys holds only the
// line `airlock deploy authorized-keys --jump-to` prints.
func TestTargetBehindBastion(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	ns := sshtest.NewNetNS(t)
	inner := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns})
	bastion := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns})
	bastionAddr := ns.Expose(t, bastion.Addr)
	line, err := deploy.AuthorizedKeysLine(bastion.ClientSigner.PublicKey(), deploy.LineOptions{Target: "bastion", Account: bastion.User, JumpTo: []string{inner.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bastion.AuthorizedKeysFile(), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	block := func(name, addr, via, hostKey, keyFile string) string {
		viaLine := ""
		if via != "" {
			viaLine = fmt.Sprintf("  via = %q\n", via)
		}
		return fmt.Sprintf(`credential %q { private_key_file = %q }
target %q {
  address = %q
%s  host_keys = [%q]
  account %q {
    credential = %q
    approval = "run"
  }
}
`, name+"-key", keyFile, name, addr, viaLine, hostKey, inner.User, name+"-key")
	}
	authorized := func(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }
	extra := block("bastion", bastionAddr, "", authorized(bastion.HostKey), bastion.ClientKeyFile) +
		block("db-1", inner.Addr, "bastion", authorized(inner.HostKey), inner.ClientKeyFile) +
		// The same host behind the bastion, pinned to a key it does not have.
		block("db-wrong", inner.Addr, "bastion", authorized(sshtest.NewKey().PublicKey()), inner.ClientKeyFile) +
		// A destination the bastion's line does not permit.
		block("db-other", "127.0.0.1:1", "bastion", authorized(inner.HostKey), inner.ClientKeyFile)
	g := startGateway(t, s, gwOptions{extraConfig: extra})
	ctx := context.Background()
	logins := func() [2]int { return [2]int{bastion.Accepted(), inner.Accepted()} }

	before := logins()
	res := g.runAsync(api.ActionRequest{Target: "db-1", Command: "echo from $(hostname) > /dev/null; echo inner"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "inner\n" {
		t.Fatalf("through the bastion: %v %+v", r.err, r.a)
	}
	if r.a.Hop != "" || r.a.HostKeyFingerprint != ssh.FingerprintSHA256(inner.HostKey) {
		t.Errorf("hop %q, fingerprint %s", r.a.Hop, r.a.HostKeyFingerprint)
	}
	if now := logins(); now[0]-before[0] != 1 || now[1]-before[1] != 1 {
		t.Errorf("logins for one action: bastion +%d, target +%d; want one each", now[0]-before[0], now[1]-before[1])
	}
	conn := g.auditEntries("action.connecting", r.a.ID)
	fin := g.auditEntries("action.finished", r.a.ID)
	if len(conn) != 1 || conn[0].Fields["via"] != inner.User+"@bastion "+bastionAddr {
		t.Errorf("action.connecting: %+v", conn)
	}
	if len(fin) != 1 || !strings.Contains(fmt.Sprint(fin[0].Fields["via_hops"]), ssh.FingerprintSHA256(bastion.HostKey)) ||
		fin[0].Fields["host_key_fingerprint"] != ssh.FingerprintSHA256(inner.HostKey) {
		t.Errorf("action.finished does not record both hops' host keys: %+v", fin)
	}

	// The inner host key is wrong: refused at that hop, nothing run.
	before = logins()
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "db-wrong", Command: "touch must-not-exist"}, api.Events{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != sshexec.HostKeyMismatch || a.Hop != "db-wrong" || a.Termination != sshexec.NotStarted {
		t.Fatalf("wrong inner key: outcome %s hop %q (%s)", a.Outcome, a.Hop, a.Detail)
	}
	if now := logins(); now[1] != before[1] {
		t.Errorf("the target was logged in to with a wrong host key")
	}
	if fin := g.auditEntries("action.finished", a.ID); len(fin) != 1 || fin[0].Fields["hop"] != "db-wrong" {
		t.Errorf("action.finished does not name the hop: %+v", fin)
	}

	// The bastion's line forwards to the permitted address only.
	a, err = g.agent.RunAction(ctx, api.ActionRequest{Target: "db-other", Command: "true"}, api.Events{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != sshexec.DialFailed || a.Hop != "db-other" || !strings.Contains(a.Detail, "jump host bastion") {
		t.Fatalf("unpermitted destination: outcome %s hop %q (%s)", a.Outcome, a.Hop, a.Detail)
	}
	if !bastion.WaitLog("to connect to host 127.0.0.1 port 1, but the request was denied", testkit.Patience) {
		t.Errorf("the bastion did not refuse the destination itself")
	}
	if strings.Contains(bastion.Log(), "Starting session") {
		t.Errorf("a session was started on the bastion")
	}
	g.verifyAudit()
}

// TestBastionWithGatewayCA: a jump account that logs in with per-action
// certificates. sshd grants forwarding to a certificate only when it
// carries permit-port-forwarding, so the hop's certificate has it (and no
// other extension); the route in action.connecting names the certificate.
func TestBastionWithGatewayCA(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	dir, state, caFile := gatewayCA(t)
	ns := sshtest.NewNetNS(t)
	inner := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns})
	bastion := sshtest.NewSSHD(t, sshtest.Options{NetNS: ns, Config: []string{"TrustedUserCAKeys " + caFile}})
	bastionAddr := ns.Expose(t, bastion.Addr)
	// Only the CA's certificates log in to the bastion.
	if err := os.WriteFile(bastion.AuthorizedKeysFile(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	authorized := func(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }
	cfg, err := config.Load(gatewaytest.Config{StateDir: state, HTTP: "127.0.0.1:0", CA: []string{"ca"},
		Credentials: map[string]string{"inner-key": inner.ClientKeyFile},
		Targets: []gatewaytest.Target{{Name: "bastion", Address: bastionAddr, HostKey: bastion.HostKey,
			Accounts: []gatewaytest.Account{{Name: bastion.User, Credential: "ca", Approval: "run"}}}},
		Extra: fmt.Sprintf(`target "db" {
  address   = %q
  via       = "bastion"
  host_keys = [%q]
  account %q {
    credential = "inner-key"
    approval   = "run"
  }
}
`, inner.Addr, authorized(inner.HostKey), inner.User),
	}.Write(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	g := runGateway(t, cfg, gwOptions{})
	res := g.runAsync(api.ActionRequest{Target: "db", Command: "echo through a certificate"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "through a certificate\n" {
		t.Fatalf("%v %+v", r.err, r.a)
	}
	conn := g.auditEntries("action.connecting", r.a.ID)
	if len(conn) != 1 || !strings.Contains(fmt.Sprint(conn[0].Fields["via"]), "(certificate airlock:"+r.a.ID) {
		t.Errorf("action.connecting does not name the hop's certificate: %+v", conn)
	}
	if !bastion.WaitLog("ID airlock:"+r.a.ID, testkit.Patience) {
		t.Errorf("the bastion's log does not name the action's certificate")
	}
	g.verifyAudit()
}

// gatewayCA makes a state directory with a gateway CA in a temporary
// directory, and a copy of its public key that sshd may read
// (TrustedUserCAKeys).
func gatewayCA(t *testing.T) (dir, state, caFile string) {
	t.Helper()
	dir = t.TempDir()
	state = filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	caPub, _, err := deploy.InitCA(filepath.Join(state, "keys", "ca"))
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pub")
	if err := os.WriteFile(caFile, []byte(deploy.CAPublicKeyLine(caPub)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, state, caFile
}
