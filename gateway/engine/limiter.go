package engine

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/airlockgw/airlock/approvals"
)

// limiter counts failures per key (an address, a reviewer name at an
// address, a uid) in a sliding window, so that password and token guessing
// is slowed to a crawl without locking anyone out for long. Attempts in
// flight count too (reserve), so that guesses sent all at once are not
// checked before the first of them fails.
type limiter struct {
	mu       sync.Mutex
	window   time.Duration
	max      int
	hits     map[string][]time.Time
	inflight map[string]int
	now      func() time.Time
	// names slows password checks of one reviewer name from unknown
	// devices, whatever the number of addresses they come from.
	names *nameBudget
}

func newLimiter(clock approvals.Clock) *limiter {
	clock = cmp.Or[approvals.Clock](clock, approvals.SystemClock{})
	return &limiter{window: time.Minute, max: 10, hits: map[string][]time.Time{}, inflight: map[string]int{}, now: clock.Now,
		names: newNameBudget(clock)}
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
	return l.failLocked(key)
}

func (l *limiter) failLocked(key string) int {
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

// reserve takes one attempt from every key's budget before the credential
// is checked: it refuses (false) when, for any key, the failures in the
// window and the attempts in flight reach the limit. Otherwise done must
// be called once the attempt is decided, with whether it failed; it
// returns each key's failures in the window then (0 when it did not fail).
func (l *limiter) reserve(keys ...string) (done func(failed bool) []int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if len(l.prune(k))+l.inflight[k] >= l.max {
			return nil, false
		}
	}
	for _, k := range keys {
		l.inflight[k]++
	}
	return func(failed bool) []int {
		l.mu.Lock()
		defer l.mu.Unlock()
		counts := make([]int, len(keys))
		for i, k := range keys {
			if l.inflight[k]--; l.inflight[k] <= 0 {
				delete(l.inflight, k)
			}
			if failed {
				counts[i] = l.failLocked(k)
			}
		}
		return counts
	}, true
}

// quota is a key's budget of uses in the window: at most max.
type quota struct {
	key string
	max int
}

// charge counts one use against every quota's key, unless one of them is
// spent already: then it charges none, and returns the index of the first
// spent quota and how long until it has room again (spent is -1 when all
// were charged).
func (l *limiter) charge(quotas ...quota) (spent int, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range quotas {
		if h := l.prune(q.key); len(h) >= q.max {
			return i, h[len(h)-q.max].Add(l.window).Sub(l.now())
		}
	}
	for _, q := range quotas {
		l.failLocked(q.key)
	}
	return -1, 0
}

// retry is how long until every key has room for one more attempt by its
// failures (attempts in flight are decided within seconds).
func (l *limiter) retry(keys ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := time.Second
	for _, k := range keys {
		if h := l.prune(k); len(h) >= l.max {
			d = max(d, h[len(h)-l.max].Add(l.window).Sub(l.now()))
		}
	}
	return d
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
// audit log (see authRecord). credential names what was presented
// (reviewer_password, run_token, local_token, …). The guess itself is never
// recorded.
func (e *Identity) AuthFailed(ctx context.Context, credential, key string) {
	e.authFailed(ctx, credential, key)
}

// authFailed is Identity.AuthFailed.
func (e *core) authFailed(ctx context.Context, credential, key string) {
	e.authFailure(ctx, credential, charged{key, e.limiter.fail(key), e.limiter.max})
}

// charged is a key one failure was charged to: its failures in its window
// now, and the count at which the key blocks (or, a reviewer name, begins
// to slow).
type charged struct {
	key      string
	n, limit int
}

// authFailure counts one failed credential: once in
// airlock_auth_failures_total, however many keys it was charged to, and
// in the audit log for each key (see authRecord).
func (e *core) authFailure(ctx context.Context, credential string, keys ...charged) {
	e.metrics.authFailures.WithLabelValues(credential).Inc()
	for _, k := range keys {
		e.authRecord(ctx, credential, k.key, k.n, k.limit)
	}
}

// authFailedLimit is how many auth.failed entries the audit log takes in
// a window, whatever the number of keys: what unauthenticated callers can
// add to a log that is never pruned is bounded (about 10 KiB a minute).
// Those over it are counted, and the count rides on the next entry.
const authFailedLimit = 60

// authRecord records in the audit log the failure of key that brought its
// count in its window to n: the first one in the window and the one that
// blocks (or, for a reviewer name, begins to slow) the key at limit, so
// that guessing shows in the record without an attacker being able to
// make the gateway write (and fsync) once per guess; and no more than
// authFailedLimit a window in all. The metric is authFailure's.
func (e *core) authRecord(ctx context.Context, credential, key string, n, limit int) {
	if n != 1 && n != limit {
		return
	}
	suppressed, ok := e.authLog.take(e.limiter.now(), e.limiter.window)
	if !ok {
		return
	}
	if _, err := e.record(context.WithoutCancel(ctx), "", "",
		authFailed{Credential: credential, Subject: key, Failures: int64(n), Blocked: n >= limit, Suppressed: suppressed}); err != nil {
		e.log.Error("recording a failed credential", "error", err)
	}
}

// authLog bounds the auth.failed entries written per window.
type authLog struct {
	mu         sync.Mutex
	start      time.Time
	written    int
	suppressed int64
}

// take reports whether one more entry may be written now and, if so, how
// many were held back before it.
func (a *authLog) take(now time.Time, window time.Duration) (suppressed int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.start) >= window {
		a.start, a.written = now, 0
	}
	if a.written >= authFailedLimit {
		a.suppressed++
		return 0, false
	}
	a.written++
	suppressed, a.suppressed = a.suppressed, 0
	return suppressed, true
}

// Blocked reports whether key has failed too often in the last minute:
// whoever presents it waits.
func (e *Identity) Blocked(key string) bool { return e.blocked(key) }

// blocked is Identity.Blocked.
func (e *core) blocked(key string) bool { return e.limiter.blocked(key) }

// Count charges key one attempt without recording it (creating runs counts
// toward an address's budget) and reports whether it was blocked already.
func (e *Identity) Count(key string) (blocked bool) { return e.count(key) }

// count is Identity.Count.
func (e *core) count(key string) (blocked bool) {
	if e.limiter.blocked(key) {
		return true
	}
	e.limiter.fail(key)
	return false
}
