package engine

import (
	"testing"
	"time"
)

// Attempts in flight count against the budget before they are decided.
func TestLimiterReserve(t *testing.T) {
	l := newLimiter(nil)
	var dones []func(bool) []int
	for i := range l.max {
		done, ok := l.reserve("a", "b")
		if !ok {
			t.Fatalf("attempt %d refused within the budget", i)
		}
		dones = append(dones, done)
	}
	if _, ok := l.reserve("a"); ok {
		t.Fatal("an attempt past the budget was taken while the others were in flight")
	}
	if _, ok := l.reserve("c", "b"); ok {
		t.Fatal("an attempt sharing one full key was taken")
	}
	// Successes give their place back; failures keep it for the window.
	dones[0](false)
	if counts := dones[1](true); counts[0] != 1 || counts[1] != 1 {
		t.Errorf("a failure counts %v, want [1 1]", counts)
	}
	done, ok := l.reserve("a")
	if !ok {
		t.Fatal("a place freed by a success was not given back")
	}
	done(false)
	if _, ok := l.reserve("c"); !ok {
		t.Error("an unrelated key was refused")
	}
}

// The audit log takes a bounded number of auth.failed entries a window;
// the ones held back are counted on the next entry written.
func TestAuthLogBound(t *testing.T) {
	var a authLog
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range authFailedLimit {
		if s, ok := a.take(t0, time.Minute); !ok || s != 0 {
			t.Fatalf("entry %d: %d, %v", i, s, ok)
		}
	}
	for range 5 {
		if _, ok := a.take(t0.Add(time.Second), time.Minute); ok {
			t.Fatal("an entry past the bound was taken")
		}
	}
	if s, ok := a.take(t0.Add(time.Minute), time.Minute); !ok || s != 5 {
		t.Errorf("the next window's first entry: suppressed %d, %v; want 5, true", s, ok)
	}
	if s, _ := a.take(t0.Add(time.Minute), time.Minute); s != 0 {
		t.Errorf("the count rides on one entry only, got %d again", s)
	}
}
