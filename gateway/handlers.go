package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
)

// loginTokenTTL is how long a reviewer token from POST /v1/login lasts.
const loginTokenTTL = 12 * time.Hour

func (s *Server) callerOf(p *principal) caller {
	return caller{local: p.local, peer: p.peer, runToken: p.runToken, remoteAddr: p.remoteAddr}
}

func (s *Server) handlePostAction(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	p := principalFrom(r.Context())
	detached := r.URL.Query().Get("wait") == "false"
	ctx := r.Context()
	if detached {
		ctx = s.base
	}
	st, err := s.startAction(ctx, s.callerOf(p), req)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the gateway is shutting down; retry against the next one")
		return
	}
	if detached {
		writeJSON(w, http.StatusAccepted, map[string]string{"id": st.obj.ID})
		return
	}
	if !wantsSSE(r) {
		select {
		case <-st.done:
		case <-r.Context().Done():
			<-st.done // the action records its cancellation
			return
		}
		writeJSON(w, http.StatusOK, st.snapshot())
		return
	}
	s.streamAction(w, r, st)
}

// streamAction sends an action's events until it finishes.
func (s *Server) streamAction(w http.ResponseWriter, r *http.Request, st *actionState) {
	events, unsubscribe := st.subscribe()
	defer unsubscribe()
	sse := newSSE(w)
	snap := st.snapshot()
	if err := sse.send("state", api.StateEvent{State: snap.State, ActionID: snap.ID, ApprovalID: snap.Approval.ID}); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				// Dropped for falling behind: send the final object
				// once the action ends.
				select {
				case <-st.done:
					sse.send("finished", st.snapshot())
				case <-r.Context().Done():
				}
				return
			}
			if err := sse.send(ev.name, ev.data); err != nil {
				return
			}
			if ev.name == "finished" {
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
func (s *Server) actionFor(w http.ResponseWriter, r *http.Request) (*actionState, bool) {
	id := chi.URLParam(r, "id")
	st, ok := s.lookupAction(id)
	if !ok {
		if obj, found := s.actionFromAudit(r.Context(), id); found {
			st = &actionState{obj: obj, done: closedChan()}
			ok = true
		}
	}
	if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no action "+strconv.Quote(id))
		return nil, false
	}
	p := principalFrom(r.Context())
	if p.isReviewer {
		return st, true
	}
	run, err := s.resolveRunReadOnly(r.Context(), p)
	if err != nil || string(run.ID) != st.snapshot().RunID {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no action "+strconv.Quote(id)+" in your run")
		return nil, false
	}
	return st, true
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// resolveRunReadOnly finds the caller's run for read access, without
// creating one; a run that has ended is still the caller's to read.
func (s *Server) resolveRunReadOnly(ctx context.Context, p *principal) (approvals.Run, error) {
	return s.findRun(ctx, caller{local: p.local, peer: p.peer, runToken: p.runToken})
}

func (s *Server) handleGetAction(w http.ResponseWriter, r *http.Request) {
	if st, ok := s.actionFor(w, r); ok {
		writeJSON(w, http.StatusOK, st.snapshot())
	}
}

func (s *Server) handleActionEvents(w http.ResponseWriter, r *http.Request) {
	if st, ok := s.actionFor(w, r); ok {
		s.streamAction(w, r, st)
	}
}

// actionFromAudit rebuilds a finished action's object from its audit
// entries (for actions no longer in memory, or from before a restart).
func (s *Server) actionFromAudit(ctx context.Context, id string) (api.Action, bool) {
	recs, err := s.alog.Reader().ActionEntries(ctx, id)
	if err != nil || len(recs) == 0 {
		return api.Action{}, false
	}
	a := api.Action{ID: id, State: api.StateRunning}
	for _, rec := range recs {
		e := rec.Entry
		a.RunID = e.RunID
		switch e.Kind {
		case auditchain.KindActionRequested:
			var r actionRequested
			if err := e.Decode(&r); err != nil {
				s.log.Warn("an action.requested entry does not read back", "seq", e.Seq, "error", err)
			}
			a.Target, a.Account, a.Command, a.TimeoutS = r.Target, r.Account, r.Command, int(r.TimeoutS)
			a.RequestedAt = e.Time
		case auditchain.KindActionConnecting:
			t := e.Time
			a.StartedAt = &t
		case auditchain.KindActionFinished:
			var f actionFinished
			if err := e.Decode(&f); err != nil {
				s.log.Warn("an action.finished entry does not read back", "seq", e.Seq, "error", err)
			}
			t := e.Time
			a.FinishedAt, a.State = &t, api.StateFinished
			a.Outcome, a.Detail, a.Termination = f.Outcome, f.Detail, f.Termination
			if f.Approval != nil {
				a.Approval.ID, a.Approval.Mode = f.Approval.ID, f.Approval.Mode
			}
			a.Approval.DecidedBy = f.DecidedBy
			if r := f.Result; r != nil {
				a.HostKeyFingerprint, a.Signal = r.HostKeyFingerprint, r.Signal
				a.StdoutBytes, a.StderrBytes = r.StdoutReceived, r.StderrReceived
				if r.ExitCode != nil {
					code := int(*r.ExitCode)
					a.ExitCode = &code
				}
			}
		}
	}
	return a, true
}

// Runs.

func runView(r approvals.Run) api.Run {
	v := api.Run{ID: string(r.ID), State: api.RunState(r.State.String()), Kind: api.RunRemote, Requester: r.Requester, CreatedAt: r.CreatedAt, Actions: r.Actions}
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt
		v.ExpiresAt = &t
	}
	if !r.TokenExpiresAt.IsZero() {
		t := r.TokenExpiresAt
		v.TokenExpiresAt = &t
	}
	if a := r.Anchor; a != nil {
		v.Kind = api.RunLocal
		v.Anchor = &api.Process{PID: a.ID.PID, StartTime: a.ID.StartTime, Executable: a.Exe, SHA256: a.ExeSHA256,
			Argv: a.Argv, Cwd: a.Cwd, UID: a.UID, User: a.User}
		for _, c := range a.Chain {
			v.Anchor.Parents = append(v.Anchor.Parents, api.Process{PID: c.ID.PID, StartTime: c.ID.StartTime, Executable: c.Exe, UID: c.UID, Argv: []string{c.Comm}})
		}
	}
	return v
}

