package engine

import (
	"context"
	"sync"
	"time"
)

// limiter counts failures per key (a reviewer name, an address, a uid) in a
// sliding window, so that password and token guessing is slowed to a crawl
// without locking anyone out for long.
type limiter struct {
	mu     sync.Mutex
	window time.Duration
	max    int
	hits   map[string][]time.Time
	now    func() time.Time
}

func newLimiter() *limiter {
	return &limiter{window: time.Minute, max: 10, hits: map[string][]time.Time{}, now: time.Now}
}

// blocked reports whether key has failed too often in the window.
func (l *limiter) blocked(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.prune(key)) >= l.max
}

// fail records a failure for key and returns how many it has in the
// window now.
func (l *limiter) fail(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hits[key] = append(l.prune(key), l.now())
	n := len(l.hits[key])
	if len(l.hits) > 100000 { // bound memory under a flood of keys
		for k := range l.hits {
			if len(l.prune(k)) == 0 {
				delete(l.hits, k)
			}
		}
	}
	return n
}

func (l *limiter) prune(key string) []time.Time {
	h := l.hits[key]
	cut := l.now().Add(-l.window)
	i := 0
	for i < len(h) && h[i].Before(cut) {
		i++
	}
	h = h[i:]
	if len(h) == 0 {
		delete(l.hits, key)
		return nil
	}
	l.hits[key] = h
	return h
}

// AuthFailed counts a failed credential against key and records it in the
// audit log — the first failure in the window and the one that blocks the
// key, so that guessing shows in the record without an attacker being able
// to make the gateway write (and fsync) once per guess. The guess itself
// is never recorded. credential names what was presented
// (reviewer_password, run_token, local_token, …).
func (e *Engine) AuthFailed(ctx context.Context, credential, key string) {
	n := e.limiter.fail(key)
	if n != 1 && n != e.limiter.max {
		return
	}
	if _, err := e.record(context.WithoutCancel(ctx), "", "",
		authFailed{Credential: credential, Subject: key, Failures: int64(n), Blocked: n >= e.limiter.max}); err != nil {
		e.log.Error("recording a failed credential", "error", err)
	}
}

// Blocked reports whether key has failed too often in the last minute:
// whoever presents it waits.
func (e *Engine) Blocked(key string) bool { return e.limiter.blocked(key) }

// Count charges key one attempt without recording it (creating runs counts
// toward an address's budget) and reports whether it was blocked already.
func (e *Engine) Count(key string) (blocked bool) {
	if e.limiter.blocked(key) {
		return true
	}
	e.limiter.fail(key)
	return false
}
