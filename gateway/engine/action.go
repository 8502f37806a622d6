package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

const (
	// maxRecentActions is how many actions stay in memory for reads and
	// event streams; older ones are read back from the audit log.
	maxRecentActions = 10000
	// subscriberBuffer is how many events a slow event-stream reader may
	// fall behind before it is dropped (it can still read the result).
	subscriberBuffer = 256
)

// Caller is who asks for an action, or reads one: a local process the
// kernel named, or an HTTP agent with a run token.
type Caller struct {
	// Local callers come over the Unix socket with their kernel-reported
	// credentials (SO_PEERCRED).
	Local bool
	Peer  approvals.Peer
	// RunToken is a remote caller's bearer token.
	RunToken   approvals.Secret
	RemoteAddr string
}

// Event is one event of an action's stream: "state" (api.StateEvent),
// "stdout" or "stderr" (api.OutputEvent), "finished" (api.Action).
type Event struct {
	Name string
	Data any
}

// Action is one action the engine holds: its object, which only the
// lifecycle changes, and the event streams following it. The engine holds
// no output: once stored, an action's output is read from the output store
// when asked for (Result), so that memory does not grow with what commands
// print.
type Action struct {
	id   string
	mu   sync.Mutex
	obj  api.Action // stdout and stderr always empty: see out
	out  *heldOutput
	done chan struct{}
	subs map[chan Event]struct{}
	// outputs is where out's blobs are.
	outputs *auditchain.OutputStore
}

// heldOutput says where a finished action's output is, and how much of
// it its account's policy returns.
type heldOutput struct {
	stdout, stderr [32]byte
	policy         config.OutputPolicy
}

func newActionID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// finishedAction is a finished action read back from the audit log.
func finishedAction(obj api.Action, out *heldOutput, outputs *auditchain.OutputStore) *Action {
	a := &Action{id: obj.ID, obj: obj, out: out, outputs: outputs, done: make(chan struct{})}
	close(a.done)
	return a
}

// ID is the action's id.
func (a *Action) ID() string { return a.id }

// Snapshot returns the action object as it is now, without its output
// (stdout and stderr empty, their sizes and flags set): for what it is and
// where it stands. See Result for what the agent gets.
func (a *Action) Snapshot() api.Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.obj
}

// Result returns the action object with the output its account's policy
// returns, read from the output store.
func (a *Action) Result(ctx context.Context) (api.Action, error) {
	a.mu.Lock()
	obj, out := a.obj, a.out
	a.mu.Unlock()
	if out == nil {
		return obj, nil
	}
	stdout, err := a.outputs.Get(ctx, out.stdout)
	if err != nil {
		return obj, fmt.Errorf("engine: reading the stdout of %s from the output store: %w", a.id, err)
	}
	stderr, err := a.outputs.Get(ctx, out.stderr)
	if err != nil {
		return obj, fmt.Errorf("engine: reading the stderr of %s from the output store: %w", a.id, err)
	}
	outputView(&obj, stdout, stderr, out.policy)
	return obj, nil
}

// Done is closed once the action has its outcome.
func (a *Action) Done() <-chan struct{} { return a.done }

// update changes the action object.
func (a *Action) update(f func(o *api.Action)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.obj)
}

// Subscribe returns a channel of the action's events from now on; it is
// closed after the finished event, or without it when the reader falls too
// far behind or the action had finished already (then Result has the
// outcome). Call the returned function when done reading.
func (a *Action) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.done:
		close(ch)
		return ch, func() {}
	default:
	}
	a.subs[ch] = struct{}{}
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if _, ok := a.subs[ch]; ok {
			delete(a.subs, ch)
			close(ch)
		}
	}
}

// publishLocked sends an event to every subscriber without ever blocking
// the action: a reader that cannot keep up is dropped.
func (a *Action) publishLocked(ev Event) {
	for ch := range a.subs {
		select {
		case ch <- ev:
		default:
			delete(a.subs, ch)
			close(ch)
		}
	}
}

// setState moves the action to state s and tells its followers.
func (a *Action) setState(s api.State, ev api.StateEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.obj.State = s
	ev.State = s
	a.publishLocked(Event{"state", ev})
}

