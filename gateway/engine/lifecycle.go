package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/api"
	cmdclass "github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec"
)

const (
	// MaxCommandLen bounds a command; sshd's own limit on a packet is
	// higher, but a reviewer must be able to read what they approve.
	MaxCommandLen = 32 << 10
)

// The action lifecycle, in the order docs/architecture.md tells it:
//
//  1. resolve: target, account and timeout from the configuration only;
//     the caller's run; action.requested, whatever follows.
//  2. approve: the run or the call, as policy says.
//  3. slot: a free connection slot on the target, within the deadline.
//  4. connect: action.connecting, durable before anything is dialed; one
//     fresh connection, one command (sshexec.Run); the outputs to the
//     store and action.finished to the chain.
//
// Each step either hands on or ends the action with its one outcome.

// lifecycle carries one action through its steps. The action object (in
// a) shows the progress; the outcome is kept here until answer publishes
// it with everything else terminal at once, so that nobody ever reads an
// outcome that a failed audit write would still change.
type lifecycle struct {
	e   *core
	a   *Action
	c   Caller
	req api.ActionRequest
	// conf is the configuration the action runs under from its start to
	// its end, whatever a reload does meanwhile.
	conf *loaded

	target  *config.Target
	account *config.Account
	timeout time.Duration
	// intentRecorded is set once action.connecting is in the audit log:
	// from then on only the recorded outcome frees the action's row in
	// flight (replicas).
	intentRecorded bool
	// stdin is the standard input to send, nil for none.
	stdin []byte
	// secret is the gateway-held secret stdin is, "" for none; grant
	// what allowed it; mask hides its value in the output.
	secret, grant string
	mask          *secretMask
	kept          *keptOutput // the output, as passed on (execConfig)
	// classReason is why the command has its class (redacted);
	// escalation why no run approval covers it, "" when one may.
	classReason, escalation string
	// parts are the parts that decided the class; unreviewed is set when
	// the account's policy lets the class pass with no reviewer.
	parts      []cmdclass.Part
	unreviewed bool
	// readOnly is set when the command goes to the target marked
	// read-only (marksReadOnly).
	readOnly bool
	// opa is what the external policy engine answered, nil when it was
	// not asked.
	opa *opaFacts
	// xfer is the file transfer the action is, nil for a command; mode a
	// put's file mode; upload a put's bytes (facts: uploaded), taken from
	// the spool for this action alone.
	xfer     *approvals.Transfer
	mode     fs.FileMode
	upload   *spoolFile
	uploaded *approvals.Stdin
	run      approvals.Run
	// runStep is the next step of a run's refusal (refuseRun), nil else.
	runStep *api.NextStepInfo
	// requested is where action.requested landed: a per-action
	// certificate's serial.
	requested auditchain.Ref
	// ph times the steps (see phases).
	ph phases
	// deadline is the action's, from the slot wait on, on the engine
	// clock's monotonic scale (Elapsed).
	deadline time.Duration

	res result
}

// result is the terminal part of the action object.
type result struct {
	outcome     sshexec.Outcome
	detail      string
	termination sshexec.Termination
	// conn is what sshexec reported, when a connection was attempted.
	conn *sshexec.Result
	// stored is the recorded result naming the output store's blobs,
	// once the outputs are stored and the outcome recorded.
	stored *actionFinished
	// stopped is why the engine cancelled the action, nil if it did not.
	stopped *stopCause
}

// execute runs the lifecycle of a.
func (e *core) execute(ctx context.Context, a *Action, c Caller, req api.ActionRequest) {
	SetCPUPhase(phaseCheck)
	l := &lifecycle{e: e, a: a, c: c, req: req, conf: e.conf(), ph: phases{begun: e.clock.Now(), now: e.clock.Now}}
	defer func() {
		e.observe(&l.ph, l.a.Snapshot())
		l.dropUpload()
	}()
	if !l.resolve(ctx) || !l.approve(ctx) {
		return
	}
	release, ok := l.slot(ctx)
	if !ok {
		return
	}
	defer release()
	// Past its deadline the action waits for no slow reader: it is being
	// stopped, and its outcome must not wait either.
	stop := e.clock.AfterFunc(l.remaining(), a.releaseNow)
	defer stop()
	l.connect(ctx)
}

