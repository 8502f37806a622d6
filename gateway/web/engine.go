package web

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
)

const (
	// recentRuns bounds the ended runs the runs page shows.
	recentRuns = 20
	// runHistory bounds the actions shown with each run.
	runHistory = 10
	// latestEntries is how many audit entries the audit page shows.
	latestEntries = 50
)

// EngineBackend is the pages' Backend over the gateway's engine: it
// translates the engine's views and refusals into the pages' own.
type EngineBackend struct {
	review *engine.Review
	runs   *engine.Runs
	audit  *engine.Audit

	verifyMu   sync.Mutex // one verification at a time
	mu         sync.Mutex
	lastVerify *Verification
}

// NewEngineBackend returns the Backend of the pages over the engine's
// review, its runs and its audit log: what reviewers do and read.
func NewEngineBackend(review *engine.Review, runs *engine.Runs, audit *engine.Audit) *EngineBackend {
	return &EngineBackend{review: review, runs: runs, audit: audit}
}

// pageError turns the engine's refusal into the pages' word for it.
func pageError(err error) error {
	if errors.Is(err, engine.ErrRateLimited) {
		return &LimitError{Message: err.Error(), RetryAfter: engine.RetryAfter(err)}
	}
	for _, c := range []struct{ from, to error }{
		{engine.ErrNotFound, ErrNotFound},
		{engine.ErrAlreadyDecided, ErrAlreadyDecided},
		{engine.ErrExpired, ErrExpired},
		{engine.ErrRunEnded, ErrRunEnded},
		{engine.ErrChanged, ErrChanged},
		{engine.ErrSelfApproval, ErrSelfApproval},
		{engine.ErrForbidden, ErrForbidden},
		{engine.ErrUnavailable, ErrUnavailable},
		{engine.ErrRateLimited, ErrRateLimited},
		{engine.ErrUnauthorized, ErrBadCredentials},
		{engine.ErrFinished, ErrFinished},
	} {
		if errors.Is(err, c.from) {
			return c.to
		}
	}
	if errors.Is(err, engine.ErrInvalid) {
		return fmt.Errorf("%w: %s", ErrInvalid, err.Error())
	}
	return err
}

func reviewerOf(rv Reviewer) (engine.Reviewer, bool) {
	r, ok := rv.(engine.Reviewer)
	return r, ok
}

// Login checks a reviewer's password with the same budgets as POST
// /v1/login: a guesser gains nothing by switching between the API and the
// pages.
func (b *EngineBackend) Login(ctx context.Context, name, password, device, remoteAddr string) (Reviewer, Device, error) {
	rv, err := b.review.Login(ctx, name, password, engine.NewSecret(device), remoteAddr)
	if err != nil {
		return nil, Device{}, pageError(err)
	}
	proof, until := b.review.RememberDevice(rv)
	return rv, Device{Proof: proof.Reveal(), Expires: until}, nil
}

// LoginLink consumes a one-time login link.
func (b *EngineBackend) LoginLink(ctx context.Context, token, remoteAddr string) (Reviewer, error) {
	rv, err := b.review.LoginLink(ctx, token, remoteAddr)
	if err != nil {
		return nil, pageError(err)
	}
	return rv, nil
}

// Enabled reports whether rv may still act.
func (b *EngineBackend) Enabled(ctx context.Context, rv Reviewer) bool {
	r, ok := reviewerOf(rv)
	return ok && b.review.Enabled(ctx, r)
}