// output passes output on to the action's followers.
func (a *Action) output(stream sshexec.Stream, p []byte) {
	data, enc := api.EncodeBytes(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.publishLocked(Event{stream.String(), api.OutputEvent{Data: data, Encoding: enc}})
}

// finish marks the action finished and sends result (its object with its
// output) to its followers, the last event each gets. The action keeps the
// object without the output, and out to read it back.
func (a *Action) finish(result api.Action, out *heldOutput) {
	a.mu.Lock()
	defer a.mu.Unlock()
	result.State = api.StateFinished
	a.obj, a.out = result, out
	a.obj.Stdout, a.obj.StdoutEncoding, a.obj.Stderr, a.obj.StderrEncoding = "", "", "", ""
	for ch := range a.subs {
		select {
		case ch <- Event{"finished", result}:
		default:
		}
		close(ch)
	}
	a.subs = nil
	close(a.done)
}

// Start registers a new action and runs its lifecycle in a goroutine the
// engine owns. ctx bounds the action (a waiting caller's request: when it
// ends, the action is cancelled); the engine's stop cancels it too.
func (e *Engine) Start(ctx context.Context, c Caller, req api.ActionRequest) (*Action, error) {
	if e.draining.Load() {
		return nil, ErrDraining
	}
	a := &Action{
		id:      newActionID(),
		done:    make(chan struct{}),
		subs:    map[chan Event]struct{}{},
		outputs: e.outputs,
	}
	a.obj = api.Action{
		ID: a.id, Target: req.Target, Account: req.Account, Command: req.Command,
		TimeoutS: req.TimeoutS, State: api.StateRequested, RequestedAt: e.clock.Now().UTC(),
	}
	e.mu.Lock()
	e.actions[a.id] = a
	e.recent = append(e.recent, a.id)
	for len(e.recent) > maxRecentActions {
		old := e.recent[0]
		e.recent = e.recent[1:]
		if o, ok := e.actions[old]; ok && isDone(o.done) {
			delete(e.actions, old)
		}
	}
	e.mu.Unlock()

	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.base, cancel)
	e.actionsWG.Add(1)
	e.metrics.inFlight.Inc()
	go func() {
		defer e.actionsWG.Done()
		defer e.metrics.inFlight.Dec()
		defer stop()
		defer cancel()
		e.execute(actx, a, c, req)
	}()
	return a, nil
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Action returns an action: from memory while the engine holds it, else
// rebuilt from its audit entries (an older one, or one from before a
// restart). Reviewers may read any; see ActionOf for agents.
func (e *Engine) Action(ctx context.Context, id string) (*Action, error) {
	e.mu.Lock()
	a, ok := e.actions[id]
	e.mu.Unlock()
	if ok {
		return a, nil
	}
	if obj, out, found := e.actionFromAudit(ctx, id); found {
		return finishedAction(obj, out, e.outputs), nil
	}
	return nil, refuse(ErrNotFound, "no action "+strconv.Quote(id))
}

// ActionOf returns an action of the caller's own run: an agent reads its
// run's actions, also after the run ended, and nothing else.
func (e *Engine) ActionOf(ctx context.Context, c Caller, id string) (*Action, error) {
	a, err := e.Action(ctx, id)
	if err != nil {
		return nil, err
	}
	run, err := e.FindRun(ctx, c)
	if err != nil || string(run.ID) != a.Snapshot().RunID {
		return nil, refuse(ErrNotFound, "no action "+strconv.Quote(id)+" in your run")
	}
	return a, nil
}

// Recent returns the actions the engine still holds, newest first.
func (e *Engine) Recent() []api.Action {
	e.mu.Lock()
	held := make([]*Action, 0, len(e.recent))
	for i := len(e.recent) - 1; i >= 0; i-- {
		if a, ok := e.actions[e.recent[i]]; ok {
			held = append(held, a)
		}
	}
	e.mu.Unlock()
	out := make([]api.Action, len(held))
	for i, a := range held {
		out[i] = a.Snapshot()
	}
	return out
}
