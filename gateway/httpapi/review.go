package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

func (s *server) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("state"); st != "" && st != "pending" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, `state must be "pending"`)
		return
	}
	reqs, err := s.e.Review().Pending(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := make([]api.Approval, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- { // newest first
		v := reqs[i].Approval
		if run, err := s.e.Runs().Get(r.Context(), v.RunID); err == nil {
			v.Run = &run.Run
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRevealCommand returns a pending request's original command when
// it is stored redacted; the reveal is recorded first.
func (s *server) handleRevealCommand(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	id := chi.URLParam(r, "id")
	cmd, err := s.e.Review().RevealCommand(r.Context(), p.reviewer, id, "api")
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RevealedCommand{ApprovalID: id, Command: cmd})
}

// handleCancelAction stops one action at a reviewer's wish and answers
// with the action once it has its outcome (cancelled, and how its
// command's end was confirmed).
func (s *server) handleCancelAction(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	var req api.CancelRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	a, err := s.e.Review().CancelAction(r.Context(), p.reviewer, chi.URLParam(r, "id"), req.Reason)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	select {
	case <-a.Done():
	case <-r.Context().Done():
		return
	}
	obj, err := s.e.Review().ReviewerResult(r.Context(), p.reviewer, a, "api")
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

func (s *server) handleDecision(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	id := chi.URLParam(r, "id")
	if !engine.ValidRequestID(id) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such approval request")
		return
	}
	var d api.DecisionRequest
	if !decodeJSON(w, r, &d) {
		return
	}
	var dec engine.Decision
	switch d.Decision {
	case api.DecisionApprove:
		dec.Approve = true
	case api.DecisionDeny: // Approve stays false
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
		dec.Scope = append(dec.Scope, engine.Scope{Target: target, Account: account})
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
	q, err := s.e.Review().Decide(r.Context(), p.reviewer, id, dec, d.Digest)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q.Approval)
}

func (s *server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req api.LoginRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if principalFrom(r.Context()).local {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers log in over the HTTP listener, not the agents' socket")
		return
	}
	rv, err := s.e.Review().Login(r.Context(), req.Reviewer, req.Password, engine.NewSecret(req.Device), r.RemoteAddr)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	tok, expires, err := s.e.Review().IssueToken(r.Context(), rv)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	device, deviceUntil := s.e.Review().RememberDevice(rv)
	writeJSON(w, http.StatusOK, api.LoginResponse{Token: tok.Reveal(), ExpiresAt: expires, Reviewer: rv.Name(),
		Device: device.Reveal(), DeviceExpiresAt: deviceUntil})
}

// handleLogout revokes the reviewer token the request presents.
func (s *server) handleLogout(w http.ResponseWriter, r *http.Request) {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := s.e.Review().Logout(r.Context(), engine.NewSecret(bearer)); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}

// handleDeviceLogin begins a reviewer CLI's single sign-on (the device
// authorization grant, the gateway as the provider's client) for the
// reviewer the request names.
func (s *server) handleDeviceLogin(w http.ResponseWriter, r *http.Request) {
	var req api.DeviceLoginRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	sso := s.e.Review().SSO()
	if sso == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "this gateway has no single sign-on (an sso block); log in with a reviewer name and password")
		return
	}
	if principalFrom(r.Context()).local {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers log in over the HTTP listener, not the agents' socket")
		return
	}
	d, err := sso.DeviceLogin(r.Context(), req.Reviewer, r.RemoteAddr)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// The page is on this very gateway, by the Host the request named
	// (which the listener checked against allowed_hosts).
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	d.PageURL = scheme + "://" + r.Host + "/ui/device/" + d.Page
	writeJSON(w, http.StatusOK, d)
}

// handleDeviceToken answers a device login's poll: pending, the reviewer
// token (once), or why not.
func (s *server) handleDeviceToken(w http.ResponseWriter, r *http.Request) {
	var req api.DeviceTokenRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	sso := s.e.Review().SSO()
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
	for rec, err := range s.e.Audit().Reader().Entries(r.Context(), after) {
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
	rep, err := s.e.Audit().Verify(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "verification could not run: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
