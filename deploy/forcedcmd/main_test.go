package forcedcmd

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for airlock-action as the
// supervisor of the verbs the tests serve (Options.Reaper empty: this
// program, run with --reap).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "--reap" {
		os.Exit(ReapMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}
