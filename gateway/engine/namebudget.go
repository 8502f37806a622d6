package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlockgw/airlock/approvals"
)

// The budget of password checks per reviewer name, across every address.
// Budgets per address alone let guesses at one name spread over many
// addresses (any local user sends from all of 127.0.0.0/8; an IPv6 host
// holds a /64; a botnet holds thousands). A lockout per name would let
// anyone lock a reviewer out on purpose. So checks of a name from devices
// it never logged in from are slowed, never refused for long: after the
// free failures, each further check waits for its slot, spaced by a delay
// that doubles with each failure up to a ceiling. A device that logged in
// as the name before is not charged here at all (see devices.go), so the
// reviewer is never slowed by what others do.
const (
	// nameWindow is how long a failure counts against its name.
	nameWindow = 15 * time.Minute
	// nameFree is how many failures a name takes in nameWindow before its
	// checks are spaced.
	nameFree = 5
	// nameBaseDelay is the spacing after the first failure past the free
	// ones; it doubles with each further failure, up to nameMaxDelay.
	nameBaseDelay = time.Second
	nameMaxDelay  = 30 * time.Second
	// nameHorizon: an attempt whose slot is further away is refused at
	// once (429, Retry-After) rather than held.
	nameHorizon = 30 * time.Second
	// nameMaxWaiters bounds the attempts held per name. The horizon and
	// the doubling keep it below this (at most 4 with the values above);
	// the cap holds should those change.
	nameMaxWaiters = 8
	// maxNames bounds the names kept: past it, names with nothing in
	// their window are forgotten.
	maxNames = 100000
)

// nameBudget schedules the password checks of reviewer names from
// unknown devices. Its times are the clock's elapsed (monotonic) time, so
// setting the system clock neither lifts nor lengthens a delay.
type nameBudget struct {
	mu         sync.Mutex
	clock      approvals.Clock
	window     time.Duration
	free       int
	base, ceil time.Duration
	horizon    time.Duration
	maxWaiters int
	names      map[string]*nameSlots
}

// nameSlots is one name's schedule.
type nameSlots struct {
	fails    []time.Duration // when checks failed, oldest first
	inflight int             // checks scheduled and not yet decided
	waiting  int             // of those, the ones waiting for their slot
	last     time.Duration   // the slot of the latest check scheduled
}

func newNameBudget(clock approvals.Clock) *nameBudget {
	return &nameBudget{clock: clock, window: nameWindow, free: nameFree, base: nameBaseDelay, ceil: nameMaxDelay,
		horizon: nameHorizon, maxWaiters: nameMaxWaiters, names: map[string]*nameSlots{}}
}

// slowed is a check of a name refused by its budget: its slot is past
// the horizon (or too many wait for theirs). Failures is how many checks
// of the name failed in the window or are in flight, After when a try
// would be held no longer than the horizon.
type slowed struct {
	Failures int
	After    time.Duration
}

// delay is the spacing of checks after n failures (or checks in flight).
func (b *nameBudget) delay(n int) time.Duration {
	if n < b.free {
		return 0
	}
	d := b.base
	for i := b.free; i < n && d < b.ceil; i++ {
		d *= 2
	}
	return min(d, b.ceil)
}

// reserve schedules one check of name: it returns how long the check must
// wait for its slot, or why it is refused. A check in flight counts as a
// failure until it is decided, so that checks sent all at once are spaced
// as if each had failed.
func (b *nameBudget) reserve(name string) (wait time.Duration, refused *slowed) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Elapsed()
	s := b.slots(name, now)
	n := len(s.fails) + s.inflight
	slot := now
	if n >= b.free {
		slot = max(now, s.last+b.delay(n))
	}
	if slot-now > b.horizon || (slot > now && s.waiting >= b.maxWaiters) {
		return 0, &slowed{Failures: n, After: slot - now}
	}
	s.last, s.inflight = slot, s.inflight+1
	if slot > now {
		s.waiting++
	}
	return slot - now, nil
}

// take reserves a check of name and waits for its slot; cancelling ctx
// gives the slot up. Once it returns nil, done must be called with
// whether the check failed.
func (b *nameBudget) take(ctx context.Context, name string) (done func(failed bool) int, err error) {
	wait, refused := b.reserve(name)
	if refused != nil {
		return nil, refused
	}
	if wait > 0 {
		due := make(chan struct{})
		stop := b.clock.AfterFunc(wait, func() { close(due) })
		select {
		case <-due:
		case <-ctx.Done():
			stop()
		}
		b.mu.Lock()
		b.names[name].waiting--
		b.mu.Unlock()
		if ctx.Err() != nil {
			b.done(name, false)
			return nil, ctx.Err()
		}
	}
	return func(failed bool) int { return b.done(name, failed) }, nil
}

// done decides a check of name; it returns the name's failures in the
// window now.
func (b *nameBudget) done(name string, failed bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Elapsed()
	s := b.slots(name, now)
	s.inflight--
	if failed {
		s.fails = append(s.fails, now)
	}
	return len(s.fails)
}

// slots returns name's schedule, its failures before the window dropped.
// Called with b.mu held.
func (b *nameBudget) slots(name string, now time.Duration) *nameSlots {
	s, ok := b.names[name]
	if !ok {
		if len(b.names) >= maxNames {
			b.sweep(now)
		}
		s = &nameSlots{}
		b.names[name] = s
	}
	cut := 0
	for cut < len(s.fails) && now-s.fails[cut] > b.window {
		cut++
	}
	s.fails = s.fails[cut:]
	return s
}

// sweep forgets the names with nothing to remember: no failure in the
// window, nothing in flight, no slot ahead. Called with b.mu held.
func (b *nameBudget) sweep(now time.Duration) {
	for name, s := range b.names {
		if s.inflight == 0 && s.last <= now && (len(s.fails) == 0 || now-s.fails[len(s.fails)-1] > b.window) {
			delete(b.names, name)
		}
	}
}

func (s *slowed) Error() string {
	return fmt.Sprintf("slowed after %d failed or pending logins", s.Failures)
}
