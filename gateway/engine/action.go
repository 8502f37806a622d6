package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec"
)

const (
	// maxRecentActions is how many actions stay in memory for reads and
	// event streams; older ones are read back from the audit log.
	maxRecentActions = 10000
	// subscriberBuffer is how many events an event-stream reader may fall
	// behind before the action waits for it.
	subscriberBuffer = 256
)

// Caller is who asks for an action, or reads one: a local process the
// kernel named, or an HTTP agent with a run token.
type Caller struct {
	// Local callers come over the Unix socket with their kernel-reported
	// credentials (SO_PEERCRED).
	Local bool
	Peer  Peer
	// RunToken is a remote caller's bearer token.
	RunToken   Secret
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
	id  string
	mu  sync.Mutex
	obj api.Action // stdout and stderr always empty: see out
	out *heldOutput
	// policy is the account's output policy: the read rules of its
	// output and its standard input.
	policy config.OutputPolicy
	done   chan struct{}
	// resolved is closed once RunID is known (or the action ended
	// without a run): who may read it is settled then.
	resolved     chan struct{}
	resolvedOnce sync.Once
	subs         map[*subscriber]struct{}
	// finished is set once the outcome is published: no event follows.
	finished bool
	// publishing counts publishes under way, which finish waits for.
	publishing sync.WaitGroup
	// release, once closed, stops publishers from waiting for slow
	// readers: the action's deadline passed, it was cancelled, or it
	// finished.
	release     chan struct{}
	releaseOnce sync.Once
	// outputs is where out's blobs are.
	outputs *auditchain.OutputStore
	// spillChecked marks the streams whose spill file was checked
	// against its digest (checkSpill).
	spillChecked map[string]bool
	// redaction is what of the command was found to be credentials and
	// replaced in the object (and so everywhere it is stored or shown).
	redaction redact.Result
	// state is the last state event published, "" State before the first.
	state api.StateEvent
	// cancel cancels the action's context with a cause (stop); nil for
	// an action read back from the audit log.
	cancel context.CancelCauseFunc
	// away, for an action this replica does not hold and that has no
	// outcome yet, follows its record while someone reads its events.
	away *away
}

func newActionID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// finishedAction is a finished action read back from the audit log.
func finishedAction(obj api.Action, out *heldOutput, policy config.OutputPolicy, outputs *auditchain.OutputStore) *Action {
	a := &Action{id: obj.ID, obj: obj, out: out, policy: policy, outputs: outputs, done: make(chan struct{}), resolved: make(chan struct{}), release: make(chan struct{}), finished: true}
	close(a.done)
	close(a.resolved)
	close(a.release)
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
	stdout, err := out.stdout.load(ctx, a.outputs)
	if err != nil {
		return obj, fmt.Errorf("reading the stdout of %s from the output store: %w", a.id, err)
	}
	stderr, err := out.stderr.load(ctx, a.outputs)
	if err != nil {
		return obj, fmt.Errorf("reading the stderr of %s from the output store: %w", a.id, err)
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

// subscriber is one reader of an action's events.
type subscriber struct {
	ch chan Event
	// gone is closed when the reader stops reading (unsubscribe).
	gone     chan struct{}
	goneOnce sync.Once
	// cut marks a stream this reader missed output of: nothing more of
	// that stream goes to it, so that what it got is a prefix of what the
	// command wrote, never a stream with a hole in the middle. Only
	// publish touches it, and output of one stream is published from one
	// goroutine.
	cut [2]bool
	// watcher is a reader the action never waits for (a reviewer): it
	// misses what it cannot take.
	watcher bool
}

// send passes ev on: at once when the reader has room, else as soon as it
// makes room (back-pressure: the command's output waits for a slow
// reader), until the reader goes or release is closed; then ev is
// dropped and send reports false.
func (s *subscriber) send(ev Event, release <-chan struct{}) bool {
	select {
	case s.ch <- ev:
		return true
	case <-s.gone:
		return false
	default:
	}
	if s.watcher {
		return false
	}
	select {
	case s.ch <- ev:
		return true
	case <-s.gone:
	case <-release:
	}
	return false
}

// Subscribe returns a channel of the action's events from now on: states
// and output, in order, none dropped for being slow (the action waits for
// its readers; see release). The channel is closed once the action has its
// outcome (then Result has it), or at once if it had finished already.
// Call the returned function when done reading.
func (a *Action) Subscribe() (<-chan Event, func()) {
	return a.subscribe(false)
}

// Watch is Subscribe for a reader the action must not wait for — a
// reviewer following it: when the reader falls behind, it misses output
// (each stream it missed stops there, a prefix) instead of holding the
// command back.
func (a *Action) Watch() (<-chan Event, func()) {
	return a.subscribe(true)
}

func (a *Action) subscribe(watcher bool) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, subscriberBuffer), gone: make(chan struct{}), watcher: watcher}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.finished {
		close(s.ch)
		return s.ch, func() {}
	}
	a.subs[s] = struct{}{}
	a.away.follow(a)
	return s.ch, func() {
		s.goneOnce.Do(func() { close(s.gone) })
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.subs, s)
		if len(a.subs) == 0 {
			a.away.stop()
		}
	}
}