// createRunRequest is the body of POST /v1/runs.
type createRunRequest struct {
	// Name describes the agent to reviewers (remote runs).
	Name string `json:"name,omitempty"`
	TTLS int    `json:"ttl_s,omitempty"`
}

func (s *Server) handleCreateRun(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	var req createRunRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &req) {
		return
	}
	if p.local {
		// airlock run and airlock mcp register themselves as anchors.
		run, err := s.store.RegisterAnchor(r.Context(), approvals.Peer{PID: int(p.peer.PID), UID: int(p.peer.UID), GID: int(p.peer.GID)})
		if err != nil {
			s.writeStoreError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, runView(run))
		return
	}
	if p.isReviewer {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers do not create runs; an agent does")
		return
	}
	key := "runs:" + hostOf(r.RemoteAddr)
	if s.limiter.blocked(key) {
		writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many runs created from this address; wait a minute")
		return
	}
	s.limiter.fail(key) // creating runs counts toward the address's budget
	name := req.Name
	if name == "" {
		name = "agent"
	}
	rr := approvals.RemoteRun{Requester: fmt.Sprintf("remote:%s@%s", name, hostOf(r.RemoteAddr))}
	if req.TTLS != 0 {
		ttl := time.Duration(req.TTLS) * time.Second
		rr.TTL = &ttl
	}
	run, tok, err := s.store.CreateRemote(r.Context(), rr)
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	v := runView(run)
	v.Token = tok.Reveal()
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.store.Runs(r.Context())
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	out := make([]api.Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, runView(run))
	}
	writeJSON(w, http.StatusOK, out)
}

