package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
)

// writeErr answers the engine's refusal with its status and code; any
// other error is the gateway's own (500, logged, not shown).
func (s *server) writeErr(w http.ResponseWriter, err error) {
	if we := engine.WireError(err); we != nil {
		if d := engine.RetryAfter(err); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(d/time.Second)))
		}
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
	a, err := s.e.Actions().Start(ctx, p.caller(), req)
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
	accounts := s.e.Review().AccountsChanged()
	events, unsubscribe := subscribe()
	defer unsubscribe()
	sse := newSSE(w)
	if err := sse.send("state", a.StateEvent()); err != nil {
		return
	}
	tick := time.NewTicker(s.heartbeat)
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
			accounts = s.e.Review().AccountsChanged()
			if p != nil && p.isReviewer && !s.e.Review().Enabled(r.Context(), p.reviewer) {
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
		a, err = s.e.Actions().Action(r.Context(), id)
	} else {
		a, err = s.e.Actions().ActionOf(r.Context(), p.caller(), id)
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
		obj, err = s.e.Review().ReviewerResult(r.Context(), p.reviewer, a, "api") // a reviewer's read is recorded
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
		if err := s.e.Review().FollowedBy(r.Context(), p.reviewer, a, "api-events"); err != nil {
			s.writeErr(w, err)
			return
		}
	}
	s.streamAction(w, r, a)
}

// uploadReadTimeout bounds how long an upload's body may take;
// uploadDrainMax is the longest body whose rest is read after a refusal
// so that its sender gets the answer (a longer one is cut off).
const (
	uploadReadTimeout = 30 * time.Minute
	uploadDrainMax    = 256 << 20
)

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
	up, err := s.e.Actions().Upload(r.Context(), principalFrom(r.Context()).caller(), r.Body, r.ContentLength)
	if err != nil {
		if r.ContentLength <= uploadDrainMax {
			// A refusal before the body was read whole (no room, over a
			// limit) reaches the agent as its answer, not as a connection
			// cut while it still sends: the rest is read and dropped.
			io.Copy(io.Discard, r.Body)
		}
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
	f, size, sum, err := s.e.Actions().File(r.Context(), principalFrom(r.Context()).caller(), id)
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
		s.e.Actions().FileDelivered(principalFrom(r.Context()).caller(), id)
	}
}

// handleActionOutput pages one stream of a finished action's stored
// output: ?stream=stdout|stderr&offset=N&limit=N (limit by default 64
// KiB), under the read rules of the account's output policy. A
// reviewer's read is recorded as any other.
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
		if err := s.e.Review().FollowedBy(r.Context(), p.reviewer, a, "api-output"); err != nil {
			s.writeErr(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, pg)
}

func (s *server) handleTargets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.e.Actions().Targets())
}
