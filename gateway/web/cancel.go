package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/airlockgw/airlock/gateway/api"
)

// cancel stops one action from its page (the Cancel button) and shows the
// page again with its outcome.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	id := r.PathValue("id")
	reason := r.PostForm.Get("reason")
	if !actionIDPattern.MatchString(id) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such action.")
		return
	}
	if utf8.RuneCountInString(reason) > api.MaxReason || !utf8.ValidString(reason) {
		h.renderError(w, r, st, http.StatusBadRequest, fmt.Sprintf("The reason must be valid text of at most %d characters; nothing was cancelled.", api.MaxReason))
		return
	}
	err := h.b.Cancel(r.Context(), st.s.reviewer, id, reason)
	switch {
	case err == nil:
		h.sessions.setFlash(st.s, &flash{OK: true, Message: "Cancelled action " + id + ". Its agent is told you stopped it."})
	case errors.Is(err, ErrFinished):
		h.sessions.setFlash(st.s, &flash{Message: "Action " + id + " had already finished; nothing changed."})
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, st, http.StatusNotFound, "There is no such action.")
		return
	case errors.Is(err, ErrForbidden):
		h.sessions.end(st.token)
		h.renderError(w, r, nil, http.StatusForbidden, "Your account may not cancel actions (it may have been disabled). You were logged out.")
		return
	case errors.Is(err, ErrInvalid):
		h.renderError(w, r, st, http.StatusBadRequest, "Nothing was cancelled: "+err.Error())
		return
	default:
		h.internal(w, r, st, "cancelling an action", err)
		return
	}
	http.Redirect(w, r, Prefix+"/actions/"+id, http.StatusSeeOther)
}

// Cancel stops one action and waits, within ctx, for its outcome.
func (b *EngineBackend) Cancel(ctx context.Context, rv Reviewer, id, reason string) error {
	reviewer, ok := reviewerOf(rv)
	if !ok {
		return ErrForbidden
	}
	a, err := b.review.CancelAction(ctx, reviewer, id, reason)
	if err != nil {
		return pageError(err)
	}
	select {
	case <-a.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
