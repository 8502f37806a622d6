package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

const (
	// maxCommandLen bounds a command; sshd's own limit on a packet is
	// higher, but a reviewer must be able to read what they approve.
	maxCommandLen = 32 << 10
	// tailSize is what output = "tail" returns of each stream.
	tailSize = 64 << 10
	// maxRecentActions is how many actions stay in memory for GET and
	// event streams; older ones are read back from the audit log.
	maxRecentActions = 10000
	// subscriberBuffer is how many events a slow event-stream reader may
	// fall behind before it is dropped (it can still GET the result).
	subscriberBuffer = 256
)

// caller is who asked for an action.
type caller struct {
	// local callers come over the Unix socket with their kernel-reported
	// credentials; remote ones present a run token.
	local      bool
	peer       PeerCred
	runToken   approvals.Secret
	remoteAddr string
}

// actionState is one action in memory: its current object and the event
// streams following it.
type actionState struct {
	mu     sync.Mutex
	obj    api.Action
	policy OutputPolicy
	done   chan struct{}
	subs   map[chan sseEvent]struct{}
}

type sseEvent struct {
	name string
	data any
}

func newActionID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

func (st *actionState) snapshot() api.Action {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.obj
}

// subscribe returns a channel of the action's events from now on; it is
// closed after the finished event, or when the reader falls too far behind.
func (st *actionState) subscribe() (<-chan sseEvent, func()) {
	ch := make(chan sseEvent, subscriberBuffer)
	st.mu.Lock()
	defer st.mu.Unlock()
	select {
	case <-st.done:
		ch <- sseEvent{"finished", st.obj}
		close(ch)
		return ch, func() {}
	default:
	}
	st.subs[ch] = struct{}{}
	return ch, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if _, ok := st.subs[ch]; ok {
			delete(st.subs, ch)
			close(ch)
		}
	}
}

// publishLocked sends an event to every subscriber without ever blocking the
// action: a reader that cannot keep up is dropped.
func (st *actionState) publishLocked(ev sseEvent) {
	for ch := range st.subs {
		select {
		case ch <- ev:
		default:
			delete(st.subs, ch)
			close(ch)
		}
	}
}

func (st *actionState) setState(s api.State, ev api.StateEvent) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.obj.State = s
	ev.State = s
	st.publishLocked(sseEvent{"state", ev})
}

func (st *actionState) output(stream sshexec.Stream, p []byte) {
	data, enc := api.EncodeBytes(p)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.publishLocked(sseEvent{stream.String(), api.OutputEvent{Data: data, Encoding: enc}})
}

func (st *actionState) finish(obj api.Action) {
	st.mu.Lock()
	defer st.mu.Unlock()
	obj.State = api.StateFinished
	st.obj = obj
	for ch := range st.subs {
		select {
		case ch <- sseEvent{"finished", obj}:
		default:
		}
		close(ch)
	}
	st.subs = nil
	close(st.done)
}

// startAction registers a new action and runs its lifecycle in a goroutine
// the server owns. ctx bounds the action (a waiting caller's request); the
// gateway's stop cancels it too.
func (s *Server) startAction(ctx context.Context, c caller, req api.ActionRequest) (*actionState, error) {
	if s.draining.Load() {
		return nil, errDraining
	}
	st := &actionState{
		obj: api.Action{
			ID: newActionID(), Target: req.Target, Account: req.Account, Command: req.Command,
			TimeoutS: req.TimeoutS, State: api.StateRequested, RequestedAt: time.Now().UTC(),
		},
		done: make(chan struct{}),
		subs: map[chan sseEvent]struct{}{},
	}
	s.mu.Lock()
	s.actions[st.obj.ID] = st
	s.recent = append(s.recent, st.obj.ID)
	for len(s.recent) > maxRecentActions {
		old := s.recent[0]
		s.recent = s.recent[1:]
		if a, ok := s.actions[old]; ok && isDone(a.done) {
			delete(s.actions, old)
		}
	}
	s.mu.Unlock()

	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.base, cancel)
	s.actionsWG.Add(1)
	s.metrics.inFlight.Inc()
	go func() {
		defer s.actionsWG.Done()
		defer s.metrics.inFlight.Dec()
		defer stop()
		defer cancel()
		s.execute(actx, st, c, req)
	}()
	return st, nil
}

