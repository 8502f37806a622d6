package engine

import (
	"errors"
	"fmt"
	"time"
)

// waitRefusal is a refusal that says when to try again: a budget that
// will have room then.
type waitRefusal struct {
	*refusal
	after time.Duration
}

// refuseFor returns a refusal of ErrRateLimited with the message msg,
// asking the caller to try again after d.
func refuseFor(d time.Duration, msg string) error {
	return &waitRefusal{&refusal{kind: ErrRateLimited, msg: msg}, max(d, time.Second)}
}

// RetryAfter is how long a refusal asks its caller to wait before trying
// again, in whole seconds rounded up (an HTTP Retry-After); 0 when it
// does not say.
func RetryAfter(err error) time.Duration {
	var w *waitRefusal
	if !errors.As(err, &w) {
		return 0
	}
	return roundUp(w.after)
}

// roundUp is d in whole seconds, rounded up.
func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// retryText says when to try again, as refusals word it.
func retryText(d time.Duration) string {
	return fmt.Sprintf("try again in %d s", int(roundUp(d)/time.Second))
}
