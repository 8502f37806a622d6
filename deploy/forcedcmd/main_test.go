package forcedcmd

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// breakSetattr, in a supervisor's environment, makes its mount_setattr
// fail as a kernel older than 5.12 does (TestServeReadOnlyFailsClosed).
const breakSetattr = "FORCEDCMD_TEST_BREAK_MOUNT_SETATTR"

// TestMain lets the test binary stand in for airlock-action as the
// supervisor of the verbs the tests serve (Options.Reaper empty: this
// program, run with --reap).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "--reap" {
		if os.Getenv(breakSetattr) == "1" {
			mountSetattr = func(int, string, uint, *unix.MountAttr) error { return unix.ENOSYS }
		}
		os.Exit(ReapMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}