// resolve is step 1.
func (l *lifecycle) resolve(ctx context.Context) bool {
	e := l.e
	var problem string
	l.target, l.account, l.timeout, problem = resolveRequest(l.conf.cfg, l.req)
	switch {
	case problem != "":
	case l.req.Put != nil || l.req.Get != nil:
		problem = l.checkTransfer()
	default:
		l.stdin, problem = stdinOf(l.req.Stdin, l.account)
	}
	if problem == "" && l.req.Secret != "" {
		problem = l.secretStdin()
	}
	if problem == "" {
		problem = l.classify()
	}
	if red := l.a.redaction; problem == "" && red.Found() && l.account.OnSecret == config.OnSecretRefuse {
		var found []string
		for _, sp := range red.Spans {
			found = append(found, fmt.Sprintf("%s at byte %d", sp.Rule, sp.Offset))
		}
		problem = "the command holds what looks like a credential (" + strings.Join(found, ", ") +
			"), and this account refuses such commands (on_secret = \"refuse\"): pass the value as a gateway secret (--secret) instead"
	}
	if l.target != nil {
		timeoutS := int(l.timeout / time.Second)
		if l.req.TimeoutS != 0 {
			timeoutS = l.req.TimeoutS // as asked, also when refused
		}
		l.a.update(func(o *api.Action) {
			o.Account, o.TimeoutS = l.account.Name, timeoutS
			o.Approval.Mode = api.Mode(l.account.Approval.String())
		})
		l.a.mu.Lock()
		l.a.policy = l.account.Output
		l.a.mu.Unlock()
	}
	switch {
	case l.secret != "":
		l.a.update(func(o *api.Action) { o.Secret = l.secret })
	case l.stdin != nil:
		sum := sha256.Sum256(l.stdin)
		l.a.update(func(o *api.Action) { o.StdinBytes, o.StdinSHA256 = int64(len(l.stdin)), hex.EncodeToString(sum[:]) })
	}

	l.ph.mark(phaseCheck)

	// The run. A refused request still names the run it came from, when
	// there is one, so that the agent can read it back and an
	// investigator can place it: a refusal returns its run for that.
	var runErr error
	if problem == "" {
		l.run, runErr = e.resolveRun(ctx, l.c)
	} else {
		l.run, _ = e.findRun(ctx, l.c) // nothing is created or changed
	}
	l.ph.mark(phaseRun)
	if problem == "" && runErr == nil {
		// Narrowing that needs the run: the external policy engine, then
		// the quotas (which count only what every other rule let pass).
		switch {
		case l.req.Put != nil:
			problem = l.takeUpload()
		case l.req.Get != nil:
			problem = l.roomForGet()
		}
		if problem == "" {
			problem = l.askOPA(ctx)
		}
		if problem == "" {
			problem = l.takeQuota(ctx)
		}
	}
	l.ph.mark(phasePolicy)
	l.a.update(func(o *api.Action) { o.RunID = string(l.run.ID) }) // its agent may follow it while it runs
	l.a.markResolved()

	// action.requested, whatever follows: every request is accounted.
	obj := l.a.Snapshot()
	rq := actionRequested{Target: obj.Target, Account: obj.Account, Command: obj.Command, TimeoutS: int64(obj.TimeoutS), Reason: obj.Reason,
		Secret: clip(l.req.Secret, 64), SecretGrant: l.grant, Class: obj.Class, ClassReason: l.classReason, Escalation: l.escalation,
		Unreviewed: l.unreviewed, OPA: l.opa, Transfer: l.transferFacts()}
	if red := l.a.redaction; red.Found() {
		mac := redact.MAC(e.commandKey, l.req.Command)
		rq.Redactions, rq.CommandHMAC = red.Spans, &mac
	}
	if l.stdin != nil && l.secret == "" {
		n, sum := int64(len(l.stdin)), sha256.Sum256(l.stdin)
		rq.StdinBytes, rq.StdinSHA256 = &n, &sum
	}
	if l.c.Local {
		pid, uid := int64(l.c.Peer.PID), int64(l.c.Peer.UID)
		rq.Transport, rq.PeerPID, rq.PeerUID = "socket", &pid, &uid
	} else {
		rq.Transport, rq.RemoteAddr = "http", l.c.RemoteAddr
	}
	var err error
	if l.requested, err = e.record(ctx, l.a.id, obj.RunID, rq); err != nil {
		e.log.Error("audit append failed; nothing dialed", "action", l.a.id, "error", err)
		l.answerUnrecorded("the request could not be recorded in the audit log, so nothing was run")
		return false
	}
	l.ph.mark(phaseRequested)
	switch {
	case problem != "":
		l.end(ctx, sshexec.Rejected, problem, 0)
		return false
	case runErr != nil:
		l.endRunError(ctx, runErr)
		return false
	}
	return true
}

