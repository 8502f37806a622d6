package engine

import (
	"context"
	"runtime/pprof"

	"github.com/airlockgw/airlock/sshexec"
)

// Where an action's CPU goes. The phases above time an action; a CPU
// profile of the gateway tells where its processor time goes only by
// function. So each goroutine that works for an action carries the pprof
// label ProfileLabel, set to the phase it is in: a profile taken through
// telemetry.pprof_listen then sums its samples per phase (`go tool pprof
// -tagfocus`, or the benchmark report's CPU breakdown). A goroutine
// inherits its creator's labels, so the SSH connection's own goroutines
// count under the phase that opened them.
//
// Labels cost nothing per action beyond storing a pointer: each phase's
// labelled context is made once. The key is sshexec's, which labels the
// connection's phases.
const ProfileLabel = sshexec.ProfileLabel

// Phases that have a CPU label and no timed phase of their own.
const (
	// CPUHTTP is a request's HTTP handling: reading and checking it,
	// identifying the caller, and the answer's events written back.
	CPUHTTP = "http"
	// cpuAnswer is the action's goroutine after its result entry: the
	// outcome published and its resources given back.
	cpuAnswer = "answer"
)

// cpuNext is the phase an action's goroutine enters when the phase named
// is marked ended (phases.mark). The SSH connection's phases are set by
// sshexec itself, with the same label.
var cpuNext = map[string]string{
	phaseCheck:     phaseRun,
	phaseRun:       phasePolicy,
	phasePolicy:    phaseRequested,
	phaseRequested: phaseApproval,
	phaseApproval:  phaseSlot,
	phaseSlot:      phaseIntent,
	phaseIntent:    phaseDial,
	phaseCommand:   phaseOutput,
	phaseOutput:    phaseResult,
	phaseResult:    cpuAnswer,
}

// cpuLabels holds each phase's labelled context.
var cpuLabels = func() map[string]context.Context {
	m := map[string]context.Context{}
	add := func(name string) {
		m[name] = pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, name))
	}
	for from, to := range cpuNext {
		add(from)
		add(to)
	}
	add(CPUHTTP)
	return m
}()

// SetCPUPhase labels the calling goroutine's CPU time as phase's (one of
// the phase names, or CPUHTTP); an unknown name leaves its label as it
// is.
func SetCPUPhase(phase string) {
	if ctx, ok := cpuLabels[phase]; ok {
		pprof.SetGoroutineLabels(ctx)
	}
}