// Pending lists the pending requests, newest first.
func (b *EngineBackend) Pending(ctx context.Context) ([]Card, error) {
	reqs, err := b.review.Pending(ctx)
	if err != nil {
		return nil, pageError(err)
	}
	mem := b.review.Recent()
	cards := make([]Card, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- { // newest first
		cards = append(cards, b.card(ctx, reqs[i], mem))
	}
	return cards, nil
}

// card describes a request with everything a reviewer judges it by.
func (b *EngineBackend) card(ctx context.Context, q engine.Request, mem []api.Action) Card {
	c := Card{
		ID: q.ID, Kind: string(q.Kind), Status: q.State, RunID: q.RunID,
		Target: q.Target, Account: q.Account, Command: q.Command, Timeout: q.Timeout,
		Digest: q.Digest, RequestedAt: q.RequestedAt, ExpiresAt: q.ExpiresAt,
		Requester: q.Requester, DecidedBy: q.DecidedBy, Reason: q.Reason, AgentReason: q.AgentReason,
		Secret: q.Secret, Class: q.Class, ClassReason: q.ClassReason, Escalation: q.Escalation, Renews: q.Renews,
	}
	for _, r := range q.Redactions {
		c.Redacted = append(c.Redacted, r.Rule)
	}
	if t := q.Transfer; t != nil {
		c.Transfer = t.Direction
	}
	if q.StdinSHA256 != "" {
		c.Stdin = &StdinView{Size: int(q.StdinBytes), SHA256: q.StdinSHA256, Text: q.StdinText}
	}
	if t, ok := b.review.Target(q.Target); ok {
		c.Address, c.KnownHosts = t.Address, t.KnownHostsFile != ""
		for _, k := range t.HostKeys {
			c.HostKeys = append(c.HostKeys, ssh.FingerprintSHA256(k))
		}
	}
	if run, err := b.runs.Get(ctx, q.RunID); err == nil {
		c.Run = runOf(run, mem)
	}
	for _, a := range mem {
		if a.Approval.ID == q.ID && a.State == api.StateWaitingApproval {
			c.Waiting = append(c.Waiting, a.ID)
		}
	}
	if q.ForRun() {
		c.TTLs, c.DefaultTTL = b.review.TTLChoices()
	} else if q.Pending() && q.MaxGrantS > 0 { // none for an action that uses a secret
		c.Grants = b.review.GrantChoices(q.Target, q.Account)
	}
	if q.GrantUntil != nil {
		c.GrantUntil = *q.GrantUntil
	}
	return c
}

// runOf is a run as the pages show it, with its actions among mem.
func runOf(r engine.Run, mem []api.Action) *Run {
	v := &Run{
		ID: r.ID, State: string(r.State), Kind: string(r.Kind), Requester: r.Requester, CreatedAt: r.CreatedAt,
		Explicit: r.Explicit, DecidedBy: r.DecidedBy, Reason: r.Reason, MaxActions: r.MaxActions, Actions: r.Actions,
		Scope: r.Scope, EndedAt: r.EndedAt, EndReason: r.EndReason, EndedBy: r.EndedBy, EndNote: r.EndNote,
	}
	if r.ExpiresAt != nil {
		v.ExpiresAt = *r.ExpiresAt
	}
	if a := r.Anchor; a != nil {
		v.Process = &Process{PID: a.PID, StartTime: a.StartTime, Exe: a.Executable, SHA256: a.SHA256,
			Argv: a.Argv, Cwd: a.Cwd, UID: a.UID, User: a.User, Warnings: r.AnchorWarnings, Covers: a.Covers}
		for _, p := range a.Parents {
			v.Process.Parents = append(v.Process.Parents, Parent{PID: p.PID, UID: p.UID, Comm: p.Argv[0], Exe: p.Executable})
		}
	}
	for _, a := range mem {
		if a.RunID == r.ID && len(v.Recent) < runHistory {
			v.Recent = append(v.Recent, ActionSummary{ID: a.ID, Target: a.Target, Account: a.Account, Command: a.Command,
				State: string(a.State), Outcome: nameOf(a.Outcome), ExitCode: a.ExitCode, RequestedAt: a.RequestedAt})
		}
	}
	return v
}

// Decide records a decision bound to the digest the card showed.
func (b *EngineBackend) Decide(ctx context.Context, rv Reviewer, d Decision) (Card, error) {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return Card{}, ErrForbidden
	}
	id := d.RequestID
	if !engine.ValidRequestID(id) {
		return Card{}, ErrNotFound
	}
	if d.Digest == "" {
		return Card{}, ErrChanged // a card always shows one
	}
	q, err := b.review.Request(ctx, id)
	if err != nil {
		return Card{}, pageError(err)
	}
	dec := engine.Decision{Approve: d.Approve, Reason: d.Reason}
	if d.Approve {
		if !q.ForRun() {
			dec.Grant = d.Grant
		}
		if q.ForRun() {
			if d.TTL > 0 {
				ttl := d.TTL
				dec.TTL = &ttl
			}
			dec.MaxActions = d.MaxActions
			if d.OnlyThisAccount {
				dec.Scope = []engine.Scope{{Target: q.Target, Account: q.Account}}
			}
		}
	}
	decided, err := b.review.Decide(ctx, reviewer, id, dec, d.Digest)
	if err != nil {
		return Card{}, pageError(err)
	}
	return b.card(ctx, decided, nil), nil
}