// approve is step 2.
func (l *lifecycle) approve(ctx context.Context) bool {
	e := l.e
	waitStart := e.clock.Elapsed()
	res, err := e.store.Authorize(ctx, l.run.ID, approvals.Action{
		Target: l.target.Name, Account: l.account.Name, Command: l.req.Command, Timeout: l.timeout,
		Stdin: l.stdinFacts(), Secret: l.secret, AgentReason: l.a.Snapshot().Reason,
		Shown: l.a.redaction.Text, Redactions: l.a.redaction.Spans,
		Class: l.a.Snapshot().Class, ClassReason: l.classReason, Escalation: l.escalationText(),
		Unreviewed: l.unreviewed, Transfer: l.xfer,
	}, func(r approvals.Request) {
		why := l.approvalWhy(r.Kind)
		expires := r.ExpiresAt.UTC()
		l.a.update(func(o *api.Action) { o.Approval.ID, o.Approval.Why = string(r.ID), why })
		l.a.setState(api.StateWaitingApproval, api.StateEvent{
			ApprovalID: string(r.ID), Kind: r.Kind.String(), Message: renewalNote(r, l.waitingMessage(r, why)), Reason: l.escalation, ExpiresAt: &expires,
		})
	})
	e.metrics.approvalWait.Observe((e.clock.Elapsed() - waitStart).Seconds())
	l.ph.mark(phaseApproval)
	if err != nil {
		l.endRunError(ctx, err)
		return false
	}
	decision := api.DecisionExpired
	switch res.Status {
	case approvals.StatusApproved:
		decision = api.DecisionApprove
	case approvals.StatusDenied:
		decision = api.DecisionDeny
	}
	info := api.ApprovalInfo{Mode: api.Mode(res.Mode.String()), ID: string(res.RequestID),
		DecidedBy: res.Reviewer, Reason: res.Reason, Decision: decision, Why: l.a.Snapshot().Approval.Why}
	switch {
	case res.Unreviewed:
		info = api.ApprovalInfo{Mode: api.ModeUnreviewed, Decision: decision,
			Reason: "the account's policy lets " + l.a.Snapshot().Class + " commands run unreviewed (allow_unreviewed)"}
	case !res.GrantUntil.IsZero():
		until := res.GrantUntil.UTC()
		info.GrantUntil = &until
	}
	l.a.update(func(o *api.Action) { o.Approval = info })
	switch decision {
	case api.DecisionApprove:
		return true
	case api.DecisionDeny:
		detail := "a reviewer denied the " + res.Mode.String()
		if res.Reviewer != "" {
			detail += " (" + res.Reviewer + ")"
		}
		l.end(ctx, sshexec.Denied, detail, 0)
	default:
		l.end(ctx, sshexec.Expired, "no reviewer decided before the approval deadline", 0)
	}
	return false
}

