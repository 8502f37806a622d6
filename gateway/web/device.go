package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// deviceCookie carries the remembered login device proof a password login
// gave this browser. It is no credential (alone it logs nobody in): it
// charges this browser's wrong passwords to its own budget, so that
// guesses at the reviewer's name from elsewhere never slow this browser
// down. It outlives logout on purpose.
const deviceCookie = "airlock_device"

// Device is a remembered login device proof and when it ends, as
// Backend.Login issues it.
type Device struct {
	Proof   string
	Expires time.Time
}

// presentedDevice is the proof the browser sent, if any.
func presentedDevice(r *http.Request) string {
	if c, err := r.Cookie(deviceCookie); err == nil {
		return c.Value
	}
	return ""
}

// rememberDevice keeps d in the browser: HttpOnly, SameSite=Strict,
// Secure under TLS, for the pages only, until it ends.
func rememberDevice(w http.ResponseWriter, r *http.Request, d Device) {
	if d.Proof == "" {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: deviceCookie, Value: d.Proof, Path: Prefix, MaxAge: int(time.Until(d.Expires) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// LimitError is ErrRateLimited with the gateway's words for which budget
// is spent, and when to try again.
type LimitError struct {
	Message    string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string        { return "" + e.Message }
func (e *LimitError) Is(target error) bool { return target == ErrRateLimited }

// loginLimited answers a login refused by a budget: 429, with
// Retry-After and the gateway's reason when it gave them.
func (h *Handler) loginLimited(w http.ResponseWriter, r *http.Request, err error) {
	msg := "Too many failed logins for this name or address. Wait a minute and try again."
	if le, ok := errors.AsType[*LimitError](err); ok {
		if le.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(le.RetryAfter/time.Second)))
		}
		msg = sentence(le.Message)
	}
	h.renderLogin(w, r, http.StatusTooManyRequests, "", msg)
}

// sentence is an API message (lowercase, no full stop) as the pages
// write it.
func sentence(s string) string {
	c, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(c)) + strings.TrimSuffix(s[n:], ".") + "."
}
