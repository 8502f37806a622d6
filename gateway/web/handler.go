package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// Prefix is where the pages live; every path the handler serves starts
// with it.
const Prefix = "/ui"

const (
	// DefaultIdleTimeout ends a session nobody used for this long.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultMaxAge ends every session this long after login.
	DefaultMaxAge = 12 * time.Hour
	// DefaultPollInterval is how often the pending page asks for changes.
	DefaultPollInterval = 2 * time.Second
	// maxForm bounds every form body.
	maxForm = 64 << 10
	// maxReason bounds a denial reason or revocation note.
	maxReason = 1000
	// maxOutputShown is how much of each output stream the action page
	// shows; more is announced, never cut silently.
	maxOutputShown = 1 << 20
)

// csp allows the page's own stylesheet and script and nothing else: no
// inline script or style, no plugins, no framing, forms only to us, and
// HTML reaches the DOM only through the script's one Trusted Types policy.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types airlock"

// Options configure a Handler. The zero value is useful.
type Options struct {
	// IdleTimeout and MaxAge end sessions; zero means the defaults.
	IdleTimeout time.Duration
	MaxAge      time.Duration
	// PollInterval is how often the pending page polls; zero: 2 s.
	PollInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger gets failures the reviewer cannot act on; nil discards.
	Logger hclog.Logger
	// SSO, when set, returns the single sign-on in force (nil: none):
	// asked at each request, so that a reloaded configuration's sso block
	// takes effect at once.
	SSO func() SSO
}

// Handler serves the reviewer pages under Prefix.
type Handler struct {
	b        Backend
	o        Options
	log      hclog.Logger
	sessions *sessions
	logins   ssoLogins
	h        http.Handler
}

// New returns the pages' handler over b.
func New(b Backend, o Options) *Handler {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{b: b, o: o, log: o.Logger, sessions: newSessions(o.IdleTimeout, o.MaxAge, o.Now)}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", staticHandler(static)))
	mux.HandleFunc("GET "+Prefix+"/{$}", h.redirectHome)
	mux.HandleFunc("GET "+Prefix, h.redirectHome)
	mux.HandleFunc("GET "+Prefix+"/login", h.loginPage)
	mux.HandleFunc("POST "+Prefix+"/login", h.login)
	mux.HandleFunc("POST "+Prefix+"/logout", h.post(h.logout))
	mux.HandleFunc("GET "+Prefix+"/sso/start", h.ssoStart)
	mux.HandleFunc("GET "+Prefix+"/sso/callback", h.ssoCallback)
	mux.HandleFunc("GET "+Prefix+"/device/{page}", h.devicePage)
	mux.HandleFunc("GET "+Prefix+"/pending", h.page(h.pending))
	mux.HandleFunc("GET "+Prefix+"/pending/cards", h.fragment(h.pendingCards))
	mux.HandleFunc("POST "+Prefix+"/approvals/{id}/decision", h.post(h.decide))
	mux.HandleFunc("POST "+Prefix+"/approvals/{id}/command", h.post(h.revealCommand))
	mux.HandleFunc("GET "+Prefix+"/runs", h.page(h.runs))
	mux.HandleFunc("POST "+Prefix+"/runs/{id}/revoke", h.post(h.revoke))
	mux.HandleFunc("GET "+Prefix+"/actions/{id}", h.page(h.action))
	mux.HandleFunc("POST "+Prefix+"/actions/{id}/output", h.post(h.output))
	mux.HandleFunc("POST "+Prefix+"/actions/{id}/cancel", h.post(h.cancel))
	mux.HandleFunc("GET "+Prefix+"/audit", h.page(h.audit))
	mux.HandleFunc("POST "+Prefix+"/audit/verify", h.post(h.verify))
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	// Go's cross-origin protection refuses unsafe requests that a browser
	// marks as cross-site (Sec-Fetch-Site, Origin) before any handler runs;
	// the CSRF tokens below are the second lock.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, nil, http.StatusForbidden, "Cross-site requests are refused. Open the page from the gateway itself and try again.")
	}))
	h.h = securityHeaders(cop.Handler(mux))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// securityHeaders sets the headers of every page: the CSP above, no
// framing, no sniffing, no referrer (URLs carry request and action ids),
// no caching of pages that show commands and tokens.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
		if r.TLS != nil {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}

func staticHandler(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func (h *Handler) redirectHome(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, Prefix+"/pending", http.StatusSeeOther)
}

// Sessions and the request guards.

type ctxKey struct{}

type reqState struct {
	s     *session
	token string
}

func sessionFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(ctxKey{}).(*reqState)
	return st
}

func (h *Handler) current(r *http.Request, touch bool) (*reqState, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	s, ok := h.sessions.get(c.Value, touch)
	if !ok {
		return nil, false
	}
	if !h.b.Enabled(r.Context(), s.reviewer) {
		h.sessions.end(c.Value)
		return nil, false
	}
	return &reqState{s: s, token: c.Value}, true
}

// page guards a page: without a session the browser goes to the login.
func (h *Handler) page(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, ok := h.current(r, true)
		if !ok {
			http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
			return
		}
		fn(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, st)))
	}
}

// fragment guards what the page's script polls: it does not count as
// activity, and without a session it answers 401 for the script to say so.
func (h *Handler) fragment(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, ok := h.current(r, false)
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, "session ended")
			return
		}
		fn(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, st)))
	}
}

// post guards a state change: a live session and the session's CSRF token
// in the form, or nothing happens.
func (h *Handler) post(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		st, ok := h.current(r, true)
		if !ok {
			h.renderError(w, r, nil, http.StatusUnauthorized, "Your session has ended, so nothing was changed. Log in again.")
			return
		}
		if err := r.ParseForm(); err != nil {
			h.renderError(w, r, st, http.StatusBadRequest, "The form could not be read, so nothing was changed.")
			return
		}
		if !equalTokens(r.PostForm.Get("csrf"), st.s.csrf) {
			h.log.Warn("form without a valid CSRF token refused", "path", r.URL.Path, "addr", r.RemoteAddr)
			h.renderError(w, r, st, http.StatusForbidden, "This form is not from your current session (its CSRF token is missing or wrong), so nothing was changed. Reload the page and try again.")
			return
		}
		fn(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, st)))
	}
}

func (h *Handler) setSessionCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// Login and logout.

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.current(r, false); ok {
		h.redirectHome(w, r)
		return
	}
	msg := ""
	if r.URL.Query().Get("out") == "1" {
		msg = "You are logged out."
	}
	// A GET never consumes a link (link previews and prefetchers follow
	// links): it shows a button that POSTs it.
	h.renderLoginData(w, r, http.StatusOK, msg, "", loginData{Link: r.URL.Query().Get("link")})
}

// loginData is the login page's Data: a one-time link to log in with.
type loginData struct {
	Link string
	// SSO offers single sign-on.
	SSO bool
}

// renderLogin shows the login form with a fresh login CSRF token, held in
// a short-lived cookie (double submit: there is no session yet).
func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg, problem string) {
	h.renderLoginData(w, r, status, msg, problem, loginData{})
}

func (h *Handler) renderLoginData(w http.ResponseWriter, r *http.Request, status int, msg, problem string, ld loginData) {
	tok := newToken()
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: tok, Path: Prefix, MaxAge: 600,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	ld.SSO = h.sso() != nil
	h.render(w, r, status, "login", &pageData{Title: "Log in", CSRF: tok, Message: msg, Problem: problem, Data: ld})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.renderLogin(w, r, http.StatusBadRequest, "", "The form could not be read.")
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !equalTokens(r.PostForm.Get("csrf"), c.Value) {
		h.renderLogin(w, r, http.StatusForbidden, "", "The login form expired or did not come from this page. Try again.")
		return
	}
	name, password := r.PostForm.Get("reviewer"), r.PostForm.Get("password")
	var rv Reviewer
	var device Device
	if link := r.PostForm.Get("link"); link != "" {
		rv, err = h.b.LoginLink(r.Context(), link, r.RemoteAddr)
	} else {
		rv, device, err = h.b.Login(r.Context(), name, password, presentedDevice(r), r.RemoteAddr)
	}
	switch {
	case errors.Is(err, ErrRateLimited):
		h.loginLimited(w, r, err)
		return
	case errors.Is(err, ErrBadCredentials) && r.PostForm.Get("link") != "":
		h.renderLogin(w, r, http.StatusUnauthorized, "", "This login link is not valid: it was used already, has expired, or was never made. Log in with your name and password.")
		return
	case errors.Is(err, ErrBadCredentials):
		h.renderLogin(w, r, http.StatusUnauthorized, "", "Wrong reviewer name or password.")
		return
	case err != nil:
		h.log.Error("login failed", "error", err)
		h.renderLogin(w, r, http.StatusInternalServerError, "", "Login is not possible right now; the gateway logged why.")
		return
	}
	// A new session id at every login: a cookie planted before login
	// (session fixation) is never promoted.
	if old, err := r.Cookie(sessionCookie); err == nil {
		h.sessions.end(old.Value)
	}
	tok, _ := h.sessions.create(rv)
	h.setSessionCookie(w, r, tok, 0)
	rememberDevice(w, r, device)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	h.log.Info("reviewer logged in", "reviewer", rv.Name(), "addr", r.RemoteAddr)
	h.redirectHome(w, r)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	h.sessions.end(st.token)
	h.setSessionCookie(w, r, "", -1)
	http.Redirect(w, r, Prefix+"/login?out=1", http.StatusSeeOther)
}