// slot is step 3: a slot on the target, within the action's deadline,
// which starts here.
func (l *lifecycle) slot(ctx context.Context) (release func(), ok bool) {
	l.deadline = l.e.clock.Elapsed() + l.timeout
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer l.e.clock.AfterFunc(l.timeout, cancel)()
	slots := l.conf.slots[l.target.Name]
	select {
	case slots <- struct{}{}:
		if r := l.e.replica; r != nil {
			// The target's slots across every replica, and this action's
			// row until its outcome is recorded (recordFinished).
			got, err := r.claim(dctx, l.a.id, string(l.run.ID), l.target.Name, l.target.MaxParallel)
			if err != nil || !got {
				<-slots
				if err != nil {
					l.e.log.Error("storage failed; nothing dialed", "action", l.a.id, "error", err)
					l.answerUnrecorded("the gateway could not record the action in flight in its database, so nothing was dialed")
					return nil, false
				}
				l.slotTimedOut(ctx)
				return nil, false
			}
		}
		l.ph.mark(phaseSlot)
		return func() {
			<-slots
			if !l.intentRecorded {
				l.e.replica.release(l.a.id)
			}
		}, true
	case <-dctx.Done():
		l.slotTimedOut(ctx)
		return nil, false
	}
}

// remaining is what is left of the action's deadline.
func (l *lifecycle) remaining() time.Duration { return l.deadline - l.e.clock.Elapsed() }

// slotTimedOut ends an action that found no free slot before its deadline
// or its cancellation.
func (l *lifecycle) slotTimedOut(ctx context.Context) {
	if errors.Is(ctx.Err(), context.Canceled) {
		l.end(ctx, sshexec.Cancelled, stoppedDetail(ctx, sshexec.Cancelled, "cancelled while waiting for a free connection slot on the target"), sshexec.NotStarted)
	} else {
		l.end(ctx, sshexec.TimedOut, fmt.Sprintf("the action deadline passed while %d other actions held every connection slot of the target", l.target.MaxParallel), sshexec.NotStarted)
	}
}

// connect is step 4.
func (l *lifecycle) connect(ctx context.Context) {
	e := l.e
	signer, via, connecting, ok := l.credentials(ctx)
	if !ok || !l.recordIntent(ctx, connecting) {
		return
	}

	// One fresh connection, one command.
	started := e.clock.Now().UTC()
	l.a.update(func(o *api.Action) { o.StartedAt = &started })
	l.a.setState(api.StateConnecting, api.StateEvent{})
	execStart := e.clock.Now()
	l.readOnly = l.marksReadOnly()
	r, err := l.exec(ctx, l.execConfig(signer, via))
	if r == nil {
		// The configuration was validated at start; this is a bug or a
		// known_hosts file that vanished. Nothing was dialed.
		l.end(ctx, sshexec.Rejected, fmt.Sprintf("target %q cannot be used: %v", l.target.Name, err), 0)
		return
	}
	l.takeOutput(r)
	l.ph.connection(execStart, r.Timings)
	l.res = result{outcome: r.Outcome, detail: r.Detail, termination: r.Termination, conn: r}
	switch t := r.Transfer; {
	case r.Outcome == sshexec.Exited && t == nil:
		l.res.detail = fmt.Sprintf("exit status %d", r.ExitCode)
	case r.Success() && t.Direction == "put":
		l.res.detail = fmt.Sprintf("put %d bytes to %s", t.Bytes, t.Path)
	case r.Success():
		l.res.detail = fmt.Sprintf("got %d bytes of %s", t.Bytes, t.Path)
	}
	if l.readOnly {
		l.res.detail += readOnlyNote(r)
	}
	l.res.detail = stoppedDetail(ctx, r.Outcome, l.res.detail)
	l.finish(ctx, r)
}

