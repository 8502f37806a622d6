// Package clocktest provides a fake approvals.Clock for tests: its wall
// time and its monotonic time move only when the test says so, and they
// move separately, so a test can set the system clock back or forward
// (Jump) without any time passing, or let time pass (Advance).
package clocktest

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Fake is a clock whose time moves only when a test says so. Its zero
// value is not usable; call New.
type Fake struct {
	mu     sync.Mutex
	wall   time.Time     // what Now returns: the system clock
	mono   time.Duration // what Elapsed returns: time that really passed
	timers []*timer
}

type timer struct {
	at      time.Duration // on the monotonic clock
	f       func()
	stopped bool
}

// New returns a Fake whose wall clock reads start and whose monotonic
// clock reads zero.
func New(start time.Time) *Fake {
	return &Fake{wall: start}
}

// Now returns the wall-clock time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Elapsed returns the monotonic time: how much time Advance has let pass.
func (c *Fake) Elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// AfterFunc schedules f to run once d has passed on the monotonic clock,
// as timers do: setting the wall clock (Jump) does not move them.
func (c *Fake) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{at: c.mono + max(d, 0), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Jump sets the wall clock by d (negative: back) without any time
// passing: what an administrator or an NTP step does to the system clock.
// No timer fires.
func (c *Fake) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// Advance lets d pass: both clocks move forward by d, and every timer
// that falls due runs, in order, in the calling goroutine, with both
// clocks reading its due time.
func (c *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clocktest: Advance with a negative duration: elapsed time never goes back (use Jump to set the wall clock back)")
	}
	c.mu.Lock()
	target := c.mono + d
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at < c.timers[j].at })
		var due *timer
		for i, t := range c.timers {
			if t.stopped {
				continue
			}
			if t.at <= target {
				due = t
				c.timers = slices.Delete(c.timers, i, i+1)
			}
			break
		}
		if due == nil {
			c.move(target)
			c.timers = slices.DeleteFunc(c.timers, func(t *timer) bool { return t.stopped })
			c.mu.Unlock()
			return
		}
		due.stopped = true
		if due.at > c.mono {
			c.move(due.at)
		}
		c.mu.Unlock()
		due.f()
	}
}

// move sets the monotonic clock to mono and moves the wall clock by the
// same amount. Called with c.mu held.
func (c *Fake) move(mono time.Duration) {
	c.wall = c.wall.Add(mono - c.mono)
	c.mono = mono
}