// Pending approvals.

func (h *Handler) pending(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	cards, err := h.b.Pending(r.Context())
	if err != nil {
		h.internal(w, r, st, "listing pending approvals", err)
		return
	}
	h.render(w, r, http.StatusOK, "pending", h.data(st, "Pending approvals", &pendingData{Cards: cards, Poll: Prefix + "/pending/cards", Interval: h.o.PollInterval.Milliseconds()}))
}

func (h *Handler) pendingCards(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	cards, err := h.b.Pending(r.Context())
	if err != nil {
		h.log.Error("listing pending approvals", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h.renderFragment(w, "cards", h.data(st, "", &pendingData{Cards: cards}))
}

var (
	requestIDPattern = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)
	runIDPattern     = regexp.MustCompile(`^run_[0-9a-f]{32}$`)
	actionIDPattern  = regexp.MustCompile(`^act_[a-z2-7]{1,64}$`)
	digestPattern    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	f := r.PostForm
	d := Decision{RequestID: r.PathValue("id"), Digest: f.Get("digest"), Reason: f.Get("reason")}
	if !requestIDPattern.MatchString(d.RequestID) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such approval request.")
		return
	}
	if !digestPattern.MatchString(d.Digest) {
		h.renderError(w, r, st, http.StatusBadRequest, "The decision does not say which request it is for (no digest), so nothing was decided. Reload the page.")
		return
	}
	switch f.Get("decision") {
	case "approve":
		d.Approve = true
	case "deny":
	default:
		h.renderError(w, r, st, http.StatusBadRequest, "The decision must be approve or deny; nothing was decided.")
		return
	}
	if len(d.Reason) > maxReason || !utf8.ValidString(d.Reason) {
		h.renderError(w, r, st, http.StatusBadRequest, fmt.Sprintf("The reason must be valid text of at most %d bytes; nothing was decided.", maxReason))
		return
	}
	if d.Approve {
		if v := f.Get("ttl_s"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				h.renderError(w, r, st, http.StatusBadRequest, "The approval's lifetime must be a positive number of seconds; nothing was decided.")
				return
			}
			d.TTL = time.Duration(n) * time.Second
		}
		if v := strings.TrimSpace(f.Get("max_actions")); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				h.renderError(w, r, st, http.StatusBadRequest, "The action limit must be a whole number, 0 or more (empty: no limit); nothing was decided.")
				return
			}
			d.MaxActions = n
		}
		d.OnlyThisAccount = f.Get("scope") == "account"
		if v := f.Get("grant_s"); v != "" && v != "0" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > maxGrantS {
				h.renderError(w, r, st, http.StatusBadRequest, "The grant must be a positive number of seconds, at most a day; nothing was decided.")
				return
			}
			d.Grant = time.Duration(n) * time.Second
		}
	}
	card, err := h.b.Decide(r.Context(), st.s.reviewer, d)
	if err != nil {
		if errors.Is(err, ErrForbidden) {
			h.sessions.end(st.token)
		}
		msg, ok := decisionProblem(err)
		if !ok {
			h.internal(w, r, st, "recording a decision", err)
			return
		}
		h.sessions.setFlash(st.s, &flash{Message: msg})
		http.Redirect(w, r, Prefix+"/pending", http.StatusSeeOther)
		return
	}
	shown, cut := firstLine(card.Command)
	h.sessions.setFlash(st.s, &flash{OK: true, Message: decidedMessage(card), Detail: shown, Cut: cut})
	http.Redirect(w, r, Prefix+"/pending", http.StatusSeeOther)
}

// maxGrantS bounds a grant as the form sends it (the account's max_grant
// bounds it further).
const maxGrantS = 24 * 60 * 60