// recordIntent records action.connecting, durably, before anything is
// dialed; false: the action has ended (answered) without a connection.
func (l *lifecycle) recordIntent(ctx context.Context, connecting actionConnecting) bool {
	e := l.e
	connecting.Secret = l.secret
	if l.stdin != nil && l.secret == "" {
		// Kept only now that it is about to be sent: a refused action's
		// input is described, never stored.
		blobs, err := e.outputs.PutAll(ctx, l.stdin)
		if err != nil {
			e.log.Error("output store failed; nothing dialed", "action", l.a.id, "error", err)
			l.answerUnrecorded("the standard input could not be stored, so nothing was run")
			return false
		}
		connecting.Stdin = &blobs[0]
	}
	if !e.replica.healthy() {
		l.answerUnrecorded("the gateway has lost its database (storage), so nothing was dialed")
		return false
	}
	if _, err := e.record(ctx, l.a.id, string(l.run.ID), connecting); err != nil {
		if l.stoppedBeforeDial(ctx) {
			return false
		}
		e.log.Error("audit append failed; nothing dialed", "action", l.a.id, "error", err)
		if errors.Is(err, auditchain.ErrOutcomeUnknown) {
			// The intent may be in the log after all (the database went
			// away between its commit and the answer): it gets an
			// outcome too, now or once the log takes it.
			l.res = result{outcome: sshexec.AuditUnavailable, termination: sshexec.NotStarted,
				detail: "whether the intent reached the audit log is unknown, so nothing was dialed"}
			l.traceAndAnswer(ctx, actionFinished{})
			return false
		}
		l.answerUnrecorded("the intent could not be recorded in the audit log, so nothing was dialed")
		return false
	}
	l.intentRecorded = true
	l.ph.mark(phaseIntent)
	return true
}

// finish stores what the connection r gave and records action.finished —
// also when the caller has gone (cancelled): what ran is recorded in
// full — and answers.
func (l *lifecycle) finish(ctx context.Context, r *sshexec.Result) {
	e := l.e
	fin := actionFinished{Result: resultOf(r)}
	if t := r.Transfer; t != nil {
		fin.Transfer = &transferDone{Bytes: t.Bytes, SHA256: t.SHA256, Complete: t.Complete,
			Published: t.Published, Replaced: t.Replaced, Leftover: t.Leftover}
	}
	if l.mask != nil {
		n := int64(l.mask.replaced())
		fin.SecretReplacements = &n
	}
	l.keptFacts(&fin)
	outs := [][]byte{r.Stdout, r.Stderr}
	if r.StdoutTail != nil || r.StderrTail != nil {
		outs = append(outs, r.StdoutTail, r.StderrTail)
	}
	blobs, err := e.outputs.PutAll(context.WithoutCancel(ctx), outs...)
	if err != nil {
		e.log.Error("output store failed", "action", l.a.id, "error", err)
		l.mayHaveRun(ctx, "the output could not be stored", fin)
		return
	}
	l.ph.mark(phaseOutput)
	fin.Stdout, fin.Stderr, fin.OutputPolicy = &blobs[0], &blobs[1], l.account.Output
	if r.StdoutTail != nil {
		fin.StdoutTail = &blobs[2]
	}
	if r.StderrTail != nil {
		fin.StderrTail = &blobs[3]
	}
	if err := l.recordFinished(ctx, fin); err != nil {
		e.log.Error("audit append of the result failed", "action", l.a.id, "error", err)
		l.mayHaveRun(ctx, "the result could not be recorded in the audit log", fin)
		return
	}
	l.ph.mark(phaseResult)
	l.res.stored = &fin
	l.answer()
}

// end records action.finished for an action that ends before (or without)
// a connection, and answers.
func (l *lifecycle) end(ctx context.Context, outcome sshexec.Outcome, detail string, termination sshexec.Termination) {
	l.res = result{outcome: outcome, detail: detail, termination: termination}
	if err := l.recordFinished(ctx, actionFinished{}); err != nil {
		l.e.log.Error("audit append failed", "action", l.a.id, "error", err)
		l.res = result{outcome: sshexec.AuditUnavailable,
			detail: "the outcome (" + outcome.String() + ") could not be recorded in the audit log; nothing was run"}
	} else {
		l.ph.mark(phaseResult)
	}
	l.answer()
}

// answerUnrecorded answers audit_unavailable for an action the audit log
// refused before anything was dialed: there is nothing to record it in.
func (l *lifecycle) answerUnrecorded(detail string) {
	l.res = result{outcome: sshexec.AuditUnavailable, detail: detail}
	l.answer()
}

