package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// serviceInstall is a service-user install as docs/operators.md sets it
// up: state_dir and the key belong to the service user svc, the
// configuration to root (readable by all). It returns the configuration
// and the key file.
func serviceInstall(t *testing.T, svc string, extra string) (cfgFile, key string, uid, gid int) {
	t.Helper()
	uid, gid = testkit.LocalUser(t, svc, true)
	dir := sshtest.SafeDir(t)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	key = filepath.Join(dir, "deploy_ed25519")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{state, key} {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile = filepath.Join(dir, "airlock.hcl")
	src := fmt.Sprintf(`state_dir = %q
credential "deploy" {
  private_key_file = %q
%s}
target "t" {
  address   = "127.0.0.1:22"
  host_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko"]
  account "a" { credential = "deploy" }
}
`, state, key, extra)
	if err := os.WriteFile(cfgFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgFile, key, uid, gid
}

// config check run by root checks the files for the user the gateway runs
// as (the owner of state_dir): the service's own key passes, and a key
// only root could read is refused with the fix naming the service user,
// never "give it to root".
func TestConfigCheckAsRootChecksForTheServiceUser(t *testing.T) {
	const svc = "airlock-cc-svc"
	cfgFile, key, _, _ := serviceInstall(t, svc, "")
	code, stdout, stderr := runCLI(t, "config", "check", "--config", cfgFile)
	if code != 0 || !strings.Contains(stdout, "files checked for "+svc) {
		t.Fatalf("config check of a correct service-user install: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := os.Chown(key, 0, 0); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "config", "check", "--config", cfgFile)
	if code == 0 || !strings.Contains(stderr, "fix: chown "+svc+" "+key) {
		t.Errorf("config check of a key the service user cannot read: exit %d, stderr %q; want the fix chown %s %s", code, stderr, svc, key)
	}
	for _, bad := range []string{"chown 0 ", "chown root ", "securefile:", "config:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("config check says %q: %s", bad, stderr)
		}
	}
}

// config check run by hand as a user who cannot read a file says who ran
// it, whom the file belongs to and whom to run as — through the real
// binary, as that user.
func TestConfigCheckAsAnotherUserSaysWhomToRunAs(t *testing.T) {
	const svc = "airlock-cc-svc"
	cfgFile, key, uid, gid := serviceInstall(t, svc, "")
	if err := os.Chown(key, 0, 0); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(cfgFile), "airlock")
	b, err := os.ReadFile(gatewaytest.Binary(t, "airlock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups", bin, "config", "check", "--config", cfgFile)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("config check passed a key its user cannot read: %s", out)
	}
	msg := string(out)
	for _, want := range []string{
		key + " cannot be read by " + svc + " (uid " + strconv.Itoa(uid) + "), who runs this",
		"it belongs to root (uid 0)",
		"chown " + svc + " " + key,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("config check as %s: %q lacks %q", svc, msg, want)
		}
	}
	if strings.Contains(msg, "securefile:") || strings.Contains(msg, "config:") {
		t.Errorf("config check shows a package prefix: %s", msg)
	}
}

// A passphrase that systemd hands only to the service (LoadCredential=)
// cannot be read by a check run by hand: the message says so and where
// the check can read it.
func TestConfigCheckSystemdCredentialByHand(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	cfgFile, _, _, _ := serviceInstall(t, "airlock-cc-svc", "  passphrase_file = \"/run/credentials/airlock-test-none.service/deploy-pass\"\n")
	code, _, stderr := runCLI(t, "config", "check", "--config", cfgFile)
	if code == 0 || !strings.Contains(stderr, "passphrase_file") || !strings.Contains(stderr, "exists only inside the service") || !strings.Contains(stderr, "ExecStartPre") {
		t.Errorf("config check: exit %d: %s", code, stderr)
	}
}

// Two accounts of one target whose action policies name one log_file are
// warned of (airlock-action would refuse the account that did not create
// the file), with the accounts, the file and the fix; one account alone
// is not.
func TestConfigCheckWarnsOfASharedLogFile(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if _, err := sshtest.GenerateKeyFile(key, "ed25519", ""); err != nil {
		t.Fatal(err)
	}
	actionPolicy := filepath.Join(dir, "action.hcl")
	if err := os.WriteFile(actionPolicy, []byte("log_file = \"/var/log/airlock-action.log\"\nverb \"up\" {\n  argv = [\"/usr/bin/uptime\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	account := func(name string) string {
		return fmt.Sprintf("  account %q {\n    credential    = \"k\"\n    action_policy = %q\n  }\n", name, actionPolicy)
	}
	for _, tt := range []struct {
		name     string
		accounts string
		warned   bool
	}{
		{"one account", account("deploy"), false},
		{"two accounts", account("deploy") + account("backup"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfgFile := filepath.Join(t.TempDir(), "airlock.hcl")
			src := fmt.Sprintf("state_dir = %q\ncredential \"k\" { private_key_file = %q }\ntarget \"box\" {\n  address   = \"127.0.0.1:22\"\n  host_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKnQ7cBmrfILU8y0HCfFXb5n5bd2OoB25Bhz9wGtK6Ko\"]\n  default_account = \"deploy\"\n%s}\n",
				filepath.Join(dir, "state"), key, tt.accounts)
			if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := runCLI(t, "config", "check", "--config", cfgFile)
			want := `warning: target "box": accounts deploy, backup share log_file /var/log/airlock-action.log`
			if code != 0 || strings.Contains(stderr, want) != tt.warned || (tt.warned && !strings.Contains(stderr, "chmod 0660 /var/log/airlock-action.log")) {
				t.Errorf("config check: exit %d, stderr %q; want exit 0 and warned %v", code, stderr, tt.warned)
			}
		})
	}
}

// config check run by root checks the single sign-on client secret and
// the OPA token for the gateway's service user too: the service's own
// files pass, and files only root could read are refused with the fix
// naming the service user.
func TestConfigCheckAsRootChecksIdentityAndPolicyFilesForTheServiceUser(t *testing.T) {
	const svc = "airlock-cc-svc"
	cfgFile, key, uid, gid := serviceInstall(t, svc, "")
	dir := filepath.Dir(key)
	secret, token := filepath.Join(dir, "sso-client-secret"), filepath.Join(dir, "opa-token")
	for _, f := range []string{secret, token} {
		if err := os.WriteFile(f, []byte("s3cr3t-value\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	extra := fmt.Sprintf(`
listen { http = "127.0.0.1:0" }
sso {
  issuer             = "https://idp.example.com"
  client_id          = "airlock"
  client_secret_file = %q
  reviewer_groups    = ["airlock-reviewers"]
}
policy {
  opa_url        = "http://127.0.0.1:8181/v1/data/airlock/decision"
  opa_token_file = %q
}
`, secret, token)
	f, err := os.OpenFile(cfgFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, stdout, stderr := runCLI(t, "config", "check", "--config", cfgFile)
	if code != 0 {
		t.Fatalf("config check of the service user's own secret and token: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, f := range []string{secret, token} {
		if err := os.Chown(f, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = runCLI(t, "config", "check", "--config", cfgFile)
	for _, f := range []string{secret, token} {
		if code == 0 || !strings.Contains(stderr, "fix: chown "+svc+" "+f) {
			t.Errorf("config check of %s, which only root can read: exit %d, stderr %q; want the fix chown %s %s", f, code, stderr, svc, f)
		}
	}
}
