package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestAdminVerbs walks an operator's path: CA, authorized_keys line and
// its installation, scanning and pinning a host key, against a real sshd.
func TestAdminVerbs(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.hcl")
	src := fmt.Sprintf(`state_dir = %q
credential "key" {
  private_key_file = %q
}
credential "ca" {
  ca = true
}
target "box" {
  address = %q
  account %q {
    credential = "key"
  }
  account "certs" {
    credential = "ca"
  }
}
target "db-1" {
  address = "10.0.0.5"
  via     = "%[4]s@box"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "app" { credential = "key" }
}
target "db-2" {
  address = "db-2.internal:2222"
  via     = "%[4]s@box"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "app" { credential = "key" }
}
`, filepath.Join(dir, "state"), s.ClientKeyFile, s.Addr, s.User)
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not pinned yet: the gateway refuses this configuration.
	if _, err := config.Load(cfgFile); err == nil {
		t.Fatal("a target without host keys was accepted")
	}

	code, caLine, errs := runCLI(t, "ca", "init", "--config", cfgFile)
	if code != 0 || !strings.HasPrefix(caLine, "ssh-ed25519 ") {
		t.Fatalf("ca init: %d %q %s", code, caLine, errs)
	}
	if code, again, _ := runCLI(t, "ca", "init", "--config", cfgFile); code != 0 || again != caLine {
		t.Errorf("a second ca init changed the CA: %q vs %q", again, caLine)
	}
	if code, pub, _ := runCLI(t, "ca", "public-key", "--config", cfgFile); code != 0 || pub != caLine {
		t.Errorf("ca public-key = %q, want %q", pub, caLine)
	}

	code, line, errs := runCLI(t, "deploy", "authorized-keys", "--config", cfgFile, "--target", "box", "--account", s.User,
		"--command", "/usr/local/bin/airlock-action --policy /etc/airlock/action.hcl", "--from", "10.0.0.0/8")
	line = strings.TrimSpace(line)
	if code != 0 || !strings.HasPrefix(line, "restrict,") || !strings.HasSuffix(line, "airlock:box/"+s.User) ||
		!strings.Contains(line, `command="/usr/local/bin/airlock-action --policy /etc/airlock/action.hcl"`) || !strings.Contains(line, `from="10.0.0.0/8"`) {
		t.Fatalf("deploy authorized-keys: %d %q %s", code, line, errs)
	}
	if code, cert, _ := runCLI(t, "deploy", "authorized-keys", "--config", cfgFile, "--target", "box", "--account", "certs"); code != 0 || !strings.Contains(cert, "cert-authority") {
		t.Errorf("CA account line: %q", cert)
	}
	// The bastion's line: forwarding to its inner targets only.
	code, jump, errs := runCLI(t, "deploy", "authorized-keys", "--config", cfgFile, "--target", "box", "--jump-to", "db-1,db-2")
	if want := `restrict,port-forwarding,permitopen="10.0.0.5:22",permitopen="db-2.internal:2222",command="/bin/false" `; code != 0 ||
		!strings.HasPrefix(jump, want) || !strings.HasSuffix(strings.TrimSpace(jump), "airlock:box/"+s.User) {
		t.Errorf("deploy authorized-keys --jump-to: %d %q %s", code, jump, errs)
	}
	for _, bad := range [][]string{{"--jump-to", "box"}, {"--jump-to", "db-1", "--account", "certs"}, {"--jump-to", "db-1", "--command", "/bin/sh"}, {"--jump-to", "nope"}} {
		if code, out, errs := runCLI(t, append([]string{"deploy", "authorized-keys", "--config", cfgFile, "--target", "box"}, bad...)...); code == 0 || errs == "" {
			t.Errorf("deploy authorized-keys %v: %d %q", bad, code, out)
		}
	}
	// Where sshd's StrictModes would read it (not under /tmp).
	ak := filepath.Join(sshtest.SafeDir(t), "authorized_keys")
	os.WriteFile(ak, []byte("# keep me\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko other\n"), 0o600)
	for i, want := range []string{"added", "unchanged"} {
		code, out, errs := runCLI(t, "deploy", "install", "--authorized-keys", ak, "--line", line)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("install #%d: %d %q %s, want %s", i, code, out, errs, want)
		}
	}
	if code, out, _ := runCLI(t, "deploy", "install", "--authorized-keys", ak, "--line", line, "--remove"); code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("remove: %q", out)
	}
	if b, _ := os.ReadFile(ak); !strings.Contains(string(b), "# keep me") || !strings.Contains(string(b), " other\n") {
		t.Errorf("install touched lines it did not write:\n%s", b)
	}

	code, scan, errs := runCLI(t, "hosts", "scan", s.Addr)
	fp := ssh.FingerprintSHA256(s.HostKey)
	if code != 0 || !strings.Contains(scan, fp) {
		t.Fatalf("hosts scan: %d %q %s (want %s)", code, scan, errs, fp)
	}
	if code, _, errs := runCLI(t, "hosts", "pin", "box", "--config", cfgFile, "--fingerprint", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"); code == 0 || !strings.Contains(errs, "does not offer that key") {
		t.Errorf("pinning a fingerprint the server does not offer: exit %d: %s", code, errs)
	}
	if code, out, errs := runCLI(t, "hosts", "pin", "box", "--config", cfgFile, "--fingerprint", fp); code != 0 {
		t.Fatalf("hosts pin: %d %q %s", code, out, errs)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatalf("after pinning, the configuration does not load: %v", err)
	}
	if k := cfg.Targets["box"].HostKeys; len(k) != 1 || ssh.FingerprintSHA256(k[0]) != fp {
		t.Errorf("pinned keys: %v", k)
	}
}