var errDraining = errors.New("gateway: shutting down")

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// lookupAction returns an action in memory.
func (s *Server) lookupAction(id string) (*actionState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.actions[id]
	return st, ok
}

// execute is the action lifecycle (design.md, steps 1–8).
func (s *Server) execute(ctx context.Context, st *actionState, c caller, req api.ActionRequest) {
	obj := st.snapshot()
	a := &lifecycle{s: s, st: st, obj: obj}

	// 1. Resolve target, account and timeout from the configuration only.
	target, account, timeout, problem := s.resolveRequest(req)
	if target != nil {
		a.obj.Account = account.Name
		a.obj.TimeoutS = int(timeout / time.Second)
		if req.TimeoutS != 0 {
			a.obj.TimeoutS = req.TimeoutS // as asked, also when refused
		}
		a.obj.Approval.Mode = api.Mode(account.Approval.String())
		st.mu.Lock()
		st.policy = account.Output
		st.obj.Account, st.obj.TimeoutS = a.obj.Account, a.obj.TimeoutS
		st.mu.Unlock()
	}

	// 2. Resolve the run.
	var run approvals.Run
	var runErr error
	if problem == "" {
		run, runErr = s.resolveRun(ctx, c)
		a.obj.RunID = string(run.ID)
	}
	if a.obj.RunID == "" {
		// A refused request (or one of an ended run) still names the run
		// it came from, when there is one, so that the agent can read it
		// back and an investigator can place it. Nothing is created.
		found, _ := s.findRun(ctx, c)
		a.obj.RunID = string(found.ID)
	}
	st.mu.Lock()
	st.obj.RunID = a.obj.RunID // its agent may follow it while it runs
	st.mu.Unlock()

	// 3. action.requested, whatever follows: every request is accounted.
	rq := actionRequested{Target: req.Target, Account: a.obj.Account, Command: req.Command, TimeoutS: int64(a.obj.TimeoutS)}
	if c.local {
		pid, uid := int64(c.peer.PID), int64(c.peer.UID)
		rq.Transport, rq.PeerPID, rq.PeerUID = "socket", &pid, &uid
	} else {
		rq.Transport, rq.RemoteAddr = "http", c.remoteAddr
	}
	requested, err := s.record(ctx, a.obj.ID, a.obj.RunID, rq)
	if err != nil {
		s.log.Error("audit append failed; nothing dialed", "action", a.obj.ID, "error", err)
		a.obj.Outcome, a.obj.Detail = sshexec.AuditUnavailable, "the request could not be recorded in the audit log, so nothing was run"
		a.answer()
		return
	}
	switch {
	case problem != "":
		a.end(ctx, sshexec.Rejected, problem, 0)
		return
	case runErr != nil:
		a.endRunError(ctx, runErr)
		return
	}

	// 4. Approval.
	waitStart := time.Now()
	res, err := s.store.Authorize(ctx, run.ID, approvals.Action{
		Target: target.Name, Account: account.Name, Command: req.Command, Timeout: timeout,
	}, func(r approvals.Request) {
		a.obj.Approval.ID = string(r.ID)
		st.mu.Lock()
		st.obj.Approval.ID = string(r.ID)
		st.mu.Unlock()
		st.setState(api.StateWaitingApproval, api.StateEvent{
			ApprovalID: string(r.ID), Kind: r.Kind.String(),
			Message: fmt.Sprintf("waiting for a reviewer to approve this %s (until %s)", r.Kind, r.ExpiresAt.UTC().Format(time.RFC3339)),
		})
	})
	s.metrics.approvalWait.Observe(time.Since(waitStart).Seconds())
	if err != nil {
		a.endRunError(ctx, err)
		return
	}
	a.obj.Approval.Mode = api.Mode(res.Mode.String())
	a.obj.Approval.ID = string(res.RequestID)
	a.obj.Approval.DecidedBy = res.Reviewer
	a.obj.Approval.Reason = res.Reason
	switch res.Status {
	case approvals.StatusApproved:
		a.obj.Approval.Decision = api.DecisionApprove
	case approvals.StatusDenied:
		a.obj.Approval.Decision = api.DecisionDeny
		detail := "a reviewer denied the " + res.Mode.String()
		if res.Reviewer != "" {
			detail += " (" + res.Reviewer + ")"
		}
		a.end(ctx, sshexec.Denied, detail, 0)
		return
	default:
		a.obj.Approval.Decision = api.DecisionExpired
		a.end(ctx, sshexec.Expired, "no reviewer decided before the approval deadline", 0)
		return
	}

	// 5. A slot on the target, within the action's deadline.
	deadline := time.Now().Add(timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case s.slots[target.Name] <- struct{}{}:
		defer func() { <-s.slots[target.Name] }()
	case <-dctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			a.end(ctx, sshexec.Cancelled, "cancelled while waiting for a free connection slot on the target", sshexec.NotStarted)
		} else {
			a.end(ctx, sshexec.TimedOut, fmt.Sprintf("the action deadline passed while %d other actions held every connection slot of the target", target.MaxParallel), sshexec.NotStarted)
		}
		return
	}

	// 6. The intent, durable before anything is dialed. A per-action
	// certificate names the action (key ID) and its action.requested
	// entry (serial), so the target's sshd log points into the chain.
	signer, cert, err := s.signerFor(account, a.obj.ID, uint64(requested.Seq), timeout)
	if err != nil {
		a.end(ctx, sshexec.Rejected, err.Error(), 0)
		return
	}
	connecting := actionConnecting{Address: target.Address, Account: account.Name, Credential: account.Credential, Cert: cert}
	if _, err := s.record(ctx, a.obj.ID, a.obj.RunID, connecting); err != nil {
		s.log.Error("audit append failed; nothing dialed", "action", a.obj.ID, "error", err)
		a.obj.Outcome, a.obj.Detail = sshexec.AuditUnavailable, "the intent could not be recorded in the audit log, so nothing was dialed"
		a.answer()
		return
	}

	// 7. One fresh connection, one command.
	started := time.Now().UTC()
	a.obj.StartedAt = &started
	st.setState(api.StateConnecting, api.StateEvent{})
	cfg := &sshexec.Config{
		Addr:     target.Address,
		User:     account.Name,
		Signers:  []ssh.Signer{signer},
		HostKeys: sshexec.HostKeys{Pinned: target.HostKeys},
		Timeout:  time.Until(deadline),
	}
	if target.KnownHostsFile != "" {
		cfg.HostKeys.KnownHostsFiles = []string{target.KnownHostsFile}
	}
	var runningOnce sync.Once
	running := func() { runningOnce.Do(func() { st.setState(api.StateRunning, api.StateEvent{}) }) }
	cfg.Started = running
	cfg.Output = func(stream sshexec.Stream, p []byte) {
		running() // output can be read before the exec reply is
		if account.Output == OutputFull {
			st.output(stream, p)
		}
	}
	res2, err := sshexec.Run(ctx, cfg, req.Command)
	if res2 == nil {
		// The configuration was validated at start; this is a bug or a
		// known_hosts file that vanished. Nothing was dialed.
		a.end(ctx, sshexec.Rejected, fmt.Sprintf("target %q cannot be used: %v", target.Name, err), 0)
		return
	}
	s.observePhases(res2)
	a.fromResult(res2)

	// 8. Outputs to the store, the result to the chain — also when the
	// caller has gone (cancelled): what ran is recorded in full.
	fin := actionFinished{Result: resultOf(res2)}
	blobs, err := s.outputs.PutAll(context.WithoutCancel(ctx), res2.Stdout, res2.Stderr)
	if err != nil {
		s.log.Error("output store failed", "action", a.obj.ID, "error", err)
		a.mayHaveRun(ctx, "the output could not be stored", fin)
		return
	}
	fin.Stdout, fin.Stderr = &blobs[0], &blobs[1]
	if err := a.recordFinished(ctx, fin); err != nil {
		s.log.Error("audit append of the result failed", "action", a.obj.ID, "error", err)
		a.mayHaveRun(ctx, "the result could not be recorded in the audit log", fin)
		return
	}
	a.setOutput(res2.Stdout, res2.Stderr, res2.StdoutBytes, res2.StderrBytes, account.Output)
	a.answer()
}