// Runs lists the active runs and the recently ended ones whose actions
// the engine still holds, newest first.
func (b *EngineBackend) Runs(ctx context.Context) ([]Run, error) {
	active, err := b.runs.Active(ctx)
	if err != nil {
		return nil, pageError(err)
	}
	mem := b.review.Recent()
	seen := map[string]bool{}
	var out []Run
	for i := len(active) - 1; i >= 0; i-- {
		seen[active[i].ID] = true
		out = append(out, *runOf(active[i], mem))
	}
	ended := 0
	for _, a := range mem {
		id := a.RunID
		if id == "" || seen[id] || ended == recentRuns {
			continue
		}
		seen[id] = true
		run, err := b.runs.Get(ctx, id)
		if err != nil {
			continue
		}
		out = append(out, *runOf(run, mem))
		ended++
	}
	return out, nil
}

// Revoke ends an active run; one that ended already is ErrRunEnded.
func (b *EngineBackend) Revoke(ctx context.Context, rv Reviewer, runID, note string) error {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return ErrForbidden
	}
	if !engine.ValidRunID(runID) {
		return ErrNotFound
	}
	run, err := b.runs.Get(ctx, runID)
	switch {
	case err != nil:
		return pageError(err)
	case run.Ended():
		return ErrRunEnded
	}
	if _, err := b.runs.Revoke(ctx, reviewer, runID, note); err != nil {
		return pageError(err)
	}
	return nil
}

// Action returns an action with its audit trail.
func (b *EngineBackend) Action(ctx context.Context, id string) (Action, error) {
	recs, err := b.audit.Reader().ActionEntries(ctx, id)
	if err != nil {
		return Action{}, err
	}
	h, err := b.review.Action(ctx, id)
	if err != nil {
		return Action{}, pageError(err)
	}
	a := h.Snapshot()
	v := Action{
		ID: a.ID, RunID: a.RunID, Target: a.Target, Account: a.Account, Command: a.Command,
		Timeout: time.Duration(a.TimeoutS) * time.Second, State: string(a.State), Outcome: nameOf(a.Outcome), Detail: a.Detail,
		ExitCode: a.ExitCode, Signal: a.Signal, Termination: nameOf(a.Termination), HostKeyFingerprint: a.HostKeyFingerprint,
		RequestedAt: a.RequestedAt, ApprovalMode: string(a.Approval.Mode), ApprovalID: a.Approval.ID, DecidedBy: a.Approval.DecidedBy,
		Decision: string(a.Approval.Decision), ApprovalReason: a.Approval.Reason, StdoutBytes: a.StdoutBytes, StderrBytes: a.StderrBytes,
	}
	if a.StartedAt != nil {
		v.StartedAt = *a.StartedAt
	}
	if a.FinishedAt != nil {
		v.FinishedAt = *a.FinishedAt
	}
	for _, rec := range recs {
		v.Trail = append(v.Trail, entryOf(rec.Entry))
		if rec.Kind == auditchain.KindActionFinished {
			v.OutputStored = engine.OutputStored(rec.Entry)
		}
	}
	return v, nil
}

// nameOf is a closed set's name for display, "" for the zero value (an
// action still in flight has no outcome).
func nameOf[T interface {
	Valid() bool
	String() string
}](v T) string {
	if !v.Valid() {
		return ""
	}
	return v.String()
}

// ReadOutput returns an action's stored output once its reading is
// recorded.
func (b *EngineBackend) ReadOutput(ctx context.Context, rv Reviewer, id string) (Output, error) {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return Output{}, ErrForbidden
	}
	o, err := b.review.ReadOutput(ctx, reviewer, id, "web")
	if err != nil {
		return Output{}, pageError(err)
	}
	return Output{Stdout: o.Stdout, Stderr: o.Stderr, StdoutReceived: o.StdoutReceived, StderrReceived: o.StderrReceived}, nil
}

// RevealCommand returns a pending request's original command once its
// reading is recorded.
func (b *EngineBackend) RevealCommand(ctx context.Context, rv Reviewer, id string) (string, error) {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return "", ErrForbidden
	}
	if !engine.ValidRequestID(id) {
		return "", ErrNotFound
	}
	cmd, err := b.review.RevealCommand(ctx, reviewer, id, "web")
	if err != nil {
		return "", pageError(err)
	}
	return cmd, nil
}

