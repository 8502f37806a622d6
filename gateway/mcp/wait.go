package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// DefaultMaxWait is how long a call that gave no wait_s is held when
// Options.MaxWait is zero: the gateway's default mcp.max_wait, below the
// 60 s request timeout of most hosts (the TypeScript SDK's default).
const DefaultMaxWait = config.DefaultMCPMaxWait

// hold is one held call's state, shared by the call and the goroutine
// that runs its action.
type hold struct {
	mu       sync.Mutex
	answered bool // the call answered with the action in flight
	id       string
	idKnown  chan struct{}
	result   chan heldResult // buffered: the goroutine never blocks
}

type heldResult struct {
	a   *api.Action
	err error
}

// runHeld runs req's action for a call that gave no wait_s, and follows
// it until it finishes, or the call ends (which cancels the action, as
// RunAction does), or maxWait passes: then it answers with the action as
// it is (held is true) and the action goes on, followed to its end in
// the background — the local socket cancels an action whose stream
// closes, so the stream stays open — and after, when not nil, runs then
// with what following it returned (ssh_get saves its file) and leaves its
// note for get_action. A host's
// cancel of a call that has answered reaches nothing: the action's
// context is not the call's. The background goroutine ends when the
// action does (its approval deadline and timeout bound it).
func (t *tools) runHeld(ctx context.Context, req api.ActionRequest, state func(api.StateEvent), after func(context.Context, *api.Action, error) string) (a *api.Action, held bool, err error) {
	h := &hold{idKnown: make(chan struct{}), result: make(chan heldResult, 1)}
	ev := api.Events{State: func(s api.StateEvent) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.ActionID != "" && h.id == "" {
			h.id = s.ActionID
			close(h.idKnown)
		}
		if !h.answered && state != nil {
			state(s)
		}
	}}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer cancel()
		a, err := t.b.RunAction(actx, req, ev)
		h.mu.Lock()
		answered := h.answered
		if !answered {
			h.result <- heldResult{a, err}
		}
		h.mu.Unlock()
		if answered {
			note := ""
			if after != nil {
				note = after(actx, a, err)
			}
			t.followUps.finish(h.id, note)
		}
	}()
	timer := time.NewTimer(t.maxWait)
	defer timer.Stop()
	select {
	case r := <-h.result:
		return r.a, false, r.err
	case <-ctx.Done():
		cancel()
		r := <-h.result // the action records its cancellation
		return r.a, false, r.err
	case <-timer.C:
	}
	// Answer once the gateway named the action: an answer without its id
	// would leave the agent nothing to follow.
	select {
	case <-h.idKnown:
	case r := <-h.result:
		return r.a, false, r.err
	case <-ctx.Done():
		cancel()
		r := <-h.result
		return r.a, false, r.err
	}
	h.mu.Lock()
	select {
	case r := <-h.result: // it finished as the wait ended
		h.mu.Unlock()
		return r.a, false, r.err
	default:
	}
	h.answered = true
	if after != nil {
		t.followUps.start(h.id)
	}
	h.mu.Unlock()
	a, err = t.b.Action(ctx, h.id)
	if err != nil {
		return nil, true, fmt.Errorf("action %s goes on, but it could not be read (%v); follow it with get_action", h.id, err)
	}
	return a, true, nil
}

// followUps are the notes of what held calls did after their action
// finished (ssh_get saving its file), by action id, until get_action has
// reported them.
type followUps struct {
	mu sync.Mutex
	m  map[string]*followUp
}

type followUp struct {
	done     chan struct{}
	note     string
	finished bool // under followUps.mu: done is closed
}

// maxFollowUps bounds the notes a session keeps unread.
const maxFollowUps = 256

func (f *followUps) start(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*followUp{}
	}
	if len(f.m) >= maxFollowUps {
		for k, u := range f.m { // drop one that is done
			if u.finished {
				delete(f.m, k)
				break
			}
		}
	}
	f.m[id] = &followUp{done: make(chan struct{})}
}

func (f *followUps) finish(id, note string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.m[id]; ok {
		u.note, u.finished = note, true
		close(u.done)
	}
}

// note returns what the held call of a finished action did after it,
// waiting for it to be done (bounded by ctx), and forgets it; "" when
// there is nothing to say.
func (f *followUps) note(ctx context.Context, id string) string {
	f.mu.Lock()
	u, ok := f.m[id]
	f.mu.Unlock()
	if !ok {
		return ""
	}
	select {
	case <-u.done:
	case <-ctx.Done():
		return "the file is still being saved; call get_action again to learn where it went"
	}
	f.mu.Lock()
	delete(f.m, id)
	f.mu.Unlock()
	return u.note
}