// lifecycle carries one action's object through execute.
type lifecycle struct {
	s   *Server
	st  *actionState
	obj api.Action
}

// end records action.finished for an action that ends before (or without)
// a connection and answers.
func (a *lifecycle) end(ctx context.Context, outcome sshexec.Outcome, detail string, termination sshexec.Termination) {
	a.obj.Outcome, a.obj.Detail, a.obj.Termination = outcome, detail, termination
	if err := a.recordFinished(ctx, actionFinished{}); err != nil {
		a.s.log.Error("audit append failed", "action", a.obj.ID, "error", err)
		a.obj.Outcome = sshexec.AuditUnavailable
		a.obj.Detail = "the outcome (" + outcome.String() + ") could not be recorded in the audit log; nothing was run"
		a.obj.Termination = 0
	}
	a.answer()
}

// mayHaveRun answers audit_unavailable after the command may have run: the
// caller must not retry blindly. fin holds the result's facts, recorded
// with it.
func (a *lifecycle) mayHaveRun(ctx context.Context, why string, fin actionFinished) {
	ran := a.obj.Outcome
	a.obj.Outcome = sshexec.AuditUnavailable
	a.obj.Detail = why + "; the command may have run (its outcome was " + ran.String() + ")"
	// Leave a trace: now, or as soon as the audit log takes it (a full
	// disk may have room again). If the gateway stops first, recovery
	// finishes the action as interrupted.
	if err := a.recordFinished(context.WithoutCancel(ctx), fin); err != nil {
		late := &lifecycle{s: a.s, st: a.st, obj: a.obj}
		fin.RecordedLate = true
		a.s.background.Go(func() { late.recordFinishedLate(fin) })
	}
	a.answer()
}

