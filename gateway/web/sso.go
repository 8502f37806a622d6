package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/airlockgw/airlock/gateway/engine"
)

// SSO is single sign-on through the team's identity provider (OpenID
// Connect, authorization code with PKCE). The pages keep each login's
// state, nonce and PKCE verifier; the SSO talks to the provider.
type SSO interface {
	// AuthCodeURL is the provider's page for a login that comes back to
	// redirectURL with state, bound to nonce and verifier.
	AuthCodeURL(ctx context.Context, redirectURL, state, nonce, verifier string) (string, error)
	// Finish turns the code the provider sent back into a reviewer. Its
	// errors wrap ErrBadCredentials (with why, for the page to show),
	// ErrRateLimited or ErrUnavailable.
	Finish(ctx context.Context, redirectURL, code, verifier, nonce, remoteAddr string) (Reviewer, error)
	// Device is the device login whose page is page while it waits for
	// its reviewer; false when there is none.
	Device(page string) (DeviceInfo, bool)
}

// Refusal is a single sign-on refused for a reason the reviewer may
// read (not in a reviewer group, a disabled account, …). It is an
// ErrBadCredentials.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// Is makes a Refusal an ErrBadCredentials.
func (r *Refusal) Is(target error) bool { return target == ErrBadCredentials }

const (
	// ssoCookie binds a login's state to the browser that began it. It
	// is SameSite=Lax: the provider's redirect back is a cross-site
	// navigation, which a Strict cookie would not survive.
	ssoCookie = "airlock_sso"
	// ssoLoginTTL is how long a begun login may take at the provider.
	ssoLoginTTL = 10 * time.Minute
	// maxSSOLogins bounds the logins begun and not finished, and
	// maxBucketSSOLogins those begun from one address bucket
	// (engine.Bucket): a flood from one bucket cannot take every place.
	// All of loopback is one bucket (a local user, or a reverse proxy on
	// the same machine, shares loopback's ten).
	maxSSOLogins       = 1000
	maxBucketSSOLogins = 10
)

// ssoLogin is a begun login, by its state.
type ssoLogin struct {
	nonce, verifier string
	bucket          string
	at              time.Time
}

// ssoLogins are the begun logins.
type ssoLogins struct {
	mu sync.Mutex
	m  map[string]ssoLogin
}

// put keeps a login, dropping expired ones. A login in progress is never
// dropped for a new one: when the login's bucket or the table is full,
// put keeps nothing and says when the first place there frees up.
func (l *ssoLogins) put(state string, in ssoLogin) (retry time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]ssoLogin{}
	}
	var mine int
	var first, firstMine time.Time
	for k, v := range l.m {
		if in.at.Sub(v.at) > ssoLoginTTL {
			delete(l.m, k)
			continue
		}
		if first.IsZero() || v.at.Before(first) {
			first = v.at
		}
		if v.bucket == in.bucket {
			mine++
			if firstMine.IsZero() || v.at.Before(firstMine) {
				firstMine = v.at
			}
		}
	}
	switch {
	case mine >= maxBucketSSOLogins:
		return firstMine.Add(ssoLoginTTL), false
	case len(l.m) >= maxSSOLogins:
		return first.Add(ssoLoginTTL), false
	}
	l.m[state] = in
	return time.Time{}, true
}

// take removes and returns a login that has not expired.
func (l *ssoLogins) take(state string, now time.Time) (ssoLogin, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.m[state]
	delete(l.m, state)
	return in, ok && now.Sub(in.at) <= ssoLoginTTL
}

// sso is the single sign-on in force, nil when there is none.
func (h *Handler) sso() SSO {
	if h.o.SSO == nil {
		return nil
	}
	return h.o.SSO()
}

// ssoRedirect is where the provider sends the browser back: this very
// gateway, by the Host the request named (which the listener checked
// against allowed_hosts).
func ssoRedirect(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Prefix + "/sso/callback"
}

func (h *Handler) setSSOCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: value, Path: Prefix + "/sso/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
}

