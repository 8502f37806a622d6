package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/batchenv"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// unitSettings reads the [Service] section's Key=Value lines; repeated
// keys keep every value.
func unitSettings(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[Service]":
			k, v, _ := strings.Cut(l, "=")
			out[k] = append(out[k], v)
		}
	}
	return out
}

func TestSystemdUnitHardening(t *testing.T) {
	t.Parallel()
	got := unitSettings(t, filepath.Join("systemd", "airlock.service"))
	want := map[string]string{
		"ExecStart":               "/usr/local/bin/airlock serve --config /etc/airlock/airlock.hcl",
		"ExecStartPre":            "/usr/local/bin/airlock config check --config /etc/airlock/airlock.hcl",
		"ExecReload":              "/usr/local/bin/airlock config reload --config /etc/airlock/airlock.hcl",
		"User":                    "airlock",
		"StateDirectory":          "airlock",
		"RuntimeDirectory":        "airlock",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"SystemCallFilter":        "@system-service",
		"CapabilityBoundingSet":   "",
		"RestrictSUIDSGID":        "yes",
		"MemoryDenyWriteExecute":  "yes",
		"UMask":                   "0077",
	}
	for k, v := range want {
		found := false
		for _, g := range got[k] {
			found = found || g == v
		}
		if !found {
			t.Errorf("%s=%s missing (have %q)", k, v, got[k])
		}
	}
	if len(got["LoadCredential"]) == 0 {
		t.Error("no LoadCredential= example")
	}
	// Settings that would break the gateway: peer credentials of local
	// callers and /proc of their processes.
	for _, k := range []string{"PrivateUsers", "ProtectProc", "DynamicUser"} {
		if len(got[k]) > 0 {
			t.Errorf("%s= is set: it would hide local callers from the gateway", k)
		}
	}
}

func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (apt-get install systemd); the unit is still checked by TestSystemdUnitHardening")
	}
	unit, err := os.ReadFile(filepath.Join("systemd", "airlock.service"))
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's program exists: stand one in.
	dir := t.TempDir()
	file := filepath.Join(dir, "airlock.service")
	if err := os.WriteFile(file, bytes.ReplaceAll(unit, []byte("/usr/local/bin/airlock "), []byte("/bin/true ")), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(analyze, "verify", "--man=no", file)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, stderr.String())
	}
	// The exposure score (0 best, 10 worst) stays low: fail above 2.5.
	out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=25", file).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Errorf("systemd-analyze security: %v: %s", err, lines[len(lines)-1])
	}
}

// targetConfig returns the shipped sshd snippet with its placeholders
// (account "deploy", the CA path) replaced.
func targetConfig(t *testing.T, account, caFile string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("sshd", "airlock-target.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, placeholder := range []string{"Match User deploy\n", "TrustedUserCAKeys /etc/ssh/airlock_ca.pub\n"} {
		if !strings.Contains(s, placeholder) {
			t.Fatalf("snippet lacks the documented placeholder %q", placeholder)
		}
	}
	s = strings.Replace(s, "Match User deploy\n", "Match User "+account+"\n", 1)
	s = strings.Replace(s, "TrustedUserCAKeys /etc/ssh/airlock_ca.pub\n", "TrustedUserCAKeys "+caFile+"\n", 1)
	return strings.Split(s, "\n")
}

// TestTargetSSHDConfig starts sshd with the shipped snippet (which
// sshtest checks with sshd -t first) and checks that it holds even for a
// key with no restrictions of its own.
func TestTargetSSHDConfig(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	user, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(caDir, "trusted_user_ca_keys") // written by TestMain
	s := sshtest.NewSSHD(t, sshtest.Options{Config: targetConfig(t, user, caFile)})
	key := s.ClientSigner // listed in authorized_keys with no options at all

	cfg := configFor(s, key)
	res, err := sshexec.Run(context.Background(), cfg, `cat "$SSH_USER_AUTH"`)
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v", err)
	}
	if want := "publickey " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))); !strings.HasPrefix(string(res.Stdout), want) {
		t.Errorf("SSH_USER_AUTH holds %q, want %q (ExposeAuthInfo)", res.Stdout, want)
	}
	// AcceptEnv: the command sees the gateway's fixed non-interactive
	// environment, every variable of it.
	for _, v := range batchenv.Vars() {
		res, err := sshexec.Run(context.Background(), cfg, `printf '%s' "$`+v.Name+`"`)
		if err != nil || !res.Success() || string(res.Stdout) != v.Value {
			t.Errorf("$%s is %q (%v), want %q (AcceptEnv)", v.Name, res.Stdout, err, v.Value)
		}
	}

	c, err := dial(s, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	assertNoPTY(t, c)
	assertNoForwarding(t, c)
	// MaxSessions 1: assertNoForwarding's session is closed; one more is
	// fine, a second at the same time is not.
	// sshd counts the earlier session until it has processed its close,
	// which may take a moment after the client closed it.
	var first *ssh.Session
	testkit.EventuallyErr(t, func() (err error) {
		first, err = c.NewSession()
		return err
	}, "a session once the earlier one is closed (MaxSessions 1)")
	defer first.Close()
	if second, err := c.NewSession(); err == nil {
		second.Close()
		t.Error("a second concurrent session was opened (MaxSessions 1)")
	}

	// The gateway CA is trusted for this account.
	cert, err := NewActionCert(sharedCA, CertRequest{ActionID: uniq(t, "snippet"), Account: user, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sshexec.Run(context.Background(), configFor(s, cert.Signer), "true"); err != nil || !r.Success() {
		t.Errorf("action certificate refused: %v", err)
	}
}

// TestTargetSSHDConfigScopesTheCA checks that the CA trusted in the Match
// block is trusted for that account only.
func TestTargetSSHDConfigScopesTheCA(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	user, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(caDir, "trusted_user_ca_keys")
	s := sshtest.NewSSHD(t, sshtest.Options{Config: targetConfig(t, "someone-else", caFile)})
	cert, err := NewActionCert(sharedCA, CertRequest{ActionID: uniq(t, "scoped"), Account: user, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sshexec.Run(context.Background(), configFor(s, cert.Signer), "true")
	var se *sshexec.Error
	if !errors.As(err, &se) || r.Outcome != sshexec.AuthFailed {
		t.Errorf("certificate for an account outside the Match block: %v, want auth_failed", err)
	}
}