// AuditStatus summarises the audit log.
func (b *EngineBackend) AuditStatus(ctx context.Context) (AuditStatus, error) {
	rd := b.audit.Reader()
	size, err := rd.Size(ctx)
	if err != nil {
		return AuditStatus{}, err
	}
	st := AuditStatus{Origin: b.audit.Origin(), Entries: size, Uncovered: size}
	cps, err := rd.Checkpoints(ctx)
	if err != nil {
		return AuditStatus{}, err
	}
	if n := len(cps); n > 0 {
		last := cps[n-1]
		st.LastCheckpoint = &Checkpoint{Size: last.Size, Note: string(last.Note)}
		st.Uncovered = max(0, size-last.Size)
	}
	b.mu.Lock()
	st.LastVerify = b.lastVerify
	b.mu.Unlock()
	for rec, err := range rd.Entries(ctx, max(-1, size-1-latestEntries)) {
		if err != nil {
			return AuditStatus{}, err
		}
		st.Latest = append(st.Latest, entryOf(rec.Entry))
	}
	slices.Reverse(st.Latest)
	return st, nil
}

// VerifyAudit verifies the whole log now and remembers the result.
func (b *EngineBackend) VerifyAudit(ctx context.Context, rv Reviewer) (Verification, error) {
	b.verifyMu.Lock()
	defer b.verifyMu.Unlock()
	rep, err := b.audit.Verify(ctx)
	if err != nil {
		return Verification{}, err
	}
	v := Verification{At: b.review.Now().UTC(), By: rv.Name(), Intact: rep.Intact(), Entries: rep.Entries, Verified: rep.Verified,
		Checkpoints: rep.Checkpoints, TrustedCheckpoints: rep.TrustedCheckpoints, Covered: rep.Covered, Uncovered: rep.Uncovered}
	for _, d := range rep.Damage {
		v.Problems = append(v.Problems, fmt.Sprintf("%s at seq %d (%s): %s", d.Kind, d.Seq, d.Source, d.Detail))
	}
	if rep.Fork != nil {
		v.Problems = append(v.Problems, fmt.Sprintf("fork: %+v", *rep.Fork))
	}
	if rep.TimeSetBack != nil {
		v.Notes = append(v.Notes, rep.TimeSetBack.String())
	}
	b.mu.Lock()
	b.lastVerify = &v
	b.mu.Unlock()
	return v, nil
}

// entryOf formats an audit entry for display.
func entryOf(e auditchain.Entry) Entry {
	v := Entry{Seq: e.Seq, Time: e.Time, Kind: e.Kind.String(), ActionID: e.ActionID, RunID: e.RunID}
	for _, f := range e.Fields {
		var s string
		switch x := f.Value.(type) {
		case string:
			s = x
		case int64:
			s = strconv.FormatInt(x, 10)
		case bool:
			s = strconv.FormatBool(x)
		case []byte:
			s = fmt.Sprintf("%x", x)
		default:
			s = fmt.Sprint(x)
		}
		v.Fields = append(v.Fields, Field{Name: f.Name, Value: s})
	}
	slices.SortFunc(v.Fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// SSO is the pages' single sign-on over the engine's, nil when the
// gateway has none.
func (b *EngineBackend) SSO() SSO {
	if s := b.review.SSO(); s != nil {
		return engineSSO{s}
	}
	return nil
}

type engineSSO struct{ s *engine.SSO }

func (e engineSSO) AuthCodeURL(ctx context.Context, redirectURL, state, nonce, verifier string) (string, error) {
	u, err := e.s.AuthCodeURL(ctx, redirectURL, state, nonce, verifier)
	return u, pageError(err)
}

func (e engineSSO) Finish(ctx context.Context, redirectURL, code, verifier, nonce, remoteAddr string) (Reviewer, error) {
	rv, err := e.s.Finish(ctx, redirectURL, code, verifier, nonce, remoteAddr)
	if errors.Is(err, engine.ErrUnauthorized) {
		// The refusal's words are for the reviewer: they say what to fix.
		return nil, &Refusal{Reason: err.Error()}
	}
	if err != nil {
		return nil, pageError(err)
	}
	return rv, nil
}
