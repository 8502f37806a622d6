package httpapi

import (
	"errors"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

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
	cfg, err := s.e.Admin().ReloadFile(r.Context())
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
	list, err := s.e.Admin().Reviewers(r.Context())
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
		if err := s.e.Admin().ChangeReviewer(r.Context(), change, name, engine.NewSecret(req.Password), operatorName()); err != nil {
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

// handleRenameReviewer serves POST /v1/reviewers/{name}/rename.
func (s *server) handleRenameReviewer(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "change reviewer accounts") {
		return
	}
	var req api.RenameRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if err := s.e.Admin().RenameReviewer(r.Context(), chi.URLParam(r, "name"), req.NewName, operatorName()); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": req.NewName})
}

// handleLoginLink serves POST /v1/reviewers/{name}/link: a one-time
// login link for a reviewer (operator, over the local socket: airlock
// reviewer link).
func (s *server) handleLoginLink(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "make reviewer login links") {
		return
	}
	base := ""
	if s.uiBase != nil {
		base = s.uiBase()
	}
	if base == "" {
		writeError(w, http.StatusConflict, api.CodeConflict, "this gateway has no HTTP listener for the reviewer pages, so a login link leads nowhere: set listen.http in the configuration")
		return
	}
	l, err := s.e.Admin().NewLoginLink(r.Context(), chi.URLParam(r, "name"), operatorName())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.LoginLink{URL: api.LoginLinkURL(base, l.Token.Reveal()), ExpiresAt: l.Expires.UTC(), Lifetime: engine.LoginLinkLifetime})
}

func (s *server) handleAddAgent(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r, "issue agent tokens") {
		return
	}
	var req api.AgentRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	a, err := s.e.Admin().AddAgent(r.Context(), req.Name, req.Limits, time.Duration(req.TTLS)*time.Second)
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
	as, err := s.e.Admin().Agents(r.Context())
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
	as, err := s.e.Admin().RevokeAgent(r.Context(), chi.URLParam(r, "id"), operatorName())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, as)
}

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