// decisionProblem says, in a reviewer's terms, why a decision did not
// count.
func decisionProblem(err error) (string, bool) {
	for _, c := range []struct {
		err error
		msg string
	}{
		{ErrChanged, "Nothing was decided: the request is not the one your page showed (its digest differs). Reload and review it again."},
		{ErrAlreadyDecided, "Nothing was decided: this request was already approved or denied (by you in another tab, or by another reviewer)."},
		{ErrExpired, "Nothing was decided: this request expired before your decision arrived. The agent was told it expired and may ask again."},
		{ErrRunEnded, "Nothing was decided: the run ended (its process exited, it was closed or revoked), so there is nothing left to approve."},
		{ErrSelfApproval, "Nothing was decided: you are the requester of this run, and nobody approves their own request."},
		{ErrNotFound, "Nothing was decided: there is no such request."},
		{ErrForbidden, "Nothing was decided: your account may not decide (it may have been disabled). You were logged out."},
		{ErrUnavailable, "Nothing was decided: the decision could not be recorded in the audit log, and an unrecorded decision does not count. Tell the operator."},
		{ErrInvalid, "Nothing was decided: "},
	} {
		if errors.Is(err, c.err) {
			if c.err == ErrInvalid {
				return c.msg + strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ") + ".", true
			}
			return c.msg, true
		}
	}
	return "", false
}

func decidedMessage(c Card) string {
	switch {
	case c.Status == "approved" && c.Kind == "run":
		return fmt.Sprintf("Approved run %s. Its actions on run-mode accounts now pass until the approval ends; its first action was:", c.RunID)
	case c.Status == "approved" && !c.GrantUntil.IsZero():
		return fmt.Sprintf("Approved call %s: this exact command may now run on %s as %s, and again in this run until %s:", c.ID, c.Target, c.Account, c.GrantUntil.UTC().Format("15:04:05 UTC"))
	case c.Status == "approved":
		return fmt.Sprintf("Approved call %s: this one command may now run once on %s as %s:", c.ID, c.Target, c.Account)
	case c.Kind == "run":
		return fmt.Sprintf("Denied run %s. Every action of this process is refused from now on. Its first action was:", c.RunID)
	default:
		return fmt.Sprintf("Denied call %s. The agent is told, with your reason. The command was:", c.ID)
	}
}

// Runs.

func (h *Handler) runs(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	runs, err := h.b.Runs(r.Context())
	if err != nil {
		h.internal(w, r, st, "listing runs", err)
		return
	}
	h.render(w, r, http.StatusOK, "runs", h.data(st, "Runs", runs))
}

func (h *Handler) revoke(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	id := r.PathValue("id")
	note := r.PostForm.Get("note")
	if !runIDPattern.MatchString(id) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such run.")
		return
	}
	if len(note) > maxReason || !utf8.ValidString(note) {
		h.renderError(w, r, st, http.StatusBadRequest, fmt.Sprintf("The note must be valid text of at most %d bytes; nothing was revoked.", maxReason))
		return
	}
	err := h.b.Revoke(r.Context(), st.s.reviewer, id, note)
	switch {
	case err == nil:
		h.sessions.setFlash(st.s, &flash{OK: true, Message: "Revoked run " + id + ". Its next action is refused, and actions waiting for approval in it are told the run ended."})
	case errors.Is(err, ErrRunEnded):
		h.sessions.setFlash(st.s, &flash{Message: "Run " + id + " had already ended; nothing changed."})
	case errors.Is(err, ErrNotFound):
		h.sessions.setFlash(st.s, &flash{Message: "There is no run " + id + "."})
	case errors.Is(err, ErrForbidden):
		h.sessions.end(st.token)
		h.renderError(w, r, nil, http.StatusForbidden, "Your account may not revoke runs (it may have been disabled). You were logged out.")
		return
	case errors.Is(err, ErrUnavailable):
		h.sessions.setFlash(st.s, &flash{Message: "Nothing was revoked: the revocation could not be recorded in the audit log. Tell the operator."})
	default:
		h.internal(w, r, st, "revoking a run", err)
		return
	}
	http.Redirect(w, r, Prefix+"/runs", http.StatusSeeOther)
}

// Actions.

type actionData struct {
	Action
	Output *shownOutput
}

type shownOutput struct {
	Stdout, Stderr         string
	StdoutCut, StderrCut   int64 // bytes stored but not shown here
	StdoutLost, StderrLost int64 // bytes received but not stored
}

func (h *Handler) loadAction(w http.ResponseWriter, r *http.Request, st *reqState) (Action, bool) {
	id := r.PathValue("id")
	if !actionIDPattern.MatchString(id) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such action.")
		return Action{}, false
	}
	a, err := h.b.Action(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such action.")
		return Action{}, false
	}
	if err != nil {
		h.internal(w, r, st, "reading an action", err)
		return Action{}, false
	}
	return a, true
}

