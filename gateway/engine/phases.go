package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// Where an action's time goes. Each step of the lifecycle is timed as a
// phase; when the action ends, the phases go to the
// airlock_action_phase_seconds histogram and, with tracing configured, to
// one span per action with a child span per phase.
//
// The phases, in order (a phase the action did not reach is absent):
//
//	check      the request's checks and classification
//	run        finding the caller's run (the /proc walk for local callers)
//	policy     OPA and quotas
//	requested  the durable action.requested entry
//	approval   the approval check (or the wait for a reviewer)
//	slot       waiting for a connection slot on the target
//	intent     the durable action.connecting entry (and stdin stored)
//	dial, handshake, auth, session, command   the SSH connection (sshexec.Timings)
//	output     the outputs stored
//	result     the durable action.finished entry
//
// Phase names are fixed: dashboards and the benchmark report read them.
const (
	phaseCheck     = "check"
	phaseRun       = "run"
	phasePolicy    = "policy"
	phaseRequested = "requested"
	phaseApproval  = "approval"
	phaseSlot      = "slot"
	phaseIntent    = "intent"
	phaseDial      = "dial"
	phaseHandshake = "handshake"
	phaseAuth      = "auth"
	phaseSession   = "session"
	phaseCommand   = "command"
	phaseOutput    = "output"
	phaseResult    = "result"
)

// phase is one timed step.
type phase struct {
	name       string
	start, end time.Time
}

// phases are an action's timed steps, kept by its own goroutine.
type phases struct {
	begun time.Time
	list  []phase
	// now is the engine's clock.
	now func() time.Time
}

// mark ends the phase that began at the previous mark (or at begun) now,
// under name.
func (p *phases) mark(name string) {
	now := p.now()
	start := p.begun
	if n := len(p.list); n > 0 {
		start = p.list[n-1].end
	}
	p.list = append(p.list, phase{name, start, now})
	SetCPUPhase(cpuNext[name])
}

// connection adds the SSH connection's phases, laid end to end from start
// (sshexec reports durations).
func (p *phases) connection(start time.Time, t sshexec.Timings) {
	at := start
	for _, ph := range []struct {
		name string
		d    time.Duration
	}{{phaseDial, t.Dial}, {phaseHandshake, t.Handshake}, {phaseAuth, t.Auth}, {phaseSession, t.Session}, {phaseCommand, t.Command}} {
		if ph.d > 0 {
			p.list = append(p.list, phase{ph.name, at, at.Add(ph.d)})
			at = at.Add(ph.d)
		}
	}
	if end := start.Add(t.Total); end.After(at) && len(p.list) > 0 {
		p.list[len(p.list)-1].end = end // the rest of Run (closing) belongs to its last phase
	}
	SetCPUPhase(cpuNext[phaseCommand])
}

// observe sends the phases to the histogram and, when tracing is on, to a
// span. obj is the action as answered. Nothing of the command goes into a
// span: only ids, names the configuration chose, the class and the outcome.
func (e *core) observe(p *phases, obj api.Action) {
	for _, ph := range p.list {
		e.metrics.phase.WithLabelValues(ph.name).Observe(ph.end.Sub(ph.start).Seconds())
	}
	if e.tracer == nil {
		return
	}
	end := p.now()
	_, root := e.tracer.Start(context.Background(), "airlock.action", trace.WithTimestamp(p.begun),
		trace.WithSpanKind(trace.SpanKindServer))
	if !root.IsRecording() {
		root.End()
		return // not sampled
	}
	attrs := []attribute.KeyValue{
		attribute.String("airlock.action.id", obj.ID),
		attribute.String("airlock.run.id", obj.RunID),
		attribute.String("airlock.target", obj.Target),
		attribute.String("airlock.account", obj.Account),
		attribute.String("airlock.outcome", obj.Outcome.String()),
		attribute.String("airlock.approval.mode", string(obj.Approval.Mode)),
	}
	if obj.Class != "" {
		attrs = append(attrs, attribute.String("airlock.command.class", obj.Class))
	}
	if obj.ExitCode != nil {
		attrs = append(attrs, attribute.Int("airlock.exit_code", *obj.ExitCode))
	}
	root.SetAttributes(attrs...)
	if obj.Outcome != sshexec.Exited || obj.ExitCode == nil || *obj.ExitCode != 0 {
		root.SetStatus(codes.Error, obj.Outcome.String())
	}
	ctx := trace.ContextWithSpan(context.Background(), root)
	for _, ph := range p.list {
		_, s := e.tracer.Start(ctx, ph.name, trace.WithTimestamp(ph.start),
			trace.WithAttributes(attribute.String("airlock.action.id", obj.ID)))
		s.End(trace.WithTimestamp(ph.end))
	}
	root.End(trace.WithTimestamp(end))
}