// mayHaveRun answers audit_unavailable after the command may have run: the
// caller must not retry blindly. fin holds the result's facts, recorded
// with it.
func (l *lifecycle) mayHaveRun(ctx context.Context, why string, fin actionFinished) {
	ran := l.res.outcome
	l.res.outcome = sshexec.AuditUnavailable
	l.res.detail = why + "; the command may have run (its outcome was " + ran.String() + ")"
	l.traceAndAnswer(ctx, fin)
}

// traceAndAnswer records action.finished with l.res and fin — now, or as
// soon as the audit log takes it (a full disk may have room again, a
// database come back); if the gateway stops first, recovery finishes the
// action as interrupted — and answers.
func (l *lifecycle) traceAndAnswer(ctx context.Context, fin actionFinished) {
	if err := l.recordFinished(context.WithoutCancel(ctx), fin); err != nil {
		fin.RecordedLate = true
		late := *l
		l.e.background.Go(func() { late.recordFinishedLate(fin) })
	}
	l.answer()
}

// Retries of an action.finished entry the audit log refused.
const (
	lateRecordFirst = time.Second
	lateRecordMax   = 30 * time.Second
	lateRecordLast  = 5 * time.Second // the last try, when the gateway stops
)

// recordFinishedLate retries recordFinished, backing off, until it
// succeeds or the engine stops; then it tries once more, since the log
// stays open until its background work is done.
func (l *lifecycle) recordFinishedLate(fin actionFinished) {
	e := l.e
	for delay := lateRecordFirst; ; delay = min(2*delay, lateRecordMax) {
		select {
		case <-e.base.Done():
			ctx, cancel := context.WithTimeout(context.Background(), lateRecordLast)
			defer cancel()
			if err := l.recordFinished(ctx, fin); err != nil {
				e.log.Error("stopping before the outcome could be recorded; recovery will record the action as interrupted", "action", l.a.id, "error", err)
				return
			}
			e.log.Info("outcome recorded late, at shutdown", "action", l.a.id, "outcome", l.res.outcome)
			return
		case <-time.After(delay):
		}
		if err := l.recordFinished(e.base, fin); errors.Is(err, auditchain.ErrAlreadyFinished) {
			e.log.Error("another gateway replica recorded this action's outcome (interrupted) after this one lost its lease", "action", l.a.id, "outcome_here", l.res.outcome)
			return
		} else if err != nil {
			e.log.Warn("outcome still not recorded; retrying", "action", l.a.id, "error", err, "retry_in", min(2*delay, lateRecordMax))
			continue
		}
		e.log.Info("outcome recorded late", "action", l.a.id, "outcome", l.res.outcome)
		return
	}
}

// recordFinished records action.finished with the action's outcome and
// approval, and the facts fin already holds.
func (l *lifecycle) recordFinished(ctx context.Context, fin actionFinished) error {
	obj := l.a.Snapshot()
	fin.Outcome, fin.Detail, fin.Termination = l.res.outcome, l.res.detail, l.res.termination
	if obj.Approval.ID != "" || obj.Approval.Mode == api.ModeUnreviewed {
		fin.Approval = &approvalFacts{ID: obj.Approval.ID, Mode: obj.Approval.Mode}
		if g := obj.Approval.GrantUntil; g != nil {
			fin.Approval.GrantUntil = *g
		}
	}
	fin.DecidedBy, fin.ApprovalReason = obj.Approval.DecidedBy, obj.Approval.Reason
	if c := causeOf(ctx); c != nil && l.res.outcome == sshexec.Cancelled {
		fin.Stopped, l.res.stopped = c.facts(), c
	}
	// The outcome is recorded even when the caller has gone: use a context
	// that is not cancelled with it.
	_, err := l.e.record(context.WithoutCancel(ctx), l.a.id, obj.RunID, fin)
	if err == nil || errors.Is(err, auditchain.ErrAlreadyFinished) {
		// The action holds no slot across replicas any more.
		l.e.replica.release(l.a.id)
	}
	return err
}