// A malformed fingerprint is refused before the target is contacted, and
// without the warning meant for a key the server does not offer.
func TestHostsPinMalformedFingerprint(t *testing.T) {
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.hcl")
	src := fmt.Sprintf("state_dir = %q\ntarget \"box\" {\n  address = %q\n}\n", filepath.Join(dir, "state"), l.Addr().String())
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{
		"EIYRAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", // no SHA256: prefix
		"SHA256:EIYR",
		"MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48",
	} {
		t.Run(fp, func(t *testing.T) {
			code, _, errs := runCLI(t, "hosts", "pin", "box", "--config", cfgFile, "--fingerprint", fp)
			if code == 0 || !strings.Contains(errs, "SHA256:AbC") || strings.Contains(errs, "does not offer") {
				t.Errorf("exit %d, stderr %q; want a refusal that shows the fingerprint's form", code, errs)
			}
		})
	}
	l.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the target was contacted for a malformed fingerprint")
	}
}

// config check warns of a webhook secret the gateway could not use, and
// still exits 0: the gateway starts, with notifications off (and the
// systemd unit runs the check before every start).
func TestConfigCheckNotifySecret(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Skip(err)
	}
	secret := filepath.Join(dir, "hook-secret")
	cfgFile := filepath.Join(dir, "airlock.hcl")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`state_dir = %q
notify {
  url         = "https://hooks.example.com/airlock"
  secret_file = %q
}
credential "k" { private_key_file = %q }
target "t" {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" { credential = "k" }
}
`, filepath.Join(dir, "state"), secret, key)), 0o600)
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		warned  bool
	}{
		{"missing", "", 0, true},
		{"world-readable", "s3cret", 0o644, true},
		{"empty", "\n", 0o600, true},
		{"good", "s3cret\n", 0o600, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(secret)
			if tt.mode != 0 {
				os.WriteFile(secret, []byte(tt.content), 0o600)
				os.Chmod(secret, tt.mode)
			}
			code, _, stderr := runCLI(t, "config", "check", "--config", cfgFile)
			warned := strings.Contains(stderr, "warning: notify.secret_file") && strings.Contains(stderr, "notifications would be off")
			if code != 0 || warned != tt.warned {
				t.Errorf("config check: exit %d, warned %v, want exit 0 and warned %v: %s", code, warned, tt.warned, stderr)
			}
		})
	}
}