// publish sends an event to every subscriber. A reader that cannot keep up
// holds the publisher back (and so the command, whose output then waits in
// the SSH window) until it reads, goes away, or the action's release: its
// deadline or its cancellation. An output event a reader missed cuts that
// stream for it; the reader knows from the recorded sizes.
func (a *Action) publish(ev Event) {
	a.mu.Lock()
	if a.finished {
		a.mu.Unlock()
		return
	}
	subs := make([]*subscriber, 0, len(a.subs))
	for s := range a.subs {
		subs = append(subs, s)
	}
	a.publishing.Add(1)
	a.mu.Unlock()
	defer a.publishing.Done()

	stream := -1
	switch ev.Name {
	case sshexec.Stdout.String():
		stream = 0
	case sshexec.Stderr.String():
		stream = 1
	}
	for _, s := range subs {
		if stream >= 0 && s.cut[stream] {
			continue
		}
		if !s.send(ev, a.release) && stream >= 0 {
			s.cut[stream] = true
		}
	}
}

// releaseNow stops publishers from waiting for slow readers.
func (a *Action) releaseNow() { a.releaseOnce.Do(func() { close(a.release) }) }

// setState moves the action to state s and tells its followers.
func (a *Action) setState(s api.State, ev api.StateEvent) {
	ev.State = s
	a.update(func(o *api.Action) { o.State, a.state = s, ev })
	a.publish(Event{"state", ev})
}

// StateEvent is where the action stands now, as the first event of a
// stream that starts late: the last state event published (with its kind,
// message and reason while it waits for a reviewer), naming the action.
func (a *Action) StateEvent() api.StateEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	ev := a.state
	if ev.State != a.obj.State {
		ev = api.StateEvent{State: a.obj.State}
	}
	ev.ActionID, ev.ApprovalID = a.id, a.obj.Approval.ID
	return ev
}

// output passes output on to the action's followers.
func (a *Action) output(stream sshexec.Stream, p []byte) {
	data, enc := api.EncodeBytes(p)
	a.publish(Event{stream.String(), api.OutputEvent{Data: data, Encoding: enc}})
}

// finish marks the action finished with result, its object without the
// output, and out to read the output back; its followers' channels close,
// and they read the result with Result.
func (a *Action) finish(result api.Action, out *heldOutput) {
	result.State = api.StateFinished
	result.Stdout, result.StdoutEncoding, result.Stderr, result.StderrEncoding = "", "", "", ""
	a.end(func() { a.obj, a.out = result, out })
}

// end ends the action's streams after set, run under its lock, gave it
// its last object: no event follows, its followers' channels close, Done
// closes.
// An action ended already stays as it was.
func (a *Action) end(set func()) {
	a.mu.Lock()
	if a.finished {
		a.mu.Unlock()
		return
	}
	set()
	a.finished = true
	subs := a.subs
	a.subs = nil
	a.mu.Unlock()
	// No publish starts now; wait for those under way (a slow reader
	// holds one until release), then end every stream.
	a.releaseNow()
	a.publishing.Wait()
	for s := range subs {
		close(s.ch)
	}
	a.markResolved()
	close(a.done)
}

// markResolved says the action's run is known.
func (a *Action) markResolved() { a.resolvedOnce.Do(func() { close(a.resolved) }) }

// redactionMargin is how far past what is kept of a field the redactor
// still reads, so that a credential that starts in the kept part is seen
// whole (a PEM key block is a few KiB) and none of its bytes is kept.
const redactionMargin = 64 << 10