// answer publishes the outcome, and everything else terminal with it; the
// output goes to the followers once and stays in the output store.
func (l *lifecycle) answer() {
	obj := l.a.Snapshot()
	now := l.e.clock.Now().UTC()
	obj.Outcome, obj.Detail, obj.Termination = l.res.outcome, l.res.detail, l.res.termination
	obj.FinishedAt = &now
	if l.mask != nil && l.res.conn != nil {
		obj.SecretReplacements = l.mask.replaced()
	}
	obj.Transfer = l.transferView()
	var out *heldOutput
	if r := l.res.conn; r != nil {
		obj.HostKeyFingerprint, obj.Signal, obj.Hop = r.HostKeyFingerprint, r.Signal, r.Hop
		if r.HasExitCode {
			code := r.ExitCode
			obj.ExitCode = &code
		}
		if f := l.res.stored; f != nil {
			stdout, stderr := resultStreams(r)
			outputView(&obj, stdout, stderr, l.account.Output)
			out = f.held(l.a.id, l.account.Output, l.e.spills)
			obj.OutputDropped = droppedView(f.StdoutSpill, f.StderrSpill)
		}
	}
	obj.NextStep = l.nextStep(&obj)
	l.a.finish(obj, out)
	l.e.metrics.actions.WithLabelValues(obj.Outcome.String()).Inc()
	code := ""
	if obj.ExitCode != nil {
		code = strconv.Itoa(*obj.ExitCode)
	}
	l.e.log.Info("action", "id", obj.ID, "run", obj.RunID, "target", obj.Target, "account", obj.Account,
		"outcome", obj.Outcome, "exit_code", code)
}

// endRunError ends an action whose run could not be resolved or approved.
func (l *lifecycle) endRunError(ctx context.Context, err error) {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		l.end(ctx, sshexec.Cancelled, stoppedDetail(ctx, sshexec.Cancelled, "the caller went away before the action started"), sshexec.NotStarted)
	case errors.Is(err, approvals.ErrEventNotRecorded):
		l.answerUnrecorded("an approval event could not be recorded in the audit log, so nothing was run")
	case l.endRunRefused(ctx, err):
	case errors.Is(err, approvals.ErrRunDenied):
		l.a.update(func(o *api.Action) { o.Approval.Decision = api.DecisionDeny })
		l.end(ctx, sshexec.Denied, "a reviewer denied this run; a new agent process needs a new approval", 0)
	case errors.Is(err, approvals.ErrRunEnded):
		// A reviewer who ended the run said no to it: the agent is told
		// who, and why, and not to go on alone.
		var rv *approvals.RevokedError
		if errors.As(err, &rv) {
			detail := "the run was ended by " + rv.By
			if rv.Note != "" {
				detail += ": " + rv.Note
			}
			l.a.update(func(o *api.Action) {
				o.Approval.Decision, o.Approval.DecidedBy, o.Approval.Reason = api.DecisionDeny, rv.By, rv.Note
			})
			l.end(ctx, sshexec.Denied, detail+"; do not retry without asking a human", 0)
			return
		}
	case errors.Is(err, approvals.ErrOutOfScope):
		l.end(ctx, sshexec.Rejected, "the run's approval, or the agent's limits, do not cover this target or account", 0)
	case errors.Is(err, approvals.ErrNoAnchor), errors.Is(err, approvals.ErrNoProcess), errors.Is(err, approvals.ErrPeerMismatch), errors.Is(err, approvals.ErrNotAncestor):
		l.end(ctx, sshexec.Rejected, "the calling process could not be identified as an agent process", 0)
	case errors.Is(err, approvals.ErrWrongToken), errors.Is(err, approvals.ErrMalformedToken), errors.Is(err, approvals.ErrUnknownRun):
		l.end(ctx, sshexec.Rejected, "the run token is not valid", 0)
	case sqldb.Unavailable(err):
		// The database is not answering (replicas on PostgreSQL): nothing
		// was decided, nothing is run, and the agent is not told about
		// the database.
		l.e.log.Error("storage unavailable; nothing run", "action", l.a.id, "error", err)
		l.answerUnrecorded("the gateway's state could not be read or written, so nothing was run; retry later")
	default:
		l.e.log.Error("approval failed", "action", l.a.id, "error", err)
		l.end(ctx, sshexec.Rejected, "the approval could not be obtained: "+err.Error(), 0)
	}
}