// runFor returns a run the principal may see: reviewers any, agents their
// own.
func (s *Server) runFor(w http.ResponseWriter, r *http.Request) (approvals.Run, bool) {
	id, err := approvals.ParseRunID(chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run")
		return approvals.Run{}, false
	}
	p := principalFrom(r.Context())
	if !p.isReviewer {
		own, err := s.resolveRunReadOnly(r.Context(), p)
		if err != nil || own.ID != id {
			writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run of yours")
			return approvals.Run{}, false
		}
	}
	run, err := s.store.Run(r.Context(), id)
	if err != nil {
		s.writeStoreError(w, err)
		return approvals.Run{}, false
	}
	return run, true
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	if run, ok := s.runFor(w, r); ok {
		writeJSON(w, http.StatusOK, runView(run))
	}
}

func (s *Server) handleEndRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.runFor(w, r)
	if !ok {
		return
	}
	if run.State.Terminal() {
		writeJSON(w, http.StatusOK, runView(run)) // ended already: DELETE is idempotent
		return
	}
	p := principalFrom(r.Context())
	var err error
	if p.isReviewer {
		err = s.store.Revoke(r.Context(), p.reviewer, run.ID, r.URL.Query().Get("reason"))
	} else {
		err = s.store.EndRun(r.Context(), run.ID)
	}
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	run, _ = s.store.Run(r.Context(), run.ID)
	writeJSON(w, http.StatusOK, runView(run))
}

// Approvals.

func approvalView(q approvals.Request) api.Approval {
	v := api.Approval{
		ID: string(q.ID), Kind: api.Mode(q.Kind.String()), RunID: string(q.RunID), Target: q.Target, Account: q.Account,
		Command: q.Command, TimeoutS: int(q.Timeout / time.Second), Digest: fmt.Sprintf("%x", q.Digest[:]),
		RequestedAt: q.RequestedAt, ExpiresAt: q.ExpiresAt, Requester: q.Requester, State: q.Status.String(),
		DecidedBy: q.DecidedBy, Reason: q.Reason,
	}
	if !q.DecidedAt.IsZero() {
		t := q.DecidedAt
		v.DecidedAt = &t
	}
	return v
}

func (s *Server) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("state"); st != "" && st != "pending" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, `state must be "pending"`)
		return
	}
	reqs, err := s.store.Pending(r.Context())
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	out := make([]api.Approval, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- { // newest first
		v := approvalView(reqs[i])
		if run, err := s.store.Run(r.Context(), reqs[i].RunID); err == nil {
			rv := runView(run)
			v.Run = &rv
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDecision(w http.ResponseWriter, r *http.Request) {
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
	case "approve":
		dec.Verdict = approvals.Approve
	case "deny":
		dec.Verdict = approvals.Deny
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, `decision must be "approve" or "deny"`)
		return
	}
	dec.Reason, dec.MaxActions = d.Reason, d.MaxActions
	if d.TTLS != 0 {
		ttl := time.Duration(d.TTLS) * time.Second
		dec.TTL = &ttl
	}
	if d.Digest != "" {
		q, err := s.store.Request(r.Context(), id)
		if err != nil {
			s.writeStoreError(w, err)
			return
		}
		if fmt.Sprintf("%x", q.Digest[:]) != d.Digest {
			writeError(w, http.StatusConflict, api.CodeConflict, "the request is not the one you reviewed (its digest differs); reload it")
			return
		}
	}
	q, err := s.store.Decide(r.Context(), p.reviewer, id, dec)
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, approvalView(q))
}

