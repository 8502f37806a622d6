package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

// writeErr answers the engine's refusal with its status and code; any
// other error is the gateway's own (500, logged, not shown).
func (s *server) writeErr(w http.ResponseWriter, err error) {
	if we := engine.WireError(err); we != nil {
		writeError(w, we.Status, we.Err.Code, we.Err.Message)
		return
	}
	s.log.Error("request failed", "error", err)
	writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
}

// Actions.

func (s *server) handlePostAction(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	if !decodeJSONUpTo(w, r, &req, MaxActionBody) {
		return
	}
	p := principalFrom(r.Context())
	detached := r.URL.Query().Get("wait") == "false"
	ctx := r.Context()
	if detached {
		ctx = context.WithoutCancel(ctx) // bounded by the engine's stop alone
	}
	a, err := s.e.Start(ctx, p.caller(), req)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the gateway is shutting down; retry against the next one")
		return
	}
	if detached {
		writeJSON(w, http.StatusAccepted, map[string]string{"id": a.ID()})
		return
	}
	if !wantsSSE(r) {
		select {
		case <-a.Done():
		case <-r.Context().Done():
			<-a.Done() // the action records its cancellation
			return
		}
		obj, err := a.Result(r.Context())
		if err != nil {
			s.writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, obj)
		return
	}
	s.streamAction(w, r, a)
}