// ssoStart begins a login: a fresh state, nonce and PKCE verifier, and
// off to the provider. It is a GET (a link: the pages' form-action 'self'
// keeps forms from leaving the gateway); whoever makes a browser follow
// it only sends that browser's own user to log in at the provider, and
// the login ends in that browser alone (the state cookie).
func (h *Handler) ssoStart(w http.ResponseWriter, r *http.Request) {
	sso := h.sso()
	if sso == nil {
		h.renderError(w, r, nil, http.StatusNotFound, "This gateway has no single sign-on. Log in with a reviewer name and password.")
		return
	}
	now := h.o.Now()
	state, in := newToken(), ssoLogin{nonce: newToken(), verifier: newToken(), bucket: engine.Bucket(r.RemoteAddr), at: now}
	// The place is taken before the provider is asked, so that a flood
	// of starts costs the provider nothing once it is refused.
	if retry, ok := h.logins.put(state, in); !ok {
		h.refuseSSOStart(w, r, now, retry)
		return
	}
	u, err := sso.AuthCodeURL(r.Context(), ssoRedirect(r), state, in.nonce, in.verifier)
	if err != nil {
		h.logins.take(state, now)
		h.log.Warn("single sign-on cannot begin", "error", err)
		h.renderLogin(w, r, http.StatusServiceUnavailable, "", "The identity provider cannot be reached right now. Try again, or log in with a password.")
		return
	}
	h.setSSOCookie(w, r, state, int(ssoLoginTTL/time.Second))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// refuseSSOStart answers a login that found no place: too many logins
// begun from this address, or at this gateway, are still at the
// provider. They are left to finish; this one may try again at retry.
func (h *Handler) refuseSSOStart(w http.ResponseWriter, r *http.Request, now, retry time.Time) {
	wait := max(retry.Sub(now).Round(time.Second), time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
	h.log.Debug("single sign-on start refused: too many logins in progress", "addr", r.RemoteAddr)
	h.renderLogin(w, r, http.StatusTooManyRequests, "", fmt.Sprintf("Too many logins through the identity provider are in progress from your address (or at this gateway); "+
		"the logins already begun are left to finish. Try again after %s (in %s), or log in with a password.", retry.UTC().Format(time.TimeOnly+" UTC"), wait))
}

// ssoCallback finishes a login: the state must be the one this browser
// began (its cookie) and not used before; the code is exchanged and the
// reviewer admitted by the SSO.
func (h *Handler) ssoCallback(w http.ResponseWriter, r *http.Request) {
	sso := h.sso()
	if sso == nil {
		h.renderError(w, r, nil, http.StatusNotFound, "This gateway has no single sign-on. Log in with a reviewer name and password.")
		return
	}
	q := r.URL.Query()
	c, err := r.Cookie(ssoCookie)
	h.setSSOCookie(w, r, "", -1)
	state := q.Get("state")
	if err != nil || !equalTokens(state, c.Value) {
		h.renderLogin(w, r, http.StatusForbidden, "", "This sign-on did not begin in this browser, or took too long. Log in again.")
		return
	}
	in, ok := h.logins.take(state, h.o.Now())
	if !ok {
		h.renderLogin(w, r, http.StatusForbidden, "", "This sign-on was used already or took too long. Log in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		h.renderLogin(w, r, http.StatusUnauthorized, "", "The identity provider refused the login: "+clipText(e+" "+q.Get("error_description"), 300))
		return
	}
	rv, err := sso.Finish(r.Context(), ssoRedirect(r), q.Get("code"), in.verifier, in.nonce, r.RemoteAddr)
	switch {
	case errors.Is(err, ErrRateLimited):
		h.renderLogin(w, r, http.StatusTooManyRequests, "", "Too many failed logins from this address. Wait a minute and try again.")
		return
	case errors.Is(err, ErrBadCredentials):
		why := "the identity provider's answer was not accepted"
		var rf *Refusal
		if errors.As(err, &rf) {
			why = rf.Reason
		}
		h.renderLogin(w, r, http.StatusForbidden, "", "Single sign-on refused: "+clipText(why, 400))
		return
	case err != nil:
		h.log.Error("single sign-on failed", "error", err)
		h.renderLogin(w, r, http.StatusServiceUnavailable, "", "Single sign-on is not possible right now; the gateway logged why.")
		return
	}
	if old, err := r.Cookie(sessionCookie); err == nil {
		h.sessions.end(old.Value)
	}
	tok, _ := h.sessions.create(rv)
	h.setSessionCookie(w, r, tok, 0)
	h.log.Info("reviewer logged in", "reviewer", rv.Name(), "via", "sso", "addr", r.RemoteAddr)
	// Not a redirect: the browser arrived here from the provider's site,
	// and a redirect would carry that cross-site navigation on, without
	// the (SameSite=Strict) session cookie. From this page on, the
	// navigation is the gateway's own.
	w.Header().Set("Refresh", "0; url="+Prefix+"/pending")
	h.render(w, r, http.StatusOK, "continue", &pageData{Title: "Logged in", Message: "Logged in as " + rv.Name() + "."})
}

// clipText bounds a message taken from elsewhere.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
