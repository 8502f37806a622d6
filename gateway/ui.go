package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/web"
)

const (
	// uiRecentRuns bounds the ended runs the runs page shows.
	uiRecentRuns = 20
	// uiRunHistory bounds the actions shown with each run.
	uiRunHistory = 10
	// uiLatestEntries is how many audit entries the audit page shows.
	uiLatestEntries = 50
)

// uiHandler serves the reviewer web pages under /ui/ (package web) over
// this server's stores, and starts the notification webhook if one is
// configured. However often the router is built, a server has one session
// store and one notifier.
func (s *Server) uiHandler() http.Handler {
	s.uiOnce.Do(func() {
		b := &uiBackend{s: s}
		s.ui = s.uiGuard(web.New(b, web.Options{MaxAge: loginTokenTTL, Logger: s.log.Named("ui")}))
		if s.cfg.Notify != nil {
			s.startNotifier(s.cfg.Notify)
		}
	})
	return s.ui
}

// uiGuard keeps agent credentials and API tokens away from the pages: the
// local socket (whatever token it carries), run tokens and any
// Authorization header are refused. The pages know reviewers only by the
// session cookie of a browser that logged in through them.
func (s *Server) uiGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		if p == nil || p.local || !p.runToken.IsZero() || p.isReviewer || r.Header.Get("Authorization") != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintln(w, "The reviewer pages take no agent credentials and no bearer tokens: open them in a browser on the HTTP listener and log in.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// uiBackend is web.Backend over the server's stores.
type uiBackend struct {
	s *Server

	verifyMu   sync.Mutex // one verification at a time
	mu         sync.Mutex
	lastVerify *web.Verification
}

func reviewerOf(rv web.Reviewer) (approvals.Reviewer, bool) {
	r, ok := rv.(approvals.Reviewer)
	return r, ok
}

func (b *uiBackend) Login(ctx context.Context, name, password, remoteAddr string) (web.Reviewer, error) {
	// The same budgets as POST /v1/login: a guesser gains nothing by
	// switching between the API and the pages.
	nameKey, addrKey := "login:"+name, "login-addr:"+hostOf(remoteAddr)
	if b.s.limiter.blocked(nameKey) || b.s.limiter.blocked(addrKey) {
		return nil, web.ErrRateLimited
	}
	rv, err := b.s.store.Accounts().Verify(ctx, name, approvals.NewSecret(password))
	if errors.Is(err, approvals.ErrBadCredentials) {
		b.s.authFailed(ctx, "reviewer_password", nameKey)
		b.s.authFailed(ctx, "reviewer_password", addrKey)
		b.s.log.Warn("failed reviewer login (web)", "reviewer", name, "addr", hostOf(remoteAddr))
		return nil, web.ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	return rv, nil
}

func (b *uiBackend) LoginLink(ctx context.Context, token, remoteAddr string) (web.Reviewer, error) {
	addrKey := "login-addr:" + hostOf(remoteAddr)
	if b.s.limiter.blocked(addrKey) {
		return nil, web.ErrRateLimited
	}
	apiToken, ok := b.s.links.consume(token, time.Now())
	if !ok {
		b.s.authFailed(ctx, "login_link", addrKey)
		b.s.log.Warn("unknown, used or expired login link", "addr", hostOf(remoteAddr))
		return nil, web.ErrBadCredentials
	}
	rv, err := b.s.store.Accounts().VerifyToken(ctx, apiToken)
	if errors.Is(err, approvals.ErrBadCredentials) {
		return nil, web.ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	return rv, nil
}

func (b *uiBackend) Enabled(ctx context.Context, rv web.Reviewer) bool {
	if _, ok := reviewerOf(rv); !ok {
		return false
	}
	list, err := b.s.store.Accounts().List(ctx)
	if err != nil {
		b.s.log.Error("listing reviewers", "error", err)
		return false
	}
	for _, info := range list {
		if info.Name == rv.Name() {
			return info.Enabled
		}
	}
	return false
}

func (b *uiBackend) Pending(ctx context.Context) ([]web.Card, error) {
	reqs, err := b.s.store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	mem := b.s.actionsInMemory()
	cards := make([]web.Card, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- { // newest first
		cards = append(cards, b.card(ctx, reqs[i], mem))
	}
	return cards, nil
}

// card describes a request with everything a reviewer judges it by.
func (b *uiBackend) card(ctx context.Context, q approvals.Request, mem []api.Action) web.Card {
	c := web.Card{
		ID: string(q.ID), Kind: q.Kind.String(), Status: q.Status.String(), RunID: string(q.RunID),
		Target: q.Target, Account: q.Account, Command: q.Command, Timeout: q.Timeout,
		Digest: fmt.Sprintf("%x", q.Digest[:]), RequestedAt: q.RequestedAt, ExpiresAt: q.ExpiresAt,
		Requester: q.Requester, DecidedBy: q.DecidedBy, Reason: q.Reason,
	}
	if t, ok := b.s.cfg.Targets[q.Target]; ok {
		c.Address, c.KnownHosts = t.Address, t.KnownHostsFile != ""
		for _, k := range t.HostKeys {
			c.HostKeys = append(c.HostKeys, fingerprint(k))
		}
	}
	if run, err := b.s.store.Run(ctx, q.RunID); err == nil {
		c.Run = uiRun(run, mem)
	}
	for _, a := range mem {
		if a.Approval.ID == string(q.ID) && a.State == api.StateWaitingApproval {
			c.Waiting = append(c.Waiting, a.ID)
		}
	}
	if q.Kind == approvals.KindRun {
		c.TTLs, c.DefaultTTL = b.ttlChoices()
	}
	return c
}

// ttlChoices are the run-approval lifetimes offered: common ones up to the
// policy's cap, the default and the cap itself.
func (b *uiBackend) ttlChoices() ([]time.Duration, time.Duration) {
	def, maxTTL := b.s.cfg.Approval.RunTTL, b.s.cfg.Approval.MaxRunTTL
	if def <= 0 {
		def = approvals.DefaultRunTTL
	}
	if maxTTL <= 0 {
		maxTTL = approvals.DefaultMaxRunTTL
	}
	def = min(def, maxTTL)
	out := []time.Duration{def, maxTTL}
	for _, d := range []time.Duration{5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 24 * time.Hour} {
		if d <= maxTTL {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), def
}

// actionsInMemory returns the actions the server still holds, newest
// first.
func (s *Server) actionsInMemory() []api.Action {
	s.mu.Lock()
	states := make([]*actionState, 0, len(s.recent))
	for i := len(s.recent) - 1; i >= 0; i-- {
		if st, ok := s.actions[s.recent[i]]; ok {
			states = append(states, st)
		}
	}
	s.mu.Unlock()
	out := make([]api.Action, len(states))
	for i, st := range states {
		out[i] = st.snapshot()
	}
	return out
}

func uiRun(r approvals.Run, mem []api.Action) *web.Run {
	v := &web.Run{
		ID: string(r.ID), State: r.State.String(), Kind: "remote", Requester: r.Requester, CreatedAt: r.CreatedAt,
		Explicit: r.Explicit, DecidedBy: r.DecidedBy, Reason: r.Reason, ExpiresAt: r.ExpiresAt,
		MaxActions: r.MaxActions, Actions: r.Actions, EndedAt: r.EndedAt, EndedBy: r.EndedBy, EndNote: r.EndNote,
	}
	if r.EndReason != 0 {
		v.EndReason = r.EndReason.String()
	}
	for _, sc := range r.Scope {
		s := sc.Target
		if sc.Account != "" {
			s = sc.Account + "@" + sc.Target
		}
		v.Scope = append(v.Scope, s)
	}
	if a := r.Anchor; a != nil {
		v.Kind = "local"
		v.Process = &web.Process{PID: a.ID.PID, StartTime: a.ID.StartTime, Exe: a.Exe, SHA256: a.ExeSHA256,
			Argv: a.Argv, Cwd: a.Cwd, UID: a.UID, User: a.User}
		for _, p := range a.Chain {
			v.Process.Parents = append(v.Process.Parents, web.Parent{PID: p.ID.PID, UID: p.UID, Comm: p.Comm, Exe: p.Exe})
		}
	}
	for _, a := range mem {
		if a.RunID == string(r.ID) && len(v.Recent) < uiRunHistory {
			v.Recent = append(v.Recent, web.ActionSummary{ID: a.ID, Target: a.Target, Account: a.Account, Command: a.Command,
				State: string(a.State), Outcome: nameOf(a.Outcome), ExitCode: a.ExitCode, RequestedAt: a.RequestedAt})
		}
	}
	return v
}

func (b *uiBackend) Decide(ctx context.Context, rv web.Reviewer, d web.Decision) (web.Card, error) {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return web.Card{}, web.ErrForbidden
	}
	id, err := approvals.ParseRequestID(d.RequestID)
	if err != nil {
		return web.Card{}, web.ErrNotFound
	}
	q, err := b.s.store.Request(ctx, id)
	if err != nil {
		return web.Card{}, b.decideError(ctx, id, err)
	}
	// The decision is bound to what the card showed, as the API's digest
	// field binds it: a request that changed since cannot be decided.
	if fmt.Sprintf("%x", q.Digest[:]) != d.Digest {
		return web.Card{}, web.ErrChanged
	}
	dec := approvals.Decision{Verdict: approvals.Deny, Reason: d.Reason}
	if d.Approve {
		dec.Verdict = approvals.Approve
		if q.Kind == approvals.KindRun {
			if d.TTL > 0 {
				ttl := d.TTL
				dec.TTL = &ttl
			}
			dec.MaxActions = d.MaxActions
			if d.OnlyThisAccount {
				dec.Scope = []approvals.Scope{{Target: q.Target, Account: q.Account}}
			}
		}
	}
	decided, err := b.s.store.Decide(ctx, reviewer, id, dec)
	if err != nil {
		return web.Card{}, b.decideError(ctx, id, err)
	}
	b.s.log.Info("decision from the web page", "approval", id, "kind", decided.Kind.String(), "decision", decided.Status.String(), "reviewer", reviewer.Name())
	return b.card(ctx, decided, nil), nil
}

// decideError turns the store's refusal into what the reviewer is told.
func (b *uiBackend) decideError(ctx context.Context, id approvals.RequestID, err error) error {
	switch {
	case errors.Is(err, approvals.ErrUnknownRequest):
		return web.ErrNotFound
	case errors.Is(err, approvals.ErrAlreadyDecided):
		return web.ErrAlreadyDecided
	case errors.Is(err, approvals.ErrRequestExpired):
		// A run that ended expires its pending requests in the same
		// change, at the same instant: say which it was. (Comparing with
		// the request's deadline would depend on the clock not moving.)
		if q, qerr := b.s.store.Request(ctx, id); qerr == nil {
			if run, rerr := b.s.store.Run(ctx, q.RunID); rerr == nil && run.State.Terminal() && !run.EndedAt.IsZero() && run.EndedAt.Equal(q.DecidedAt) {
				return web.ErrRunEnded
			}
		}
		return web.ErrExpired
	case errors.Is(err, approvals.ErrRunEnded):
		return web.ErrRunEnded
	case errors.Is(err, approvals.ErrSelfApproval):
		return web.ErrSelfApproval
	case errors.Is(err, approvals.ErrNotReviewer):
		return web.ErrForbidden
	case errors.Is(err, approvals.ErrTTLOverCap):
		_, maxTTL := b.ttlChoicesCap()
		return fmt.Errorf("%w: the approval's time is over the policy's maximum of %s", web.ErrInvalid, maxTTL)
	case errors.Is(err, approvals.ErrBadTTL):
		return fmt.Errorf("%w: the approval's time must be positive", web.ErrInvalid)
	case errors.Is(err, approvals.ErrTTLForCall), errors.Is(err, approvals.ErrBadScope):
		return fmt.Errorf("%w: a call approval takes no time or action limits, and a run approval's action limit must be 0 or more", web.ErrInvalid)
	case errors.Is(err, approvals.ErrEventNotRecorded):
		return web.ErrUnavailable
	}
	return err
}

func (b *uiBackend) ttlChoicesCap() ([]time.Duration, time.Duration) {
	ttls, _ := b.ttlChoices()
	return ttls, ttls[len(ttls)-1]
}

func (b *uiBackend) Runs(ctx context.Context) ([]web.Run, error) {
	active, err := b.s.store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	mem := b.s.actionsInMemory()
	seen := map[approvals.RunID]bool{}
	var out []web.Run
	for i := len(active) - 1; i >= 0; i-- {
		seen[active[i].ID] = true
		out = append(out, *uiRun(active[i], mem))
	}
	// Recently ended runs: those of the actions still in memory.
	ended := 0
	for _, a := range mem {
		id := approvals.RunID(a.RunID)
		if a.RunID == "" || seen[id] || ended == uiRecentRuns {
			continue
		}
		seen[id] = true
		run, err := b.s.store.Run(ctx, id)
		if err != nil {
			continue
		}
		out = append(out, *uiRun(run, mem))
		ended++
	}
	return out, nil
}

func (b *uiBackend) Revoke(ctx context.Context, rv web.Reviewer, runID, note string) error {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return web.ErrForbidden
	}
	id, err := approvals.ParseRunID(runID)
	if err != nil {
		return web.ErrNotFound
	}
	run, err := b.s.store.Run(ctx, id)
	switch {
	case errors.Is(err, approvals.ErrUnknownRun):
		return web.ErrNotFound
	case err != nil:
		return err
	case run.State.Terminal():
		return web.ErrRunEnded
	}
	err = b.s.store.Revoke(ctx, reviewer, id, note)
	switch {
	case err == nil:
		b.s.log.Info("run revoked from the web page", "run", id, "reviewer", reviewer.Name())
		return nil
	case errors.Is(err, approvals.ErrRunEnded), errors.Is(err, approvals.ErrRunExpired), errors.Is(err, approvals.ErrRunDenied):
		return web.ErrRunEnded
	case errors.Is(err, approvals.ErrNotReviewer):
		return web.ErrForbidden
	case errors.Is(err, approvals.ErrEventNotRecorded):
		return web.ErrUnavailable
	}
	return err
}

func (b *uiBackend) Action(ctx context.Context, id string) (web.Action, error) {
	recs, err := b.s.alog.Reader().ActionEntries(ctx, id)
	if err != nil {
		return web.Action{}, err
	}
	var a api.Action
	if st, ok := b.s.lookupAction(id); ok {
		a = st.snapshot()
	} else if obj, ok := b.s.actionFromAudit(ctx, id); ok {
		a = obj
	} else {
		return web.Action{}, web.ErrNotFound
	}
	v := web.Action{
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
		v.Trail = append(v.Trail, uiEntry(rec.Entry))
		if rec.Kind == auditchain.KindActionFinished {
			var f actionFinished
			v.OutputStored = rec.Decode(&f) == nil && f.Stdout != nil && f.Stderr != nil
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

func (b *uiBackend) ReadOutput(ctx context.Context, rv web.Reviewer, id string) (web.Output, error) {
	reviewer, ok := reviewerOf(rv)
	if !ok || !b.Enabled(ctx, rv) {
		return web.Output{}, web.ErrForbidden
	}
	recs, err := b.s.alog.Reader().ActionEntries(ctx, id)
	if err != nil {
		return web.Output{}, err
	}
	for _, rec := range recs {
		if rec.Kind != auditchain.KindActionFinished {
			continue
		}
		var f actionFinished
		if err := rec.Decode(&f); err != nil || f.Stdout == nil || f.Stderr == nil {
			return web.Output{}, web.ErrNotFound
		}
		outD, errD := f.Stdout.Digest, f.Stderr.Digest
		stdout, err := b.s.outputs.Get(ctx, outD)
		if err != nil {
			return web.Output{}, fmt.Errorf("gateway: reading stdout of %s: %w", id, err)
		}
		stderr, err := b.s.outputs.Get(ctx, errD)
		if err != nil {
			return web.Output{}, fmt.Errorf("gateway: reading stderr of %s: %w", id, err)
		}
		// Reading output is its own audited permission: no record, no
		// output.
		if _, err := b.s.record(ctx, id, rec.RunID, outputRead{Reviewer: reviewer.Name(), Via: "web",
			StdoutSHA256: outD, StderrSHA256: errD, StdoutStored: int64(len(stdout)), StderrStored: int64(len(stderr))}); err != nil {
			b.s.log.Error("output.read not recorded; output withheld", "action", id, "error", err)
			return web.Output{}, web.ErrUnavailable
		}
		o := web.Output{Stdout: stdout, Stderr: stderr, StdoutReceived: int64(len(stdout)), StderrReceived: int64(len(stderr))}
		if r := f.Result; r != nil {
			o.StdoutReceived, o.StderrReceived = r.StdoutReceived, r.StderrReceived
		}
		return o, nil
	}
	return web.Output{}, web.ErrNotFound
}

func (b *uiBackend) AuditStatus(ctx context.Context) (web.AuditStatus, error) {
	rd := b.s.alog.Reader()
	size, err := rd.Size(ctx)
	if err != nil {
		return web.AuditStatus{}, err
	}
	st := web.AuditStatus{Origin: b.s.alog.Origin(), Entries: size, Uncovered: size}
	cps, err := rd.Checkpoints(ctx)
	if err != nil {
		return web.AuditStatus{}, err
	}
	if n := len(cps); n > 0 {
		last := cps[n-1]
		st.LastCheckpoint = &web.Checkpoint{Size: last.Size, Note: string(last.Note)}
		st.Uncovered = max(0, size-last.Size)
	}
	b.mu.Lock()
	st.LastVerify = b.lastVerify
	b.mu.Unlock()
	for rec, err := range rd.Entries(ctx, max(-1, size-1-uiLatestEntries)) {
		if err != nil {
			return web.AuditStatus{}, err
		}
		st.Latest = append(st.Latest, uiEntry(rec.Entry))
	}
	slices.Reverse(st.Latest)
	return st, nil
}

func (b *uiBackend) VerifyAudit(ctx context.Context, rv web.Reviewer) (web.Verification, error) {
	b.verifyMu.Lock()
	defer b.verifyMu.Unlock()
	rep, err := b.s.verifyAudit(ctx, auditchain.VerifyOptions{})
	if err != nil {
		return web.Verification{}, err
	}
	v := web.Verification{At: time.Now().UTC(), By: rv.Name(), Intact: rep.Intact(), Entries: rep.Entries, Verified: rep.Verified,
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
	b.s.log.Info("audit verified from the web page", "reviewer", rv.Name(), "intact", v.Intact, "entries", v.Entries)
	return v, nil
}

// uiEntry formats an audit entry for display.
func uiEntry(e auditchain.Entry) web.Entry {
	v := web.Entry{Seq: e.Seq, Time: e.Time, Kind: e.Kind.String(), ActionID: e.ActionID, RunID: e.RunID}
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
		v.Fields = append(v.Fields, web.Field{Name: f.Name, Value: s})
	}
	slices.SortFunc(v.Fields, func(a, b web.Field) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return v
}

// The notification webhook (notify { url, secret_file }).

const (
	// notifyPoll is how often the notifier reads new audit entries.
	notifyPoll = time.Second
	// notifyAttempt bounds one delivery attempt.
	notifyAttempt = 10 * time.Second
)

// notifyBackoff are the waits between delivery attempts; after the last
// one the notification is dropped (and logged).
var notifyBackoff = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}

// notification is the webhook's JSON body. It names the request and links
// to its card; it carries no command text, reason or requester (all
// attacker-influenced or possibly sensitive: the reviewer reads them on the
// card, where hidden characters are revealed) and no token or secret.
type notification struct {
	// Delivery identifies the notification; retries repeat it.
	Delivery   string    `json:"delivery"`
	Event      string    `json:"event"` // approval.requested or approval.decided
	Time       time.Time `json:"time"`
	ApprovalID string    `json:"approval_id"`
	Kind       string    `json:"kind"`  // run or call
	State      string    `json:"state"` // pending, approved, denied, expired
	RunID      string    `json:"run_id"`
	Target     string    `json:"target"`
	Account    string    `json:"account"`
	DecidedBy  string    `json:"decided_by,omitempty"`
	URL        string    `json:"url,omitempty"`
}

// notifier follows the audit log and posts a signed notification for every
// approval.requested and approval.decided entry. It runs in one goroutine
// of its own, ended with the server: the action lifecycle never waits for
// it, and a webhook that is slow or down only delays later notifications.
type notifier struct {
	s      *Server
	url    string
	secret []byte
	client *http.Client
	now    func() time.Time
}

// startNotifier starts the webhook sender. A secret file that is missing,
// empty or readable by others disables notifications, loudly.
func (s *Server) startNotifier(cfg *NotifyConfig) {
	secret, err := readSecretFile(cfg.SecretFile)
	if err == nil && len(bytes.TrimSpace(secret)) == 0 {
		err = fmt.Errorf("gateway: %s is empty", cfg.SecretFile)
	}
	if err != nil {
		s.log.Error("notifications disabled: the webhook secret cannot be used", "error", err)
		return
	}
	n := &notifier{
		s: s, url: cfg.URL, secret: bytes.TrimRight(secret, "\r\n"), now: time.Now,
		client: &http.Client{
			Timeout: s.notifyAttempt,
			// A signed notification goes where it was configured to,
			// never where a redirect points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	after, err := s.alog.Reader().Size(s.base)
	if err != nil {
		s.log.Error("notifications disabled: reading the audit log", "error", err)
		return
	}
	s.background.Go(func() { n.run(s.base, after-1) })
}

func (n *notifier) run(ctx context.Context, after int64) {
	log := n.s.log.Named("notify")
	select {
	case <-n.s.ready:
	case <-ctx.Done():
		return
	}
	base := n.s.uiBase()
	tick := time.NewTicker(notifyPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for rec, err := range n.s.alog.Reader().Entries(ctx, after) {
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("reading the audit log", "error", err)
				}
				break
			}
			after = rec.Seq
			if rec.Kind != auditchain.KindApprovalRequested && rec.Kind != auditchain.KindApprovalDecided {
				continue
			}
			if ev, ok := n.notificationOf(rec.Entry, base); ok {
				n.deliver(ctx, log, ev)
			}
		}
	}
}

func (n *notifier) notificationOf(e auditchain.Entry, base string) (notification, bool) {
	var rec runEvent
	if err := e.Decode(&rec); err != nil || rec.Request == nil {
		return notification{}, false
	}
	q := rec.Request
	ev := notification{
		Delivery: fmt.Sprintf("%s/%d", n.s.alog.Origin(), e.Seq), Event: e.Kind.String(), Time: e.Time.UTC(),
		ApprovalID: string(q.ID), Kind: q.Kind.String(), State: q.Status.String(), RunID: e.RunID,
		Target: q.Target, Account: q.Account, DecidedBy: q.DecidedBy,
	}
	if ev.ApprovalID == "" {
		return ev, false
	}
	if base != "" {
		if e.Kind == auditchain.KindApprovalRequested {
			ev.URL = base + "/ui/pending#" + ev.ApprovalID
		} else {
			ev.URL = base + "/ui/runs#" + ev.RunID
		}
	}
	return ev, true
}

// uiBase is the pages' base URL as the HTTP listener serves them.
func (s *Server) uiBase() string {
	addr := s.HTTPAddr()
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	scheme := "http"
	if s.cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// deliver posts ev until the webhook accepts it (2xx), refuses it for good
// (4xx other than 408 and 429), the retries run out, or ctx ends.
func (n *notifier) deliver(ctx context.Context, log hclog.Logger, ev notification) {
	body, err := json.Marshal(ev)
	if err != nil {
		log.Error("encoding a notification", "error", err)
		return
	}
	for attempt := 0; ; attempt++ {
		status, err := n.post(ctx, ev, body)
		switch {
		case err == nil && status/100 == 2:
			return
		case err == nil && status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
			log.Error("the webhook refused a notification; not retrying", "delivery", ev.Delivery, "status", status)
			return
		}
		if attempt == len(notifyBackoff) || ctx.Err() != nil {
			log.Error("notification dropped after retries", "delivery", ev.Delivery, "status", status, "error", err)
			return
		}
		log.Warn("notification failed; retrying", "delivery", ev.Delivery, "status", status, "error", err, "in", notifyBackoff[attempt])
		select {
		case <-time.After(notifyBackoff[attempt]):
		case <-ctx.Done():
			return
		}
	}
}

// post makes one delivery attempt. The signature covers the timestamp and
// the body, so a captured notification cannot be replayed later under a
// fresh timestamp: X-Airlock-Signature is "sha256=" and the hex
// HMAC-SHA256, keyed with the secret, of "TIMESTAMP.BODY".
func (n *notifier) post(ctx context.Context, ev notification, body []byte) (int, error) {
	ts := strconv.FormatInt(n.now().Unix(), 10)
	mac := hmac.New(sha256.New, n.secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock/"+Version)
	req.Header.Set("X-Airlock-Event", ev.Event)
	req.Header.Set("X-Airlock-Delivery", ev.Delivery)
	req.Header.Set("X-Airlock-Timestamp", ts)
	req.Header.Set("X-Airlock-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	return res.StatusCode, nil
}
