package main

import (
	"testing"

	"github.com/airlockgw/airlock/sshexec/outcome"
)

// TestExitCodes: by default every end but a remote status is 255, as ssh
// does; detailed, every outcome and every end of airlock-ssh's own has a
// code of its own in 200–254, and no remote status is ever one of those.
func TestExitCodes(t *testing.T) {
	own := map[string]int{"not run": endNotRun, "unknown": endUnknown, "output cut": endOutputCut,
		"input not sent": endInputNotSent, "file not written": endFileNotWritten}
	for _, o := range outcome.Outcomes() {
		if o != outcome.Exited {
			own[o.String()] = outcomeEnd(o)
		}
	}
	if n := len(outcome.Outcomes()); n > detailedOutcomes {
		t.Fatalf("%d outcomes, room for %d codes", n, detailedOutcomes)
	}
	codes := map[int]string{}
	for name, end := range own {
		if got := sshCodes.status(end); got != 255 {
			t.Errorf("ssh: %s exits %d, want 255", name, got)
		}
		got := detailedCodes.status(end)
		if got < detailedFirst || got > detailedLast || got == detailedInRange {
			t.Errorf("detailed: %s exits %d, outside %d-%d", name, got, detailedFirst, detailedLast-1)
		}
		if other, dup := codes[got]; dup {
			t.Errorf("detailed: %s and %s both exit %d", name, other, got)
		}
		codes[got] = name
	}
	for remote := range 256 {
		if got := sshCodes.status(remote); got != remote {
			t.Errorf("ssh: remote status %d exits %d", remote, got)
		}
		want := remote
		if remote >= 200 && remote <= 254 {
			want = detailedInRange
		}
		if got := detailedCodes.status(remote); got != want {
			t.Errorf("detailed: remote status %d exits %d, want %d", remote, got, want)
		}
	}
	// The codes the documentation names.
	for end, want := range map[int]int{outcomeEnd(outcome.Rejected): 201, outcomeEnd(outcome.AuthFailed): 210,
		outcomeEnd(outcome.TimedOut): 215, outcomeEnd(outcome.Interrupted): 218, endNotRun: 200, endUnknown: 250, endOutputCut: 251} {
		if got := detailedCodes.status(end); got != want {
			t.Errorf("detailed: %s exits %d, want %d", codes[got], got, want)
		}
	}
}
