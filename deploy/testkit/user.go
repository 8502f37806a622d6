package testkit

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
)

// LocalUser creates the local user name for the test — a system account
// (useradd --system) when system — without a home or a login shell, and
// removes it when the test ends if it created it. It needs root: without
// it the test skips, or fails under CI=true.
func LocalUser(tb testing.TB, name string, system bool) (uid, gid int) {
	tb.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("creating the local user %s needs root", name)
		}
		tb.Skipf("creating the local user %s needs root: run the test as root", name)
	}
	if _, err := user.Lookup(name); err != nil {
		args := []string{"--no-create-home", "--shell", "/usr/sbin/nologin", name}
		if system {
			args = append([]string{"--system"}, args...)
		}
		if out, err := exec.Command("useradd", args...).CombinedOutput(); err != nil {
			// Another test process may have created it meanwhile.
			if _, lerr := user.Lookup(name); lerr != nil {
				tb.Fatalf("useradd %s: %v: %s", name, err, out)
			}
		} else {
			tb.Cleanup(func() { exec.Command("userdel", name).Run() })
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		tb.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}
