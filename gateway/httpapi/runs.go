package httpapi

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
)

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
		run, err := s.e.Runs().RegisterAnchor(r.Context(), p.peer)
		if err != nil {
			s.writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, run)
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
	run, err := s.e.Runs().CreateRemote(r.Context(), *p.agent, r.RemoteAddr, time.Duration(req.TTLS)*time.Second)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, run)
}

func (s *server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.e.Runs().Active(r.Context())
	if r.URL.Query().Get("all") == "1" {
		// As the runs page: the active ones and those that ended lately.
		runs, err = s.e.Runs().Recent(r.Context(), recentRuns)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	out := make([]api.Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, run.Run)
	}
	writeJSON(w, http.StatusOK, out)
}

// recentRuns is how many runs GET /v1/runs?all=1 shows at most besides
// the active ones.
const recentRuns = 50

// runFor returns a run the principal may see: reviewers any, agents their
// own.
func (s *server) runFor(w http.ResponseWriter, r *http.Request) (api.Run, bool) {
	id := chi.URLParam(r, "id")
	if !engine.ValidRunID(id) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run")
		return api.Run{}, false
	}
	p := principalFrom(r.Context())
	if !p.isReviewer {
		if !s.e.Runs().Owns(r.Context(), p.caller(), id) {
			writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run of yours")
			return api.Run{}, false
		}
	}
	run, err := s.e.Runs().Get(r.Context(), id)
	if err != nil {
		s.writeErr(w, err)
		return api.Run{}, false
	}
	return run.Run, true
}

func (s *server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	if run, ok := s.runFor(w, r); ok {
		writeJSON(w, http.StatusOK, run)
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
		run, err = s.e.Runs().Revoke(r.Context(), p.reviewer, run.ID, r.URL.Query().Get("reason"))
	} else {
		run, err = s.e.Runs().End(r.Context(), run.ID)
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}