// writeStoreError maps the approvals store's typed errors to API errors.
func (s *Server) writeStoreError(w http.ResponseWriter, err error) {
	type m struct {
		err    error
		status int
		code   string
	}
	for _, c := range []m{
		{approvals.ErrUnknownRun, http.StatusNotFound, api.CodeNotFound},
		{approvals.ErrUnknownRequest, http.StatusNotFound, api.CodeNotFound},
		{approvals.ErrAlreadyDecided, http.StatusConflict, api.CodeConflict},
		{approvals.ErrRequestExpired, http.StatusConflict, api.CodeConflict},
		{approvals.ErrRunEnded, http.StatusConflict, api.CodeConflict},
		{approvals.ErrSelfApproval, http.StatusForbidden, api.CodeForbidden},
		{approvals.ErrNotReviewer, http.StatusForbidden, api.CodeForbidden},
		{approvals.ErrBadTTL, http.StatusBadRequest, api.CodeBadRequest},
		{approvals.ErrTTLOverCap, http.StatusBadRequest, api.CodeBadRequest},
		{approvals.ErrTTLForCall, http.StatusBadRequest, api.CodeBadRequest},
		{approvals.ErrBadScope, http.StatusBadRequest, api.CodeBadRequest},
		{approvals.ErrWrongToken, http.StatusUnauthorized, api.CodeUnauthorized},
		{approvals.ErrMalformedToken, http.StatusUnauthorized, api.CodeUnauthorized},
		{approvals.ErrTokenExpired, http.StatusUnauthorized, api.CodeUnauthorized},
		{approvals.ErrNoProcess, http.StatusForbidden, api.CodeForbidden},
		{approvals.ErrNoAnchor, http.StatusForbidden, api.CodeForbidden},
		{approvals.ErrNotAncestor, http.StatusForbidden, api.CodeForbidden},
		{approvals.ErrEventNotRecorded, http.StatusServiceUnavailable, api.CodeUnavailable},
	} {
		if errors.Is(err, c.err) {
			writeError(w, c.status, c.code, err.Error())
			return
		}
	}
	s.log.Error("request failed", "error", err)
	writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
}

// Targets.

func (s *Server) handleTargets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.targetList())
}

// Reviewer login.

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req api.LoginRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	nameKey, addrKey := "login:"+req.Reviewer, "login-addr:"+hostOf(r.RemoteAddr)
	if s.limiter.blocked(nameKey) || s.limiter.blocked(addrKey) {
		writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many failed logins; wait a minute")
		return
	}
	if principalFrom(r.Context()).local {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers log in over the HTTP listener, not the agents' socket")
		return
	}
	rv, err := s.store.Accounts().Verify(r.Context(), req.Reviewer, approvals.NewSecret(req.Password))
	if err != nil {
		s.authFailed(r.Context(), "reviewer_password", nameKey)
		s.authFailed(r.Context(), "reviewer_password", addrKey)
		s.log.Warn("failed reviewer login", "reviewer", req.Reviewer, "addr", hostOf(r.RemoteAddr))
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "wrong reviewer name or password")
		return
	}
	tok, err := s.store.Accounts().IssueToken(r.Context(), rv.Name(), loginTokenTTL)
	if err != nil {
		s.writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LoginResponse{Token: tok.Reveal(), ExpiresAt: time.Now().Add(loginTokenTTL).UTC()})
}

// Audit.

func (s *Server) handleAuditEntries(w http.ResponseWriter, r *http.Request) {
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
	var out []rawJSON
	for rec, err := range s.alog.Reader().Entries(r.Context(), after) {
		if err != nil {
			s.writeStoreError(w, err)
			return
		}
		b, err := rec.MarshalJSON()
		if err != nil {
			s.writeStoreError(w, err)
			return
		}
		out = append(out, rawJSON(b))
		if len(out) == limit {
			break
		}
	}
	if out == nil {
		out = []rawJSON{}
	}
	writeJSON(w, http.StatusOK, out)
}

// rawJSON is already-encoded JSON.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

func (s *Server) handleAuditVerify(w http.ResponseWriter, r *http.Request) {
	vo := auditchain.VerifyOptions{}
	rep, err := s.verifyAudit(r.Context(), vo)
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "verification could not run: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Local token rotation.

func (s *Server) handleRotateToken(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if !p.local || int(p.peer.UID) != osGeteuid() {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "only the gateway's own user may rotate the local token, over the local socket")
		return
	}
	if err := s.local.rotate(r.Context()); err != nil {
		s.log.Error("token rotation failed", "error", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "rotation failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "rotated"})
}