// Retries of an action.finished entry the audit log refused.
const (
	lateRecordFirst = time.Second
	lateRecordMax   = 30 * time.Second
	lateRecordLast  = 5 * time.Second // the last try, when the gateway stops
)

// recordFinishedLate retries recordFinished, backing off, until it
// succeeds or the gateway stops; then it tries once more, since the log
// stays open until its background work is done.
func (a *lifecycle) recordFinishedLate(fin actionFinished) {
	for delay := lateRecordFirst; ; delay = min(2*delay, lateRecordMax) {
		select {
		case <-a.s.base.Done():
			ctx, cancel := context.WithTimeout(context.Background(), lateRecordLast)
			defer cancel()
			if err := a.recordFinished(ctx, fin); err != nil {
				a.s.log.Error("stopping before the outcome could be recorded; recovery will record the action as interrupted", "action", a.obj.ID, "error", err)
				return
			}
			a.s.log.Info("outcome recorded late, at shutdown", "action", a.obj.ID, "outcome", a.obj.Outcome)
			return
		case <-time.After(delay):
		}
		if err := a.recordFinished(a.s.base, fin); err != nil {
			a.s.log.Warn("outcome still not recorded; retrying", "action", a.obj.ID, "error", err, "retry_in", min(2*delay, lateRecordMax))
			continue
		}
		a.s.log.Info("outcome recorded late", "action", a.obj.ID, "outcome", a.obj.Outcome)
		return
	}
}

// recordFinished records action.finished with the action's outcome and
// approval, and the facts fin already holds.
func (a *lifecycle) recordFinished(ctx context.Context, fin actionFinished) error {
	fin.Outcome, fin.Detail, fin.Termination = a.obj.Outcome, a.obj.Detail, a.obj.Termination
	if a.obj.Approval.ID != "" {
		fin.Approval = &approvalFacts{ID: a.obj.Approval.ID, Mode: a.obj.Approval.Mode}
	}
	fin.DecidedBy, fin.ApprovalReason = a.obj.Approval.DecidedBy, a.obj.Approval.Reason
	// The outcome is recorded even when the caller has gone: use a context
	// that is not cancelled with it.
	_, err := a.s.record(context.WithoutCancel(ctx), a.obj.ID, a.obj.RunID, fin)
	return err
}

// answer publishes the final object.
func (a *lifecycle) answer() {
	now := time.Now().UTC()
	a.obj.FinishedAt = &now
	a.s.metrics.actions.WithLabelValues(a.obj.Outcome.String()).Inc()
	code := ""
	if a.obj.ExitCode != nil {
		code = strconv.Itoa(*a.obj.ExitCode)
	}
	a.s.log.Info("action", "id", a.obj.ID, "run", a.obj.RunID, "target", a.obj.Target, "account", a.obj.Account,
		"outcome", a.obj.Outcome, "exit_code", code)
	a.st.finish(a.obj)
}