// streamAction sends an action's events until it finishes.
func (s *server) streamAction(w http.ResponseWriter, r *http.Request, a *engine.Action) {
	subscribe := a.Subscribe
	p := principalFrom(r.Context())
	if p != nil && p.isReviewer {
		subscribe = a.Watch // a reviewer's stream never holds the agent's command back
	}
	// A reviewer disabled, removed or given a new password meanwhile
	// loses the stream at once.
	accounts := s.e.AccountsChanged()
	events, unsubscribe := subscribe()
	defer unsubscribe()
	sse := newSSE(w)
	snap := a.Snapshot()
	if err := sse.send("state", api.StateEvent{State: snap.State, ActionID: snap.ID, ApprovalID: snap.Approval.ID}); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				// The action has its outcome (or had it before the
				// subscription): the final object ends the stream.
				<-a.Done()
				obj, err := a.Result(r.Context())
				if err != nil {
					s.log.Error("an action's output could not be read", "action", a.ID(), "error", err)
					sse.send("error", api.Error{Err: api.ErrorBody{Code: api.CodeInternal, Message: "the action finished, but its output could not be read; GET it again"}})
					return
				}
				sse.send("finished", obj)
				return
			}
			if err := sse.send(ev.Name, ev.Data); err != nil {
				return
			}
		case <-accounts:
			accounts = s.e.AccountsChanged()
			if p != nil && p.isReviewer && !s.e.Enabled(r.Context(), p.reviewer) {
				sse.send("error", api.Error{Err: api.ErrorBody{Code: api.CodeUnauthorized, Message: "your reviewer session ended: the account was disabled, removed or given a new password"}, Status: http.StatusUnauthorized})
				return
			}
		case <-tick.C:
			if err := sse.comment(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// actionFor finds an action the principal may see: reviewers see all,
// agents the actions of their own run.
func (s *server) actionFor(w http.ResponseWriter, r *http.Request) (*engine.Action, bool) {
	id := chi.URLParam(r, "id")
	p := principalFrom(r.Context())
	var a *engine.Action
	var err error
	if p.isReviewer {
		a, err = s.e.Action(r.Context(), id)
	} else {
		a, err = s.e.ActionOf(r.Context(), p.caller(), id)
	}
	if err != nil {
		s.writeErr(w, err)
		return nil, false
	}
	return a, true
}

func (s *server) handleGetAction(w http.ResponseWriter, r *http.Request) {
	a, ok := s.actionFor(w, r)
	if !ok {
		return
	}
	var obj api.Action
	var err error
	if p := principalFrom(r.Context()); p.isReviewer {
		obj, err = s.e.ReviewerResult(r.Context(), p.reviewer, a, "api") // a reviewer's read is recorded
	} else {
		obj, err = a.Result(r.Context())
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

func (s *server) handleActionEvents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.actionFor(w, r)
	if !ok {
		return
	}
	if p := principalFrom(r.Context()); p.isReviewer {
		if err := s.e.FollowedBy(r.Context(), p.reviewer, a, "api-events"); err != nil {
			s.writeErr(w, err)
			return
		}
	}
	s.streamAction(w, r, a)
}

// handleActionOutput pages one stream of a finished action's stored
// output: ?stream=stdout|stderr&offset=N&limit=N (limit by default 64
// KiB), under the read rules of the account's output policy. A
// reviewer's read is recorded as any other.
// uploadReadTimeout bounds how long an upload's body may take.
const uploadReadTimeout = 30 * time.Minute

// handleUpload keeps a file's bytes (the raw body, application/
// octet-stream, its length declared) for a put of the caller's run.
func (s *server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength < 0 {
		writeError(w, http.StatusLengthRequired, api.CodeBadRequest, "send the file with its Content-Length")
		return
	}
	// A large file over a slow link takes longer than the server's read
	// timeout for requests; the size is bounded by max_transfer.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadReadTimeout))
	up, err := s.e.Upload(r.Context(), principalFrom(r.Context()).caller(), r.Body, r.ContentLength)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, up)
}

// handleActionFile gives a successful get's bytes to its run's agent, as
// application/octet-stream with their SHA-256 in X-Airlock-SHA256; once
// all were sent, the gateway forgets them.
func (s *server) handleActionFile(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	f, size, sum, err := s.e.File(r.Context(), principalFrom(r.Context()).caller(), id)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("X-Airlock-SHA256", sum)
	w.WriteHeader(http.StatusOK)
	if n, err := io.Copy(w, f); err == nil && n == size {
		s.e.FileDelivered(principalFrom(r.Context()).caller(), id)
	}
}

func (s *server) handleActionOutput(w http.ResponseWriter, r *http.Request) {
	a, ok := s.actionFor(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	stream := q.Get("stream")
	if stream == "" {
		stream = "stdout"
	}
	offset, limit := int64(0), int64(64<<10)
	for _, p := range []struct {
		name string
		v    *int64
	}{{"offset", &offset}, {"limit", &limit}} {
		if t := q.Get(p.name); t != "" {
			n, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, api.CodeBadRequest, p.name+" must be a whole number of bytes, not "+strconv.Quote(t))
				return
			}
			*p.v = n
		}
	}
	page := a.Page
	p := principalFrom(r.Context())
	if p.isReviewer {
		page = a.ReviewerPage // all that is kept; the read is recorded
	}
	pg, err := page(r.Context(), stream, offset, limit)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if p.isReviewer && pg.Bytes > 0 {
		if err := s.e.FollowedBy(r.Context(), p.reviewer, a, "api-output"); err != nil {
			s.writeErr(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, pg)
}

// Runs.

// createRunRequest is the body of POST /v1/runs.
type createRunRequest struct {
	// Name describes the agent to reviewers (remote runs).
	Name string `json:"name,omitempty"`
	TTLS int    `json:"ttl_s,omitempty"`
}

func (s *server) handleCreateRun(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	var req createRunRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &req) {
		return
	}
	if p.local {
		// airlock run and airlock mcp register themselves as anchors.
		run, err := s.e.RegisterAnchor(r.Context(), p.peer)
		if err != nil {
			s.writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, engine.RunView(run))
		return
	}
	if p.isReviewer {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers do not create runs; an agent does")
		return
	}
	if p.agent == nil && p.certRefused != nil {
		s.writeErr(w, p.certRefused)
		return
	}
	if p.agent == nil {
		// No anonymous runs: who asks is proved, never named.
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock", error="invalid_token", error_description="present an agent token"`)
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "a remote run is created by a proven agent: an agent token (Authorization: Bearer airlock_agent_…, issued with airlock agent add NAME), a workload identity token of an agent block's oidc issuer (Authorization: Bearer <JWT>), or a client certificate an agent block's mtls names")
		return
	}
	if req.Name != "" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "name is not taken: a run is named after the agent that proved who it is ("+p.agent.Subject()+")")
		return
	}
	run, tok, err := s.e.CreateRemoteRun(r.Context(), *p.agent, r.RemoteAddr, time.Duration(req.TTLS)*time.Second)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	v := engine.RunView(run)
	v.Token = tok.Reveal()
	writeJSON(w, http.StatusCreated, v)
}

func (s *server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.e.Runs(r.Context())
	if r.URL.Query().Get("all") == "1" {
		// As the runs page: the active ones and those that ended lately.
		runs, err = s.e.RecentRuns(r.Context(), recentRuns)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := make([]api.Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, engine.RunView(run))
	}
	writeJSON(w, http.StatusOK, out)
}

// recentRuns is how many runs GET /v1/runs?all=1 shows at most besides
// the active ones.
const recentRuns = 50

// runFor returns a run the principal may see: reviewers any, agents their
// own.
func (s *server) runFor(w http.ResponseWriter, r *http.Request) (approvals.Run, bool) {
	id, err := approvals.ParseRunID(chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run")
		return approvals.Run{}, false
	}
	p := principalFrom(r.Context())
	if !p.isReviewer {
		own, err := s.e.FindRun(r.Context(), p.caller())
		if err != nil || own.ID != id {
			writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run of yours")
			return approvals.Run{}, false
		}
	}
	run, err := s.e.Run(r.Context(), id)
	if err != nil {
		s.writeErr(w, err)
		return approvals.Run{}, false
	}
	return run, true
}