func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	if a, ok := h.loadAction(w, r, st); ok {
		h.render(w, r, http.StatusOK, "action", h.data(st, "Action "+a.ID, &actionData{Action: a}))
	}
}

func (h *Handler) output(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	id := r.PathValue("id")
	if !actionIDPattern.MatchString(id) {
		h.renderError(w, r, st, http.StatusNotFound, "There is no such action.")
		return
	}
	out, err := h.b.ReadOutput(r.Context(), st.s.reviewer, id)
	switch {
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, st, http.StatusNotFound, "This action has no stored output.")
		return
	case errors.Is(err, ErrUnavailable):
		h.renderError(w, r, st, http.StatusServiceUnavailable, "The output is not shown: reading it could not be recorded in the audit log.")
		return
	case errors.Is(err, ErrForbidden):
		h.renderError(w, r, st, http.StatusForbidden, "Your account may not read output.")
		return
	case err != nil:
		h.internal(w, r, st, "reading output", err)
		return
	}
	// Loaded after the read, so its trail shows the read itself.
	a, ok := h.loadAction(w, r, st)
	if !ok {
		return
	}
	so := &shownOutput{}
	so.Stdout, so.StdoutCut = cut(out.Stdout)
	so.Stderr, so.StderrCut = cut(out.Stderr)
	so.StdoutLost = max(0, out.StdoutReceived-int64(len(out.Stdout)))
	so.StderrLost = max(0, out.StderrReceived-int64(len(out.Stderr)))
	h.render(w, r, http.StatusOK, "action", h.data(st, "Action "+a.ID, &actionData{Action: a, Output: so}))
}

// revealData is the page of a revealed command.
type revealData struct {
	ApprovalID string
	Command    string
}

// revealCommand shows a pending request's original command, stored
// redacted, once the reading is recorded.
func (h *Handler) revealCommand(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	id := r.PathValue("id")
	cmd, err := h.b.RevealCommand(r.Context(), st.s.reviewer, id)
	switch {
	case errors.Is(err, ErrNotFound):
		h.renderError(w, r, st, http.StatusNotFound, "This request has no original command to show: it was not redacted, or it has been decided (the original is erased then).")
		return
	case errors.Is(err, ErrUnavailable):
		h.renderError(w, r, st, http.StatusServiceUnavailable, "The command is not shown: reading it could not be recorded in the audit log.")
		return
	case errors.Is(err, ErrForbidden):
		h.renderError(w, r, st, http.StatusForbidden, "Your account may not reveal commands.")
		return
	case err != nil:
		h.internal(w, r, st, "revealing a command", err)
		return
	}
	h.render(w, r, http.StatusOK, "reveal", h.data(st, "Command of "+id, &revealData{ApprovalID: id, Command: cmd}))
}

// cut returns what the page shows of b and how many bytes it leaves out
// (which the page announces).
func cut(b []byte) (string, int64) {
	if len(b) <= maxOutputShown {
		return string(b), 0
	}
	return string(b[:maxOutputShown]), int64(len(b) - maxOutputShown)
}

// Audit.

func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	as, err := h.b.AuditStatus(r.Context())
	if err != nil {
		h.internal(w, r, st, "reading the audit status", err)
		return
	}
	h.render(w, r, http.StatusOK, "audit", h.data(st, "Audit log", &as))
}

func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	st := sessionFrom(r.Context())
	v, err := h.b.VerifyAudit(r.Context(), st.s.reviewer)
	if err != nil {
		h.internal(w, r, st, "verifying the audit log", err)
		return
	}
	if v.Intact {
		h.sessions.setFlash(st.s, &flash{OK: true, Message: fmt.Sprintf("The audit log verified: %d entries intact.", v.Entries)})
	} else {
		h.sessions.setFlash(st.s, &flash{Message: "The audit log did NOT verify. See the problems below."})
	}
	http.Redirect(w, r, Prefix+"/audit", http.StatusSeeOther)
}

// Errors.

func (h *Handler) internal(w http.ResponseWriter, r *http.Request, st *reqState, what string, err error) {
	h.log.Error(what, "error", err)
	h.renderError(w, r, st, http.StatusInternalServerError, "Something failed while "+what+"; the gateway logged why. Nothing you asked for was done unless the page says so.")
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, st *reqState, status int, msg string) {
	d := &pageData{Title: http.StatusText(status), Problem: msg, Status: status}
	if st != nil {
		d = h.data(st, http.StatusText(status), nil)
		d.Problem, d.Status = msg, status
	}
	h.render(w, r, status, "error", d)
}