// boundForRedaction is the part of a field the redactor reads: the field
// whole when it is within its limit (it may be used whole), else what is
// kept of it and the margin. Such a field is refused for its size; the
// redactor's time on it stays bounded (megabytes took seconds).
func boundForRedaction(s string, limit int) string {
	if len(s) <= limit+redactionMargin {
		return s
	}
	return s[:limit+redactionMargin]
}

// Start registers a new action and runs its lifecycle in a goroutine the
// engine owns. ctx bounds the action (a waiting caller's request: when it
// ends, the action is cancelled); the engine's stop cancels it too.
func (e *Actions) Start(ctx context.Context, c Caller, req api.ActionRequest) (*Action, error) {
	if e.draining.Load() {
		return nil, ErrDraining
	}
	a := &Action{
		id:       newActionID(),
		done:     make(chan struct{}),
		subs:     map[*subscriber]struct{}{},
		resolved: make(chan struct{}),
		release:  make(chan struct{}),
		outputs:  e.outputs,
	}
	// What the object (and so the audit log) keeps of a request that may
	// be refused for its size is bounded: the checks see it whole. What
	// looks like a credential in the command or the reason never enters
	// it.
	red := e.conf().redactor
	if req.Command == "" {
		// A transfer is described for people; the digest binds that too.
		req.Command = describeTransfer(req)
	}
	a.redaction = red.Redact(boundForRedaction(req.Command, MaxCommandLen))
	a.obj = api.Action{
		ID: a.id, Target: clip(req.Target, maxNameLen), Account: clip(req.Account, maxNameLen),
		Command: clip(a.redaction.Text, MaxCommandLen), Reason: clip(red.Redact(boundForRedaction(req.Reason, 4*api.MaxReason)).Text, 4*api.MaxReason),
		Redactions: apiRedactions(a.redaction.Spans),
		TimeoutS:   req.TimeoutS, State: api.StateRequested, RequestedAt: e.clock.Now().UTC(),
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

	actx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	a.cancel = cancelCause
	stop := context.AfterFunc(e.base, cancel)
	stopLost := context.AfterFunc(e.inflightCtx.Load().ctx, cancel)
	context.AfterFunc(actx, a.releaseNow) // a cancelled action waits for no reader
	e.actionsWG.Add(1)
	e.metrics.inFlight.Inc()
	go func() {
		defer e.actionsWG.Done()
		defer e.metrics.inFlight.Dec()
		defer stop()
		defer stopLost()
		defer cancel()
		e.execute(actx, a, c, req)
	}()
	return a, nil
}

// maxNameLen bounds what is kept of a target or account name that is
// refused (configured names are far shorter).
const maxNameLen = 256

// clip returns s cut to at most n bytes, on a character boundary, marked
// when it was cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[%d more bytes]", len(s)-cut)
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
func (e *Actions) Action(ctx context.Context, id string) (*Action, error) { return e.action(ctx, id) }

// action is Actions.Action.
func (e *core) action(ctx context.Context, id string) (*Action, error) {
	e.mu.Lock()
	a, ok := e.actions[id]
	e.mu.Unlock()
	if ok {
		return a, nil
	}
	obj, out, found := e.actionFromAudit(ctx, id)
	switch {
	case !found:
		return nil, refuse(ErrNotFound, "no action "+strconv.Quote(id))
	case obj.State != api.StateFinished:
		return e.awayAction(ctx, obj), nil
	}
	return finishedAction(obj, out, e.outputPolicy(obj.Target, obj.Account), e.outputs), nil
}

// ActionOf returns an action of the caller's own run: an agent reads its
// run's actions, also after the run ended, through any replica, and
// nothing else. An action of another run is refused as one that does not
// exist.
func (e *Actions) ActionOf(ctx context.Context, c Caller, id string) (*Action, error) {
	a, err := e.action(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, notInRun(id)
	} else if err != nil {
		return nil, err
	}
	// An action just started may not know its run yet.
	select {
	case <-a.resolved:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !e.inRun(ctx, c, a.Snapshot().RunID) {
		return nil, notInRun(id)
	}
	return a, nil
}

// Recent returns the actions the engine still holds, newest first.
func (e *Actions) Recent() []api.Action { return e.recentActions() }

// recentActions is Actions.Recent.
func (e *core) recentActions() []api.Action {
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

// apiRedactions are the redactions of a command as the API shows them.
func apiRedactions(spans []approvals.Redaction) []api.Redaction {
	if len(spans) == 0 {
		return nil
	}
	out := make([]api.Redaction, len(spans))
	for i, sp := range spans {
		out[i] = api.Redaction(sp)
	}
	return out
}