func (s *server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	if run, ok := s.runFor(w, r); ok {
		writeJSON(w, http.StatusOK, engine.RunView(run))
	}
}

// handleEndRun ends a run: its agent closes it, a reviewer revokes it. A
// run that ended already is answered as it is (DELETE is idempotent).
func (s *server) handleEndRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.runFor(w, r)
	if !ok {
		return
	}
	p := principalFrom(r.Context())
	var err error
	if p.isReviewer {
		run, err = s.e.Revoke(r.Context(), p.reviewer, run.ID, r.URL.Query().Get("reason"))
	} else {
		run, err = s.e.EndRun(r.Context(), run.ID)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, engine.RunView(run))
}

// Approvals.

func (s *server) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("state"); st != "" && st != "pending" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, `state must be "pending"`)
		return
	}
	reqs, err := s.e.Pending(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := make([]api.Approval, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- { // newest first
		v := s.e.ApprovalView(reqs[i])
		if run, err := s.e.Run(r.Context(), reqs[i].RunID); err == nil {
			rv := engine.RunView(run)
			v.Run = &rv
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRevealCommand returns a pending request's original command when
// it is stored redacted; the reveal is recorded first.
func (s *server) handleRevealCommand(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	id, err := approvals.ParseRequestID(chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such approval request")
		return
	}
	cmd, err := s.e.RevealCommand(r.Context(), p.reviewer, id, "api")
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RevealedCommand{ApprovalID: string(id), Command: cmd})
}

func (s *server) handleDecision(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	id, err := approvals.ParseRequestID(chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such approval request")
		return
	}
	var d api.DecisionRequest
	if !decodeJSON(w, r, &d) {
		return
	}
	var dec approvals.Decision
	switch d.Decision {
	case api.DecisionApprove:
		dec.Verdict = approvals.Approve
	case api.DecisionDeny:
		dec.Verdict = approvals.Deny
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, `decision must be "approve" or "deny"`)
		return
	}
	dec.Reason, dec.MaxActions = d.Reason, d.MaxActions
	for _, sc := range d.Scope {
		target, account, _ := strings.Cut(sc, "/")
		if target == "" || strings.Contains(account, "/") {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("scope %q: write TARGET or TARGET/ACCOUNT", sc))
			return
		}
		dec.Scope = append(dec.Scope, approvals.Scope{Target: target, Account: account})
	}
	if d.TTLS != 0 {
		ttl := time.Duration(d.TTLS) * time.Second
		dec.TTL = &ttl
	}
	if d.GrantS < 0 || d.GrantS > int(config.MaxGrantLimit/time.Second) {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("grant_s must be from 0 to %d seconds", int(config.MaxGrantLimit/time.Second)))
		return
	}
	dec.Grant = time.Duration(d.GrantS) * time.Second
	q, err := s.e.Decide(r.Context(), p.reviewer, id, dec, d.Digest)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.e.ApprovalView(q))
}

// Targets.

func (s *server) handleTargets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.e.Targets())
}

// Reviewer login.

func (s *server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req api.LoginRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if principalFrom(r.Context()).local {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers log in over the HTTP listener, not the agents' socket")
		return
	}
	rv, err := s.e.Login(r.Context(), req.Reviewer, req.Password, r.RemoteAddr)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	tok, expires, err := s.e.IssueToken(r.Context(), rv)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LoginResponse{Token: tok.Reveal(), ExpiresAt: expires, Reviewer: rv.Name()})
}

// handleLogout revokes the reviewer token the request presents.
func (s *server) handleLogout(w http.ResponseWriter, r *http.Request) {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := s.e.Logout(r.Context(), approvals.NewSecret(bearer)); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}

// handleDeviceLogin begins a reviewer CLI's single sign-on (the device
// authorization grant, the gateway as the provider's client).
func (s *server) handleDeviceLogin(w http.ResponseWriter, r *http.Request) {
	if !decodeJSON(w, r, &struct{}{}) {
		return
	}
	sso := s.e.SSO()
	if sso == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "this gateway has no single sign-on (an sso block); log in with a reviewer name and password")
		return
	}
	if principalFrom(r.Context()).local {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers log in over the HTTP listener, not the agents' socket")
		return
	}
	d, err := sso.DeviceLogin(r.Context(), r.RemoteAddr)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleDeviceToken answers a device login's poll: pending, the reviewer
// token (once), or why not.
func (s *server) handleDeviceToken(w http.ResponseWriter, r *http.Request) {
	var req api.DeviceTokenRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	sso := s.e.SSO()
	if sso == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "this gateway has no single sign-on (an sso block)")
		return
	}
	login, done, err := sso.DeviceToken(req.DeviceID)
	switch {
	case err != nil:
		s.writeErr(w, err)
	case !done:
		writeJSON(w, http.StatusOK, api.DeviceTokenResponse{Status: "pending"})
	default:
		writeJSON(w, http.StatusOK, api.DeviceTokenResponse{Status: "ok", LoginResponse: login})
	}
}

