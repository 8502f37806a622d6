package approvals

import "time"

// Clock is the store's source of time and timers. Expiry (approval
// deadlines, run TTLs, token expiry) is driven by it, so tests can move
// time forward instead of sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed and returns
	// a function that cancels the call if it has not started, reporting
	// whether it did. Like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