// config check reads every secret block's value as the gateway would, and
// fails for one it could not use, naming the file but never the value.
func TestConfigCheckSecrets(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Skip(err)
	}
	secret := filepath.Join(dir, "db")
	cfgFile := filepath.Join(dir, "airlock.hcl")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`state_dir = %q
credential "k" { private_key_file = %q }
target "t" {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" { credential = "k" }
}
secret "db" {
  file     = %q
  accounts = ["t/a"]
}
secret "from-systemd" {
  systemd_credential = "db"
  accounts = ["t"]
}
`, filepath.Join(dir, "state"), key, secret)), 0o600)
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		creds   bool
		want    string
	}{
		{"missing", "", 0, true, "no such file"},
		{"world-readable", "longer-secret\n", 0o644, true, "readable"},
		{"too short", "abc\n", 0o600, true, "too short"},
		{"not under systemd", "longer-secret\n", 0o600, false, "CREDENTIALS_DIRECTORY is not set"},
		{"good", "longer-secret\n", 0o600, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(secret)
			if tt.mode != 0 {
				os.WriteFile(secret, []byte(tt.content), 0o600)
				os.Chmod(secret, tt.mode)
			}
			// The systemd credential is the same file, as LoadCredential=
			// would place it.
			env := ""
			if tt.creds {
				env = dir
			}
			t.Setenv("CREDENTIALS_DIRECTORY", env)
			code, _, stderr := runCLI(t, "config", "check", "--config", cfgFile)
			if (tt.want == "") != (code == 0) || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "longer-secret") {
				t.Errorf("config check: exit %d: %s; want %q", code, stderr, tt.want)
			}
		})
	}
}

// config check reads the policy block's OPA files and the accounts' action
// policies as the gateway would.
func TestConfigCheckPolicyFiles(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Skip(err)
	}
	token, actionPolicy := filepath.Join(dir, "opa.token"), filepath.Join(dir, "action.hcl")
	cfgFile := filepath.Join(dir, "airlock.hcl")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`state_dir = %q
credential "k" { private_key_file = %q }
target "t" {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" {
    credential    = "k"
    action_policy = %q
  }
}
policy {
  opa_url        = "http://127.0.0.1:8181/v1/data/airlock/decision"
  opa_token_file = %q
}
`, filepath.Join(dir, "state"), key, actionPolicy, token)), 0o600)
	code, _, stderr := runCLI(t, "config", "check", "--config", cfgFile)
	if code == 0 || !strings.Contains(stderr, "action_policy") {
		t.Errorf("a missing action policy: exit %d: %s", code, stderr)
	}
	os.WriteFile(actionPolicy, []byte("verb \"up\" {\n  argv  = [\"/usr/bin/uptime\"]\n  class = \"read_only\"\n}\n"), 0o644)
	code, _, stderr = runCLI(t, "config", "check", "--config", cfgFile)
	if code == 0 || !strings.Contains(stderr, "token_file") {
		t.Errorf("a missing OPA token: exit %d: %s", code, stderr)
	}
	os.WriteFile(token, []byte("s3cr3t-token\n"), 0o600)
	if code, _, stderr = runCLI(t, "config", "check", "--config", cfgFile); code != 0 || strings.Contains(stderr, "s3cr3t") {
		t.Errorf("good files: exit %d: %s", code, stderr)
	}
}