// endRunError ends an action whose run could not be resolved or approved.
func (a *lifecycle) endRunError(ctx context.Context, err error) {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		a.end(ctx, sshexec.Cancelled, "the caller went away before the action started", sshexec.NotStarted)
	case errors.Is(err, approvals.ErrEventNotRecorded):
		a.obj.Outcome, a.obj.Detail = sshexec.AuditUnavailable, "an approval event could not be recorded in the audit log, so nothing was run"
		a.answer()
	case errors.Is(err, approvals.ErrRunDenied):
		a.obj.Approval.Decision = api.DecisionDeny
		a.end(ctx, sshexec.Denied, "a reviewer denied this run; a new agent process needs a new approval", 0)
	case errors.Is(err, approvals.ErrRunEnded):
		a.end(ctx, sshexec.Rejected, "the run has ended; start a new one", 0)
	case errors.Is(err, approvals.ErrRunExpired), errors.Is(err, approvals.ErrTokenExpired):
		a.end(ctx, sshexec.Rejected, "the run's approval or token has expired; start a new run", 0)
	case errors.Is(err, approvals.ErrOutOfScope):
		a.end(ctx, sshexec.Rejected, "the run's approval does not cover this target or account, or its action budget is spent", 0)
	case errors.Is(err, approvals.ErrNoAnchor), errors.Is(err, approvals.ErrNoProcess), errors.Is(err, approvals.ErrPeerMismatch), errors.Is(err, approvals.ErrNotAncestor):
		a.end(ctx, sshexec.Rejected, "the calling process could not be identified as an agent process", 0)
	case errors.Is(err, approvals.ErrWrongToken), errors.Is(err, approvals.ErrMalformedToken), errors.Is(err, approvals.ErrUnknownRun):
		a.end(ctx, sshexec.Rejected, "the run token is not valid", 0)
	default:
		a.s.log.Error("approval failed", "action", a.obj.ID, "error", err)
		a.end(ctx, sshexec.Rejected, "the approval could not be obtained: "+err.Error(), 0)
	}
}

func (a *lifecycle) fromResult(r *sshexec.Result) {
	a.obj.Outcome = r.Outcome
	a.obj.Detail = r.Detail
	a.obj.Termination = r.Termination
	a.obj.HostKeyFingerprint = r.HostKeyFingerprint
	a.obj.Signal = r.Signal
	if r.HasExitCode {
		code := r.ExitCode
		a.obj.ExitCode = &code
	}
	if r.Outcome == sshexec.Exited {
		a.obj.Detail = fmt.Sprintf("exit status %d", r.ExitCode)
	}
}

// setOutput applies the account's output policy to what the agent gets.
func (a *lifecycle) setOutput(stdout, stderr []byte, stdoutN, stderrN int64, p OutputPolicy) {
	out, outCut := policyView(stdout, p)
	errb, errCut := policyView(stderr, p)
	a.obj.Stdout, a.obj.StdoutEncoding = api.EncodeBytes(out)
	a.obj.Stderr, a.obj.StderrEncoding = api.EncodeBytes(errb)
	a.obj.StdoutBytes, a.obj.StderrBytes = stdoutN, stderrN
	a.obj.StdoutTruncated = outCut || int64(len(stdout)) < stdoutN
	a.obj.StderrTruncated = errCut || int64(len(stderr)) < stderrN
}

// policyView returns what the policy lets the agent see, and whether it cut
// anything.
func policyView(b []byte, p OutputPolicy) ([]byte, bool) {
	switch p {
	case OutputNone:
		return nil, len(b) > 0
	case OutputTail:
		if len(b) <= tailSize {
			return b, false
		}
		t := b[len(b)-tailSize:]
		for i := 0; i < utf8.UTFMax && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
			t = t[1:] // start on a character boundary
		}
		return t, true
	}
	return b, false
}

// maxListedNames bounds the names an error lists.
const maxListedNames = 12

// nameList lists names for an error, at most maxListedNames of them.
func nameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > maxListedNames {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListedNames], ", "), len(names)-maxListedNames)
	}
	return strings.Join(names, ", ")
}

// resolveRequest checks a request against the configuration; problem says
// why it is rejected.
func (s *Server) resolveRequest(req api.ActionRequest) (*TargetConfig, *AccountConfig, time.Duration, string) {
	t, ok := s.cfg.Targets[req.Target]
	if !ok {
		return nil, nil, 0, fmt.Sprintf("unknown target %q (targets: %s)", req.Target, nameList(s.cfg.TargetNames))
	}
	name := req.Account
	if name == "" {
		name = t.DefaultAccount
		if name == "" {
			return nil, nil, 0, fmt.Sprintf("target %q has no default account; name one of %s", t.Name, nameList(t.AccountNames))
		}
	}
	acct, ok := t.Accounts[name]
	if !ok {
		return nil, nil, 0, fmt.Sprintf("target %q has no account %q (accounts: %s)", t.Name, name, nameList(t.AccountNames))
	}
	// Compare seconds before multiplying: a huge timeout_s would overflow
	// a Duration into a small or negative one.
	timeout := min(DefaultActionTimeout, acct.MaxTimeout)
	switch {
	case req.TimeoutS < 0:
		return t, acct, 0, "timeout_s must be positive"
	case int64(req.TimeoutS) > int64(acct.MaxTimeout/time.Second):
		return t, acct, 0, fmt.Sprintf("timeout_s %d is over the account's maximum of %d seconds", req.TimeoutS, int64(acct.MaxTimeout/time.Second))
	case req.TimeoutS != 0:
		timeout = time.Duration(req.TimeoutS) * time.Second
	}
	switch {
	case strings.TrimSpace(req.Command) == "":
		return t, acct, timeout, "the command is empty; an action is one command"
	case len(req.Command) > maxCommandLen:
		return t, acct, timeout, fmt.Sprintf("the command is %d bytes, over the %d-byte limit", len(req.Command), maxCommandLen)
	case strings.ContainsRune(req.Command, 0):
		return t, acct, timeout, "the command contains a NUL byte"
	case !utf8.ValidString(req.Command):
		return t, acct, timeout, "the command is not valid UTF-8"
	}
	return t, acct, timeout, ""
}

// resolveRun finds or creates the caller's run.
// findRun returns the caller's existing run, whatever its state, without
// creating or changing one: for reading and for naming the run of a
// refused request.
func (s *Server) findRun(ctx context.Context, c caller) (approvals.Run, error) {
	if c.local {
		return s.store.FindLocal(ctx, approvals.Peer{PID: int(c.peer.PID), UID: int(c.peer.UID), GID: int(c.peer.GID)})
	}
	return s.store.FindRemote(ctx, c.runToken)
}

func (s *Server) resolveRun(ctx context.Context, c caller) (approvals.Run, error) {
	if c.local {
		return s.store.ResolveLocal(ctx, approvals.Peer{PID: int(c.peer.PID), UID: int(c.peer.UID), GID: int(c.peer.GID)})
	}
	return s.store.ResolveRemote(ctx, c.runToken)
}

// signerFor returns the credential of an account: its key, or a fresh
// key with a certificate for this one action, described by the returned
// audit fields.
func (s *Server) signerFor(a *AccountConfig, actionID string, serial uint64, timeout time.Duration) (ssh.Signer, *certIssued, error) {
	cred := s.cfg.Credentials[a.Credential]
	if cred != nil && cred.CA {
		cert, err := deploy.NewActionCert(s.ca, deploy.CertRequest{
			ActionID: actionID, Account: a.Name, Serial: serial, Timeout: timeout,
			ForceCommand: cred.ForceCommand, SourceAddress: cred.SourceAddress,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("the certificate for this action could not be made: %v", err)
		}
		return cert.Signer, &certIssued{KeyID: cert.KeyID, Serial: cert.Serial, ValidBefore: cert.ValidBefore}, nil
	}
	signer, ok := s.signers[a.Credential]
	if !ok {
		return nil, nil, fmt.Errorf("credential %q of account %q is not usable", a.Credential, a.Name)
	}
	return signer, nil, nil
}

func (s *Server) observePhases(r *sshexec.Result) {
	for phase, d := range map[string]time.Duration{
		"dial": r.Timings.Dial, "handshake": r.Timings.Handshake, "auth": r.Timings.Auth,
		"session": r.Timings.Session, "command": r.Timings.Command, "total": r.Timings.Total,
	} {
		if d > 0 {
			s.metrics.phase.WithLabelValues(phase).Observe(d.Seconds())
		}
	}
}

// quoteArgv renders argv for the audit log, each argument quoted.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
