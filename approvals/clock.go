package approvals

import "time"

// Clock is the store's source of time and timers. Expiry (approval
// deadlines, run TTLs, token expiry) is driven by it, so tests can move
// time forward instead of sleeping.
//
// A lifetime is measured twice: on the wall clock (Now), whose deadlines
// are stored and survive a restart, and in elapsed time (Elapsed and
// AfterFunc), which setting the system clock does not move. Whichever
// runs out first ends it, so setting the clock back never lengthens a run,
// a request or a token, and setting it forward can only shorten one.
type Clock interface {
	// Now returns the wall-clock time.
	Now() time.Time
	// Elapsed returns the time since a fixed origin on a monotonic clock:
	// it only moves forward, at the rate time passes.
	Elapsed() time.Duration
	// AfterFunc calls f in its own goroutine once d has passed on the
	// monotonic clock and returns a function that cancels the call if it
	// has not started, reporting whether it did. Like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real clock.
type SystemClock struct{}

// origin carries Go's monotonic clock reading; durations since it are
// monotonic.
var origin = time.Now()

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Elapsed returns the monotonic time since the process started.
func (SystemClock) Elapsed() time.Duration { return time.Since(origin) }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
