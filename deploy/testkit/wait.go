package testkit

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Patience bounds a test's wait for something that must happen. It only
// turns a hang into a failure: a wait ends as soon as its condition holds,
// so a busy machine makes a suite slower, never red.
const Patience = time.Minute

// The first pause between two polls and the longest: short enough that a
// condition that holds soon is seen at once, long enough that a slow one
// does not busy the machine.
const (
	firstPause = 5 * time.Millisecond
	maxPause   = 100 * time.Millisecond
)

// Eventually polls cond until it returns true, and fails tb with the
// message (format and args, as for Fatalf) when it has not within
// Patience.
func Eventually(tb testing.TB, cond func() bool, format string, args ...any) {
	tb.Helper()
	eventually(tb, Patience, cond, format, args...)
}

func eventually(tb testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("after %v: %s", timeout, fmt.Sprintf(format, args...))
	}
}

// EventuallyErr polls cond until it returns nil, and fails tb with the
// message and cond's last error when it has not within Patience, or at
// once when cond returns an error made by Stop.
func EventuallyErr(tb testing.TB, cond func() error, format string, args ...any) {
	tb.Helper()
	if err := PollErr(Patience, cond); err != nil {
		tb.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// Poll calls cond, pausing a little longer each time (up to a tenth of a
// second), until it returns true or timeout has passed; it reports whether
// cond held. cond is called at least once.
func Poll(timeout time.Duration, cond func() bool) bool {
	return PollErr(timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

var errNotYet = errors.New("condition not met")

// PollErr calls cond, pausing as Poll does, until it returns nil or an
// error made by Stop, or timeout has passed. It returns nil when cond
// succeeded; else the error Stop was given, or cond's last error prefixed
// with how long it was tried.
func PollErr(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	pause := firstPause
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var s stopError
		if errors.As(err, &s) {
			return s.err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(pause*3/2, maxPause)
	}
}

// Stop wraps err so that PollErr (and EventuallyErr) give up at once and
// return err: for a condition that can no longer become true, such as a
// child process that exited.
func Stop(err error) error { return stopError{err} }

type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }
