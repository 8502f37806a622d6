package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/approvals/clocktest"
)

// Checks of one name sent all at once: the free ones pass at once, the
// next wait for slots spaced 1, 2, 4, 8 s apart, and one whose slot would
// be 31 s away is refused, saying when to try again.
func TestNameBudgetSpacesChecksSentAtOnce(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := newNameBudget(clk)
	var waits []time.Duration
	for range 9 {
		w, refused := b.reserve("rita")
		if refused != nil {
			t.Fatalf("check %d refused: %+v", len(waits)+1, refused)
		}
		waits = append(waits, w)
	}
	s := time.Second
	if diff := cmp.Diff([]time.Duration{0, 0, 0, 0, 0, 1 * s, 3 * s, 7 * s, 15 * s}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if _, refused := b.reserve("rita"); refused == nil || refused.After != 31*s {
		t.Errorf("the tenth check: %+v, want refused with 31 s to wait", refused)
	}
	if w, refused := b.reserve("sofia"); refused != nil || w != 0 {
		t.Errorf("another name: wait %v, %+v; want none", w, refused)
	}
}

// Checks of one name one after the other, each failing: the delay
// doubles with each failure up to 30 s, a check whose slot is more than
// 30 s away is refused, and after 15 minutes without a failure the name is
// free again.
func TestNameBudgetDelayGrowsWithFailures(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := newNameBudget(clk)
	var waits []time.Duration
	for range 12 {
		w, refused := b.reserve("rita")
		if refused != nil {
			t.Fatalf("check %d refused: %+v", len(waits)+1, refused)
		}
		waits = append(waits, w)
		clk.Advance(w)
		b.done("rita", true)
	}
	s := time.Second
	if diff := cmp.Diff([]time.Duration{0, 0, 0, 0, 0, 1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	// The next slot is 30 s away: one more check is held for it, the one
	// after is refused until then.
	if w, refused := b.reserve("rita"); refused != nil || w != 30*s {
		t.Fatalf("the 13th check: wait %v, %+v; want 30 s", w, refused)
	}
	_, refused := b.reserve("rita")
	if refused == nil || refused.After != 60*s || refused.Failures != 13 {
		t.Fatalf("a check past the 30 s horizon: %+v, want refused with 60 s to wait after 12 failures and one in flight", refused)
	}
	clk.Advance(30 * s)
	b.done("rita", false)
	clk.Advance(nameWindow)
	if w, refused := b.reserve("rita"); refused != nil || w != 0 {
		t.Errorf("after 15 minutes without a failure: wait %v, %+v; want none", w, refused)
	}
}

// The attempts held per name are capped, whatever the schedule allows.
func TestNameBudgetCapsWaiters(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := newNameBudget(clk)
	b.horizon, b.maxWaiters = time.Hour, 2
	for i := range b.free + 2 {
		if _, refused := b.reserve("rita"); refused != nil {
			t.Fatalf("check %d refused: %+v", i+1, refused)
		}
	}
	if _, refused := b.reserve("rita"); refused == nil {
		t.Error("a third waiter was held")
	}
}

// A check waiting for its slot ends with its request's context, and gives
// its place back; one whose slot comes is let through.
func TestNameBudgetWaitIsCancellable(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := newNameBudget(clk)
	for range b.free {
		done, err := b.take(context.Background(), "rita")
		if err != nil {
			t.Fatal(err)
		}
		done(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := b.take(ctx, "rita")
		res <- err
	}()
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	b.mu.Lock()
	inflight, waiting := b.names["rita"].inflight, b.names["rita"].waiting
	b.mu.Unlock()
	if inflight != 0 || waiting != 0 {
		t.Errorf("after a cancelled wait: %d in flight, %d waiting; want none", inflight, waiting)
	}
	go func() {
		done, err := b.take(context.Background(), "rita")
		if err == nil {
			done(false)
		}
		res <- err
	}()
	// The slot is 1 s after the cancelled one's, 2 s from now at most.
	for {
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("a wait whose slot came: %v", err)
			}
			return
		case <-time.After(10 * time.Millisecond):
			clk.Advance(500 * time.Millisecond)
		}
	}
}

// Run creation charges the address and the agent identity at once, and
// a spent budget charges neither.
func TestLimiterCharge(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l := newLimiter(clk)
	addr, agent := quota{"runs:192.0.2.1", 2}, quota{"runs-agent:agent:ci/x", 3}
	for i := range 2 {
		if spent, _ := l.charge(addr, agent); spent != -1 {
			t.Fatalf("use %d: quota %d spent", i+1, spent)
		}
		clk.Advance(10 * time.Second)
	}
	if spent, wait := l.charge(addr, agent); spent != 0 || wait != 40*time.Second {
		t.Errorf("past the address's budget: quota %d spent, %v to wait; want 0, 40s", spent, wait)
	}
	if spent, _ := l.charge(quota{"runs:192.0.2.2", 2}, agent); spent != -1 {
		t.Error("the refused use was charged to the agent")
	}
	if spent, wait := l.charge(quota{"runs:192.0.2.3", 2}, agent); spent != 1 || wait != 40*time.Second {
		t.Errorf("past the agent's budget: quota %d spent, %v to wait; want 1, 40s", spent, wait)
	}
}

func TestRetryAfter(t *testing.T) {
	err := refuseFor(1500*time.Millisecond, "wait")
	if !errors.Is(err, ErrRateLimited) || RetryAfter(err) != 2*time.Second {
		t.Errorf("%v: rate limited %v, retry after %v; want true, 2s", err, errors.Is(err, ErrRateLimited), RetryAfter(err))
	}
	if RetryAfter(refuse(ErrRateLimited, "wait")) != 0 {
		t.Error("a refusal that says nothing of when asks for a wait")
	}
}