// Audit.

func (s *server) handleAuditEntries(w http.ResponseWriter, r *http.Request) {
	after := int64(-1)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "after must be a sequence number")
			return
		}
		after = n
	}
	limit := 1000
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit must be from 1 to 10000")
			return
		}
		limit = n
	}
	out := []rawJSON{}
	for rec, err := range s.e.AuditReader().Entries(r.Context(), after) {
		if err != nil {
			s.writeErr(w, err)
			return
		}
		b, err := rec.MarshalJSON()
		if err != nil {
			s.writeErr(w, err)
			return
		}
		out = append(out, rawJSON(b))
		if len(out) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// rawJSON is already-encoded JSON.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

func (s *server) handleAuditVerify(w http.ResponseWriter, r *http.Request) {
	rep, err := s.e.VerifyAudit(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "verification could not run: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Agent tokens: issued and revoked by the gateway's own user over the
// local socket (an operator), listed also to reviewers.

// operator reports whether the caller is the gateway's own user on the
// local socket, and answers 403 when not.
func (s *server) operator(w http.ResponseWriter, r *http.Request, what string) bool {
	p := principalFrom(r.Context())
	if !p.local || p.peer.UID != os.Geteuid() {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "only the gateway's own user may "+what+", over the local socket (airlock agent …, airlock reviewer …)")
		return false
	}
	return true
}

// operatorName is who an operator's change is recorded as made by: the
// gateway's own user, the only one operator() admits.
func operatorName() string {
	if u, _ := user.LookupId(strconv.Itoa(os.Geteuid())); u != nil {
		return "operator:" + u.Username
	}
	return "operator"
}

// handleReload reads the configuration file again and puts it in force
// (operator, over the local socket): airlock config reload, the unit's
// ExecReload.
func (s *server) handleReload(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "reload the configuration") {
		return
	}
	cfg, err := s.e.ReloadFile(r.Context())
	if err != nil {
		s.log.Error("configuration not reloaded; the one in force stays", "error", err)
		var ce *config.Error
		switch {
		case errors.As(err, &ce), errors.Is(err, engine.ErrNeedsRestart):
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		case errors.Is(err, engine.ErrUnavailable):
			s.writeErr(w, err)
		default:
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the configuration was not reloaded: "+err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, api.Reloaded{Path: cfg.Path, SHA256: cfg.Digest, Targets: len(cfg.Targets)})
}

func (s *server) handleListReviewers(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "list reviewer accounts") {
		return
	}
	list, err := s.e.Reviewers(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// handleReviewerChange serves one reviewer lifecycle verb. The name is
// in the path, but for add, in the body with the password.
func (s *server) handleReviewerChange(change engine.ReviewerChange) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.operator(w, r, "change reviewer accounts") {
			return
		}
		name := chi.URLParam(r, "name")
		var req api.ReviewerRequest
		if change == engine.ReviewerAdd || change == engine.ReviewerPassword {
			if !decodeJSON(w, r, &req) {
				return
			}
		}
		if change == engine.ReviewerAdd {
			name = req.Name
		}
		if err := s.e.ChangeReviewer(r.Context(), change, name, approvals.NewSecret(req.Password), operatorName()); err != nil {
			s.writeErr(w, err)
			return
		}
		status := http.StatusOK
		if change == engine.ReviewerAdd {
			status = http.StatusCreated
		}
		writeJSON(w, status, map[string]string{"name": name})
	}
}

func (s *server) handleAddAgent(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "issue agent tokens") {
		return
	}
	var req api.AgentRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	a, err := s.e.AddAgent(r.Context(), req.Name, req.Limits, time.Duration(req.TTLS)*time.Second)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (s *server) handleListAgents(w http.ResponseWriter, r *http.Request) {
	if p := principalFrom(r.Context()); !p.isReviewer && !s.operator(w, r, "list agent tokens") {
		return
	}
	as, err := s.e.Agents(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, as)
}

func (s *server) handleRevokeAgent(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "revoke agent tokens") {
		return
	}
	as, err := s.e.RevokeAgent(r.Context(), chi.URLParam(r, "id"), operatorName())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, as)
}

// Local token rotation.

func (s *server) handleRotateToken(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if !p.local || p.peer.UID != os.Geteuid() || s.local == nil {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "only the gateway's own user may rotate the local token, over the local socket")
		return
	}
	if err := s.local.Rotate(r.Context()); err != nil {
		s.log.Error("token rotation failed", "error", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "rotation failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "rotated"})
}
