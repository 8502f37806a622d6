package engine

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// testPhases is a whole action's phases, as an approved run's action has
// them.
func testPhases() *phases {
	p := &phases{begun: time.Now(), now: time.Now}
	for _, n := range []string{phaseCheck, phaseRun, phasePolicy, phaseRequested, phaseApproval, phaseSlot, phaseIntent} {
		p.mark(n)
	}
	p.connection(time.Now(), sshexec.Timings{Dial: time.Millisecond, Handshake: 30 * time.Millisecond, Auth: 20 * time.Millisecond,
		Session: 40 * time.Millisecond, Command: 10 * time.Millisecond, Total: 101 * time.Millisecond})
	p.mark(phaseOutput)
	p.mark(phaseResult)
	return p
}

func TestPhasesAreContiguousAndTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	e := &core{metrics: newMetrics(), tracer: tp.Tracer("test")}
	p := testPhases()
	for i := 1; i < len(p.list); i++ {
		if p.list[i].start.Before(p.list[i-1].end) && p.list[i].name != phaseDial {
			t.Errorf("phase %s starts before %s ends", p.list[i].name, p.list[i-1].name)
		}
	}
	code := 0
	e.observe(p, api.Action{ID: "act_x", RunID: "run_y", Target: "t", Account: "a", Outcome: sshexec.Exited, ExitCode: &code})
	spans := exp.GetSpans()
	if len(spans) != len(p.list)+1 {
		t.Fatalf("%d spans, want %d", len(spans), len(p.list)+1)
	}
	root := spans[len(spans)-1]
	if root.Name != "airlock.action" {
		t.Fatalf("last span %q, want the action's", root.Name)
	}
	for _, s := range spans[:len(spans)-1] {
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("phase %s is not the action's child", s.Name)
		}
	}
}

// BenchmarkObserve is what timing an action's phases costs when it ends:
// impl=off (the histogram only: tracing not configured) beside impl=on
// (spans too, to an exporter that keeps nothing). An action takes tens of
// milliseconds; off must stay in microseconds.
func BenchmarkObserve(b *testing.B) {
	code := 0
	obj := api.Action{ID: "act_x", RunID: "run_y", Target: "t", Account: "a", Outcome: sshexec.Exited, ExitCode: &code}
	b.Run("impl=off", func(b *testing.B) {
		e := &core{metrics: newMetrics()}
		for b.Loop() {
			e.observe(testPhases(), obj)
		}
	})
	b.Run("impl=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
		defer tp.Shutdown(context.Background())
		e := &core{metrics: newMetrics(), tracer: tp.Tracer("bench")}
		for b.Loop() {
			e.observe(testPhases(), obj)
		}
	})
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
