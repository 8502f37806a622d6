package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
)

// A reviewer on a terminal without a browser logs in through the
// gateway's single sign-on with the device authorization grant of a real
// OpenID provider: airlock login --sso --reviewer NAME prints the
// gateway's page of the login and what it shows, the reviewer approves
// the code at the provider, the CLI saves the session, and the reviewer
// verbs use it without a password until airlock logout ends it at the
// gateway. A member of no reviewer group, a denied login, and a login
// approved by another reviewer than the one named get no session; a
// gateway whose operator has not turned device login on says so.
func TestReviewerLoginWithSingleSignOn(t *testing.T) {
	t.Parallel()
	p := idp.Start(t, idp.DeviceClient{ID: "airlock-cli", Secret: "cli secret"})
	p.AddUser("sofia", idp.User{Password: "sofia's idp password", Groups: []string{"airlock-reviewers"}})
	p.AddUser("olga", idp.User{Password: "olga's idp password", Groups: []string{"airlock-reviewers"}})
	p.AddUser("mallory", idp.User{Password: "mallory's idp password", Groups: []string{"staff"}})
	dir := t.TempDir()
	secret := filepath.Join(dir, "cli-secret")
	if err := os.WriteFile(secret, []byte("cli secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ssoBlock := func(deviceLogin string) string {
		return fmt.Sprintf(`
sso {
  issuer                    = %q
  client_id                 = "airlock-web"
  reviewer_groups           = ["airlock-reviewers"]
  ca_file                   = %q
  device_client_id          = "airlock-cli"
  device_client_secret_file = %q
  %s
}
`, p.Issuer, p.CAFile, secret, deviceLogin)
	}
	d := gatewaytest.NewDaemon(t, dir, gatewaytest.Config{StateDir: filepath.Join(dir, "state"), Extra: ssoBlock("device_login = true")}, gatewaytest.DaemonOptions{})
	sessionFile := filepath.Join(t.TempDir(), "session.json")
	env := append(os.Environ(), "AIRLOCK_URL="+d.HTTPURL, "AIRLOCK_SESSION_FILE="+sessionFile, "AIRLOCK_REVIEWER=", "AIRLOCK_CONFIG=")
	airlock := gatewaytest.Binary(t, "airlock")
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(airlock, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	login := func(as, user, password string, allow bool) (string, string, int) {
		t.Helper()
		return deviceLoginCLI(t, p, airlock, env, as, user, password, allow)
	}

	if _, errs, code := cli("approvals", "list"); code == 0 || !strings.Contains(errs, "airlock login") {
		t.Fatalf("approvals list before any login: exit %d: %s", code, errs)
	}
	if _, errs, code := cli("login"); code == 0 || !strings.Contains(errs, "--sso --reviewer NAME") {
		t.Errorf("airlock login naming no reviewer: exit %d: %s", code, errs)
	}
	out, said, code := login("sofia", "sofia", "sofia's idp password", true)
	if code != 0 || !strings.Contains(out, "as sofia until") {
		t.Fatalf("airlock login: exit %d: %s%s", code, out, said)
	}
	// It leads with the gateway's page and says what the page says; the
	// provider's page with the code in it is only behind the gateway's.
	page, code1 := strings.Index(said, d.HTTPURL+"/ui/device/"), strings.Index(said, "enter the code")
	if page < 0 || code1 < page || !strings.Contains(said, "for reviewer sofia, begun from 127.0.0.1") ||
		!strings.Contains(said, "Anyone who started it gets your reviewer session.") || strings.Contains(said, "user_code=") {
		t.Errorf("what airlock login --sso said:\n%s", said)
	}
	if fi, err := os.Stat(sessionFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the saved session: %v %v", fi, err)
	}
	if out, errs, code := cli("approvals", "list"); code != 0 {
		t.Errorf("approvals list with the saved session: exit %d: %s %s", code, out, errs)
	}
	if out, errs, code := cli("logout"); code != 0 || !strings.Contains(out, "logged out") {
		t.Fatalf("airlock logout: exit %d: %s %s", code, out, errs)
	}
	if _, err := os.Stat(sessionFile); !os.IsNotExist(err) {
		t.Errorf("the session file is still there after logout: %v", err)
	}
	if _, errs, code := cli("approvals", "list"); code == 0 || !strings.Contains(errs, "airlock login") {
		t.Errorf("approvals list after logout: exit %d: %s", code, errs)
	}

	out, said, code = login("sofia", "olga", "olga's idp password", true)
	if code == 0 || !strings.Contains(said, "approved at the identity provider as olga") {
		t.Errorf("a login for sofia approved by olga: exit %d: %s%s", code, out, said)
	}
	out, said, code = login("mallory", "mallory", "mallory's idp password", true)
	if code == 0 || !strings.Contains(said, "mallory is in none of the reviewer groups") {
		t.Errorf("a member of no reviewer group: exit %d: %s%s", code, out, said)
	}
	start := time.Now()
	out, said, code = login("sofia", "sofia", "sofia's idp password", false)
	if code == 0 || !strings.Contains(said, "denied") {
		t.Errorf("a denied device login: exit %d after %v: %s%s", code, time.Since(start), out, said)
	}
	if _, err := os.Stat(sessionFile); !os.IsNotExist(err) {
		t.Error("a refused login saved a session")
	}

	dir2 := t.TempDir()
	off := gatewaytest.NewDaemon(t, dir2, gatewaytest.Config{StateDir: filepath.Join(dir2, "state"), Extra: ssoBlock("")}, gatewaytest.DaemonOptions{})
	if _, errs, code := cli("login", "--sso", "--reviewer", "sofia", "--url", off.HTTPURL); code == 0 ||
		!strings.Contains(errs, "device login is off at this gateway") || !strings.Contains(errs, "device_login = true") {
		t.Errorf("airlock login --sso where device login is off: exit %d: %s", code, errs)
	}
}

// deviceLoginCLI runs airlock login --sso --reviewer as, lets user approve
// (or deny) the code it prints at the provider p, and returns what the
// CLI printed and its exit code.
func deviceLoginCLI(t *testing.T, p *idp.Provider, airlock string, env []string, as, user, password string, allow bool) (string, string, int) {
	t.Helper()
	cmd := exec.Command(airlock, "login", "--sso", "--reviewer", as)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		said.WriteString(sc.Text() + "\n")
		if m := deviceCodeRE.FindStringSubmatch(sc.Text()); m != nil {
			p.ApproveDevice(t, m[1], user, password, allow)
			break
		}
	}
	for sc.Scan() {
		said.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out.String(), said.String(), code
}

// deviceCodeRE finds the user code in what airlock login --sso prints.
var deviceCodeRE = regexp.MustCompile(`enter the code (\S+)\.`)