// config check counts what it found in words that agree with the number.
func TestConfigCheckCounts(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Skip(err)
	}
	target := func(name string) string {
		return fmt.Sprintf(`target %q {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" { credential = "k" }
}
`, name)
	}
	for _, tt := range []struct {
		name  string
		extra string
		want  string
	}{
		{"one of each", "", "(1 target, 1 credential, "},
		{"two of each", target("t2") + fmt.Sprintf("credential \"k2\" { private_key_file = %q }\n", key), "(2 targets, 2 credentials, "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfgFile := filepath.Join(t.TempDir(), "airlock.hcl")
			src := fmt.Sprintf("state_dir = %q\ncredential \"k\" { private_key_file = %q }\n", filepath.Join(dir, "state"), key) + target("t") + tt.extra
			if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runCLI(t, "config", "check", "--config", cfgFile)
			if code != 0 || !strings.Contains(stdout, tt.want) {
				t.Errorf("config check: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// config check loads the gateway CA as serve would, and warns of CA
// certificates that force no command.
func TestConfigCheckCA(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.hcl")
	write := func(force string) {
		src := fmt.Sprintf(`state_dir = %q
credential "ca" {
  ca = true
  %s
}
target "t" {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" { credential = "ca" }
}
`, filepath.Join(dir, "state"), force)
		if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	if code, _, errs := runCLI(t, "config", "check", "--config", cfgFile); code == 0 || !strings.Contains(errs, "there is none yet") || !strings.Contains(errs, "airlock ca init") {
		t.Errorf("before ca init: exit %d, stderr %q; want the missing CA reported", code, errs)
	}
	if code, _, errs := runCLI(t, "ca", "init", "--config", cfgFile); code != 0 || !regexp.MustCompile(`fingerprint: SHA256:[A-Za-z0-9+/]{43}`).MatchString(errs) {
		t.Fatalf("ca init (and the fingerprint to check out of band): %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "config", "check", "--config", cfgFile); code != 0 || !strings.Contains(errs, "warning: credential \"ca\": certificates carry no force_command") {
		t.Errorf("CA without force_command: exit %d, stderr %q; want exit 0 and a warning", code, errs)
	}
	write(`force_command = "/usr/local/bin/airlock-action"`)
	if code, _, errs := runCLI(t, "config", "check", "--config", cfgFile); code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("CA with force_command: exit %d, stderr %q; want no warning", code, errs)
	}
	if err := os.Chmod(filepath.Join(dir, "state", "keys", "ca"), 0o640); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "config", "check", "--config", cfgFile); code == 0 || !strings.Contains(errs, "cannot be used") || strings.Contains(errs, "ca init") {
		t.Errorf("CA readable by group: exit %d, stderr %q; want the file refused, without suggesting ca init", code, errs)
	}
}

// config check reads the files the identity blocks name as the gateway
// does at its start: a missing issuer CA, an exposed client secret and a
// client CA file without a certificate each stop it, named.
func TestConfigCheckIdentityFiles(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "airlock.hcl")
	secret := filepath.Join(dir, "sso-secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "clients.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`state_dir = %q
listen {
  tls_cert       = "/nonexistent/tls.crt"
  tls_key        = "/nonexistent/tls.key"
  client_ca_file = %q
}
agent "ci" {
  oidc {
    issuer   = "https://token.actions.githubusercontent.com"
    audience = "airlock"
    ca_file  = %q
  }
}
sso {
  issuer             = "https://idp.example.com"
  client_id          = "airlock"
  client_secret_file = %q
  reviewer_groups    = ["airlock-reviewers"]
}
`, filepath.Join(dir, "state"), notPEM, filepath.Join(dir, "missing-ca.pem"), secret)
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "config", "check", "--config", cfgFile)
	for _, want := range []string{`agent "ci": oidc.ca_file`, "sso.client_secret_file", "listen.client_ca_file", "3 problems"} {
		if !strings.Contains(errs, want) {
			t.Errorf("config check does not say %q", want)
		}
	}
	if code == 0 {
		t.Errorf("config check passed:\n%s", errs)
	}
}

// deploy install into a sticky directory everyone may write (as /tmp is,
// by design) tells the operator to move the file, never to chmod the
// directory.
func TestDeployInstallInAStickyDirectory(t *testing.T) {
	dir := filepath.Join(sshtest.SafeDir(t), "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	ak := filepath.Join(dir, "authorized_keys")
	line := "restrict,command=\"/usr/local/bin/airlock-action\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko airlock:box/deploy"
	code, _, stderr := runCLI(t, "deploy", "install", "--authorized-keys", ak, "--line", line)
	if code == 0 || !strings.Contains(stderr, "move "+ak+" out of "+dir+", into a directory that only root or its owner can write") || !strings.Contains(stderr, "mode 1777") {
		t.Errorf("deploy install into %s (1777): exit %d: %s", dir, code, stderr)
	}
	if strings.Contains(stderr, "chmod go-w "+dir) || strings.Contains(stderr, "deploy:") {
		t.Errorf("deploy install advises chmod of a sticky directory, or shows a package prefix: %s", stderr)
	}
}
