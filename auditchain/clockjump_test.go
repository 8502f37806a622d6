package auditchain

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// settableClock is a wall clock a test can set back; it never moves on
// its own.
type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *settableClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Setting the system clock back while the gateway runs must neither hold
// off time-driven checkpoints (the interval is elapsed time) nor make the
// log look damaged; Verify reports the backward step for investigators.
func TestClockSetBack(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = -1
	o.CheckpointInterval = 50 * time.Millisecond
	clk := &settableClock{t: time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)}
	o.Now = clk.now
	l := openLog(t, o)
	ctx := context.Background()
	for i := range 3 {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	clk.jump(-2 * time.Hour)
	// The wall clock now reads two hours before the last checkpoint (if
	// one was signed yet); the interval must elapse all the same.
	ref, err := l.Append(ctx, sampleEntry(3))
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, func() error {
		if s := checkpointSizes(t, o); len(s) == 0 || s[len(s)-1] <= ref.Seq {
			return fmt.Errorf("checkpoint sizes %v", s)
		}
		return nil
	}, "no checkpoint covers entry %d, written after the clock was set back", ref.Seq)
	closeLog(t, l)
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify(t, o, v, trustedFile(t, o)...)
	if !rep.Intact() || rep.Uncovered != 0 {
		t.Fatalf("verify: intact %v, uncovered %d, damage %+v", rep.Intact(), rep.Uncovered, rep.Damage)
	}
	// Every entry before the jump, checkpoint entries included, has the
	// same time, and every one after it the time two hours earlier: one
	// step back, at ref or at a checkpoint entry signed just before it.
	got := rep.TimeSetBack
	if got == nil || got.Entries != 1 || got.Largest != 2*time.Hour || got.FirstSeq > ref.Seq || got.FirstSeq < 3 {
		t.Errorf("TimeSetBack = %+v, want one step back of 2h at seq 3..%d", got, ref.Seq)
	}
}

func TestVerifyReportsNoTimeSetBackForOrderedTimes(t *testing.T) {
	o := testOptions(t)
	v := buildLog(t, o, 20)
	if rep := verify(t, o, v); rep.TimeSetBack != nil {
		t.Errorf("TimeSetBack = %+v for a log whose times only go forward", rep.TimeSetBack)
	}
}
