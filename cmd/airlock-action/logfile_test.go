package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Two accounts that share one policy share its log_file: the first to run
// creates it, and the second, refused, is told which file, which account
// and the fix — by the real binary, run as each account, and by --check
// before anything runs.
func TestSharedLogFileNamesTheFileTheAccountAndTheFix(t *testing.T) {
	e := sharedEnv(t)
	const one, two = "airlock-log-one", "airlock-log-two"
	uid1, gid1 := testkit.LocalUser(t, one, true)
	uid2, gid2 := testkit.LocalUser(t, two, true)
	dir := sshtest.SafeDir(t)
	logDir := filepath.Join(dir, "log")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A log directory both accounts may create files in, as an operator
	// who wants one log for both might make it.
	if err := os.Chmod(logDir, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(logDir, "action.log")
	pf := filepath.Join(dir, "action.hcl")
	if err := os.WriteFile(pf, []byte("log_file = \""+logFile+"\"\nverb \"hello\" {\n  argv = [\"/bin/echo\", \"hello\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	as := func(uid, gid int, args ...string) (string, error) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups", e.bin, "--policy", pf}, args...)...)
		cmd.Env = []string{"SSH_ORIGINAL_COMMAND=hello", "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := as(uid1, gid1); err != nil || out != "hello\n" {
		t.Fatalf("%s: %v: %q", one, err, out)
	}
	out, err := as(uid2, gid2)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 126 {
		t.Fatalf("%s with %s's log file: %v: %q; want exit 126", two, one, err, out)
	}
	check, cerr := as(uid2, gid2, "--check")
	if cerr == nil {
		t.Errorf("--check as %s passed: %q", two, check)
	}
	for name, msg := range map[string]string{"the refusal": out, "--check": check} {
		for _, want := range []string{
			"log_file " + logFile + " cannot be written by this account, " + two + " (uid " + strconv.Itoa(uid2) + ")",
			"it belongs to " + one + " (uid " + strconv.Itoa(uid1) + ")",
			"fix: give each account a policy with its own log_file",
			"chmod 0660 " + logFile,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", name, msg, want)
			}
		}
		t.Logf("%s: %s", name, msg)
		if strings.Contains(msg, "forcedcmd:") {
			t.Errorf("%s shows a package prefix: %q", name, msg)
		}
	}
}
