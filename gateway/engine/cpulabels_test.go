package engine

import (
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/auditchain"
)

// TestCPULabels: the engine, sshexec and the audit writer label CPU time
// under one key, and every phase an action goes through has its label,
// so that a profile's breakdown leaves no phase out.
func TestCPULabels(t *testing.T) {
	if key := auditchain.ProfileLabel; key != ProfileLabel {
		t.Errorf("the audit writer labels CPU under %q, the engine and sshexec under %q", key, ProfileLabel)
	}
	for _, name := range []string{phaseCheck, phaseRun, phasePolicy, phaseRequested, phaseApproval, phaseSlot, phaseIntent,
		phaseDial, phaseOutput, phaseResult, cpuAnswer, CPUHTTP} {
		if _, ok := cpuLabels[name]; !ok {
			t.Errorf("phase %q has no CPU label", name)
		}
	}
	// The goroutine profile shows each goroutine's labels.
	marked, hold := make(chan struct{}), make(chan struct{})
	go func() {
		SetCPUPhase(phaseSlot)
		(&phases{now: time.Now}).mark(phaseIntent)
		close(marked)
		<-hold
	}()
	<-marked
	defer close(hold)
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	want := fmt.Sprintf("# labels: {%q:%q}", ProfileLabel, phaseDial)
	if !strings.Contains(b.String(), want) {
		t.Errorf("after the intent is marked, no goroutine shows %s:\n%s", want, b.String())
	}
}
