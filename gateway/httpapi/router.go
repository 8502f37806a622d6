package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

const (
	// MaxBody bounds every JSON request body but an action's.
	MaxBody = 256 << 10
	// MaxActionBody bounds an action's body (POST /v1/actions, MCP over
	// HTTP): its standard input, base64, up to the largest max_stdin, and
	// the rest.
	MaxActionBody = config.MaxStdinLimit/3*4 + 4 + MaxBody
	// writeTimeout bounds each write of at most writePiece bytes to a
	// client, so a client that stops reading cannot hold a handler
	// forever, and one that reads slowly still gets a large response.
	writeTimeout = 30 * time.Second
)

// principal is who is calling, as established by the listener and the
// credentials presented.
type principal struct {
	local      bool
	peer       engine.Peer
	remoteAddr string
	// runToken is the bearer token of an HTTP agent: identify checked that
	// it is a run's; whether that run may still act is checked when used.
	runToken engine.Secret
	// agent is the agent an agent token, a workload identity token or a
	// client certificate proved (it may create runs).
	agent *engine.Agent
	// certRefused says why a verified client certificate is no agent's.
	certRefused error
	// reviewer is set only from a verified reviewer credential.
	reviewer   engine.Reviewer
	isReviewer bool
}

// caller is the principal as an agent asking the engine.
func (p *principal) caller() engine.Caller {
	return engine.Caller{Local: p.local, Peer: p.peer, RunToken: p.runToken, RemoteAddr: p.remoteAddr}
}

type principalKey struct{}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// Local is the local socket's part of authentication: the token every
// local connection presents, and its rotation.
type Local interface {
	// ValidToken reports, in constant time, whether token is the current
	// local token.
	ValidToken(token string) bool
	// Rotate publishes a new local token and cuts the connections made
	// with the old one.
	Rotate(ctx context.Context) error
}

// Options configure the API's handler.
type Options struct {
	// Engine serves every request. Required.
	Engine *engine.Engine
	// Local authenticates local socket callers; nil refuses them all.
	Local Local
	// UI serves the reviewer pages under /ui/; nil: none.
	UI http.Handler
	// MCP, when set, serves MCP over Streamable HTTP at /mcp: it returns
	// the MCP server of a new session for c, a remote agent holding a run
	// token. The wiring builds it (gateway/mcp): the API carries the
	// sessions, checks their tokens and knows nothing of the tools.
	MCP func(c engine.Caller) *sdk.Server
	// UIBase is the reviewer pages' base address (scheme://host:port),
	// "" when there is no HTTP listener: login links point there.
	UIBase func() string
	// Logger receives the handler's log; nil discards.
	Logger hclog.Logger
	// Heartbeat is how often an event stream with nothing else to send
	// gets a comment, so that its reader knows the gateway is there (and
	// a dead reader is found); zero: api.Heartbeat. Clients give up after
	// api.DefaultSilence: keep it well below.
	Heartbeat time.Duration
}

// server is the API over one engine.
type server struct {
	e         *engine.Engine
	local     Local
	uiBase    func() string
	log       hclog.Logger
	heartbeat time.Duration
}

// hostGuard refuses an HTTP request whose Host is not one of the
// listener's allowed hosts: a page on another site that rebinds its own
// name to this address (DNS rebinding) reaches nothing. The local socket
// has no Host to check: its callers are named by the kernel.
func (s *server) hostGuard(next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, h := range s.e.Config().Listen.AllowedHosts {
		allowed[h] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, local := peerFrom(r.Context()); !local {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
			if !allowed[host] {
				s.log.Warn("request for another host refused", "host", fmt.Sprintf("%.64q", r.Host), "remote", r.RemoteAddr)
				writeError(w, http.StatusMisdirectedRequest, api.CodeForbidden, "this gateway does not answer for that Host; an operator lists the names clients use in listen.allowed_hosts")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// crossSiteGuard refuses what a web page on another site could send to
// /v1 from a browser: a state-changing request the browser marks as
// cross-origin (Sec-Fetch-Site, or an Origin that is not this host), and
// any body that is not JSON (text/plain and forms need no preflight).
// Agents and the CLI send neither browser header.
func crossSiteGuard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin requests from a browser are refused: the API is for agents and the CLI; reviewers use the pages under /ui")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if mt == "application/octet-stream" && r.URL.Path == "/v1/uploads" {
				// Not a type a page may send without a preflight.
				break
			}
			if mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, api.CodeUnsupportedType, "send a JSON body (Content-Type: application/json), an empty object {} when there is nothing to say")
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}

// bearerChallenge makes every 401 of /mcp say how to authenticate (RFC
// 6750): MCP clients look for WWW-Authenticate, a missing token included.
func bearerChallenge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			w = &challenger{ResponseWriter: w}
		}
		next.ServeHTTP(w, r)
	})
}

// challenger adds a Bearer challenge to a 401 that has none.
type challenger struct{ http.ResponseWriter }

func (c *challenger) WriteHeader(status int) {
	if h := c.Header(); status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", `Bearer realm="airlock", error="invalid_token", error_description="present a run token from POST /v1/runs"`)
	}
	c.ResponseWriter.WriteHeader(status)
}

// Flush passes a flush on (streamed MCP responses).
func (c *challenger) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *challenger) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// New returns the API's handler: /v1, /mcp, /healthz, /metrics and the
// pages under /ui, for both the local socket and the HTTP listener (the
// socket's connections carry their peer credentials: see ConnContext).
func New(o Options) http.Handler {
	s := &server{e: o.Engine, local: o.Local, log: cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger()),
		heartbeat: cmp.Or(o.Heartbeat, api.Heartbeat), uiBase: o.UIBase}
	r := chi.NewRouter()
	r.Use(s.recoverer, apiHeaders, s.hostGuard, bearerChallenge, s.identify)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.e.Metrics(), promhttp.HandlerOpts{}))
	if o.MCP != nil {
		r.Handle("/mcp", s.mcpHandler(o.MCP))
	}
	r.Route("/v1", func(r chi.Router) {
		r.Use(crossSiteGuard)
		r.Post("/login", s.handleLogin)
		r.With(reviewerOnly).Delete("/login", s.handleLogout)
		r.Post("/login/device", s.handleDeviceLogin)
		r.Post("/login/device/token", s.handleDeviceToken)
		r.With(agentOnly).Post("/actions", s.handlePostAction)
		r.With(agentOrReviewer).Get("/actions/{id}", s.handleGetAction)
		r.With(agentOrReviewer).Get("/actions/{id}/events", s.handleActionEvents)
		r.With(agentOrReviewer).Get("/actions/{id}/output", s.handleActionOutput)
		r.With(agentOnly).Get("/actions/{id}/file", s.handleActionFile)
		r.With(agentOnly).Post("/uploads", s.handleUpload)
		r.Post("/runs", s.handleCreateRun)
		r.With(reviewerOnly).Get("/runs", s.handleListRuns)
		r.With(agentOrReviewer).Get("/runs/{id}", s.handleGetRun)
		r.With(agentOrReviewer).Delete("/runs/{id}", s.handleEndRun)
		r.With(reviewerOnly).Post("/actions/{id}/cancel", s.handleCancelAction)
		r.With(reviewerOnly).Get("/approvals", s.handleListApprovals)
		r.With(reviewerOnly).Post("/approvals/{id}/decision", s.handleDecision)
		r.With(reviewerOnly).Get("/approvals/{id}/command", s.handleRevealCommand)
		r.With(agentOrReviewer).Get("/targets", s.handleTargets)
		r.With(reviewerOnly).Get("/audit/entries", s.handleAuditEntries)
		r.With(reviewerOnly).Get("/audit/verify", s.handleAuditVerify)
		r.Post("/token/rotate", s.handleRotateToken)
		r.Post("/agents", s.handleAddAgent)
		r.Get("/agents", s.handleListAgents)
		r.Delete("/agents/{id}", s.handleRevokeAgent)
		r.Post("/config/reload", s.handleReload)
		r.Get("/reviewers", s.handleListReviewers)
		r.Post("/reviewers", s.handleReviewerChange(engine.ReviewerAdd))
		r.Post("/reviewers/{name}/disable", s.handleReviewerChange(engine.ReviewerDisable))
		r.Post("/reviewers/{name}/enable", s.handleReviewerChange(engine.ReviewerEnable))
		r.Post("/reviewers/{name}/password", s.handleReviewerChange(engine.ReviewerPassword))
		r.Delete("/reviewers/{name}", s.handleReviewerChange(engine.ReviewerRemove))
		r.Post("/reviewers/{name}/rename", s.handleRenameReviewer)
		r.Post("/reviewers/{name}/link", s.handleLoginLink)
	})
	if o.UI != nil {
		r.Mount("/ui", uiGuard(o.UI))
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, api.CodeBadRequest, "method "+r.Method+" is not allowed on "+r.URL.Path)
	})
	return r
}

func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func apiHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// identify establishes the principal. On the local socket every request
// must present the local token; the kernel's peer credentials say which
// process it is. On HTTP a bearer token is a reviewer token or a run token.
func (s *server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &principal{remoteAddr: r.RemoteAddr}
		bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if pc, ok := peerFrom(r.Context()); ok {
			p.local, p.peer = true, pc
			key := fmt.Sprintf("uid:%d", pc.UID)
			if s.e.Identity().Blocked(key) {
				writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many wrong local tokens; wait a minute")
				return
			}
			if !hasBearer || s.local == nil || !s.local.ValidToken(bearer) {
				s.e.Identity().AuthFailed(r.Context(), "local_token", key)
				s.log.Warn("local request with a wrong or missing token", "pid", pc.PID, "uid", pc.UID)
				writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "the local token is missing or wrong; read it from the control file next to the socket")
				return
			}
		} else if hasBearer {
			tok := engine.NewSecret(bearer)
			rv, err := s.e.Review().VerifyToken(r.Context(), tok)
			switch {
			case err == nil:
				p.reviewer, p.isReviewer = rv, true
			case errors.Is(err, engine.ErrMalformedToken) && (engine.IsAgentToken(bearer) || engine.LooksLikeJWT(bearer)):
				// A genuine token is let in whatever others from its
				// address guessed (nobody locks an agent out on
				// purpose); only a wrong one meets the budget. A
				// workload token meets it first: checking one may fetch
				// the issuer's keys.
				key := runTokenLimitKey(r)
				kind, verify := "agent_token", func() (engine.Agent, error) { return s.e.Identity().VerifyAgent(r.Context(), tok) }
				if !engine.IsAgentToken(bearer) {
					kind, verify = "workload_token", func() (engine.Agent, error) { return s.e.Identity().VerifyWorkload(r.Context(), bearer) }
					if s.tokensBlocked(w, key) {
						return
					}
				}
				a, err := verify()
				if err != nil {
					if errors.Is(err, engine.ErrUnauthorized) {
						if s.tokensBlocked(w, key) {
							return
						}
						s.e.Identity().AuthFailed(r.Context(), kind, key)
						w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
					}
					s.writeErr(w, err)
					return
				}
				p.agent = &a
			case errors.Is(err, engine.ErrMalformedToken):
				// Not a reviewer token: it must be a run's. A token of no
				// run is refused here, counted and rate-limited like any
				// wrong credential; an expired one is refused too. A
				// genuine token of a run that has ended otherwise passes:
				// what it may still do (read, not act) is the endpoint's
				// to say.
				key := runTokenLimitKey(r)
				_, rerr := s.e.Runs().ResolveToken(r.Context(), tok)
				switch {
				case invalidRunToken(rerr) && s.tokensBlocked(w, key):
					return
				case invalidRunToken(rerr):
					s.e.Identity().AuthFailed(r.Context(), "run_token", key)
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
					writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "the run token is not valid; create a run with POST /v1/runs")
					return
				case errors.Is(rerr, engine.ErrTokenExpired):
					// Genuine but past its lifetime: not a guess, not counted.
					w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
					writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "the run token has expired; create a new run with POST /v1/runs")
					return
				}
				p.runToken = tok
			default:
				key := "addr:" + engine.Bucket(r.RemoteAddr)
				s.e.Identity().AuthFailed(r.Context(), "reviewer_token", key)
				writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "the reviewer token is not valid; log in again")
				return
			}
		} else if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			// A client certificate the listener verified against
			// listen.client_ca_file: the agent it names, if any.
			a, err := s.e.Identity().CertificateAgent(r.TLS.VerifiedChains[0][0])
			if err != nil {
				p.certRefused = err
			} else {
				p.agent = &a
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// tokensBlocked answers 429 and reports true when the wrong tokens from
// key's address have spent its budget.
func (s *server) tokensBlocked(w http.ResponseWriter, key string) bool {
	if !s.e.Identity().Blocked(key) {
		return false
	}
	w.Header().Set("Retry-After", "60")
	writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many invalid tokens from this address; wait a minute (a valid token is still let in)")
	return true
}

// invalidRunToken reports whether err (of Runs.ResolveToken) says the
// token belongs to no run (as opposed to a run that has ended, or a
// failure that is not the caller's).
func invalidRunToken(err error) bool {
	return errors.Is(err, engine.ErrMalformedToken) || errors.Is(err, engine.ErrWrongToken) || errors.Is(err, engine.ErrNotFound)
}

// runTokenLimitKey is the rate-limit key of run-token failures from r's
// address, on every HTTP route.
func runTokenLimitKey(r *http.Request) string { return "run-token:" + engine.Bucket(r.RemoteAddr) }

// guard lets a request through to a route when admit says its principal
// may call it; any other principal is answered as refuse says.
func guard(admit func(p *principal) bool, refuse func(p *principal) (status int, code, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := principalFrom(r.Context())
			if !admit(p) {
				status, code, msg := refuse(p)
				writeError(w, status, code, msg)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isAgent reports whether p holds an agent's credentials: it is on the
// local socket or holds a run token.
func (p *principal) isAgent() bool { return p.local || !p.runToken.IsZero() }

// unauthorized refuses with 401 and msg.
func unauthorized(msg string) func(*principal) (int, string, string) {
	return func(*principal) (int, string, string) { return http.StatusUnauthorized, api.CodeUnauthorized, msg }
}

var (
	// agentOnly lets through the local socket's callers and HTTP callers
	// with a run token; never reviewers (a reviewer is not an agent) or
	// anonymous callers.
	agentOnly = guard((*principal).isAgent,
		unauthorized("agents call over the local socket, or over HTTP with a run token from POST /v1/runs"))
	// agentOrReviewer lets through agents and reviewers.
	agentOrReviewer = guard(func(p *principal) bool { return p.isAgent() || p.isReviewer },
		unauthorized("credentials required"))
	// reviewerOnly refuses every agent credential: the local token and run
	// tokens never reach reviewer endpoints.
	reviewerOnly = guard(func(p *principal) bool { return p.isReviewer },
		func(p *principal) (int, string, string) {
			if p.isAgent() {
				return http.StatusForbidden, api.CodeForbidden, "agent credentials cannot reach reviewer endpoints; log in as a reviewer over HTTP"
			}
			return http.StatusUnauthorized, api.CodeUnauthorized, "reviewer credentials required: POST /v1/login"
		})
)

// uiGuard keeps agent credentials and API tokens away from the pages: the
// local socket (whatever token it carries), run tokens and any
// Authorization header are refused. The pages know reviewers only by the
// session cookie of a browser that logged in through them.
func uiGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		if p == nil || p.isAgent() || p.isReviewer || r.Header.Get("Authorization") != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintln(w, "The reviewer pages take no agent credentials and no bearer tokens: open them in a browser on the HTTP listener and log in.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(newPaced(w, writeTimeout)).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Err: api.ErrorBody{Code: code, Message: msg}})
}

// decodeJSON reads a JSON object body strictly: content type
// application/json, at most MaxBody bytes, exactly the field names of v's
// json tags (case-sensitive, each at most once), nothing after the object.
// It writes the error response itself and returns false on failure.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeJSONUpTo(w, r, v, MaxBody)
}

// decodeJSONUpTo is decodeJSON with a body of at most limit bytes.
func decodeJSONUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeUnsupportedType, "send the body as application/json")
		return false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("the body is over %d bytes", limit))
		} else {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "reading the body: "+err.Error())
		}
		return false
	}
	if err := api.CheckText(data); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return false
	}
	if err := checkKeys(data, jsonNames(v)); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	return true
}

// jsonNamesOf caches jsonNames per type: every request body is checked
// against its type's names, which do not change.
var jsonNamesOf sync.Map // reflect.Type → map[string]bool

// jsonNames returns the exact JSON field names of a struct pointer (not
// to be modified: the map is shared).
func jsonNames(v any) map[string]bool {
	t := reflect.TypeOf(v).Elem()
	if names, ok := jsonNamesOf.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	jsonNamesOf.Store(t, names)
	return names
}

// checkKeys walks a JSON object's top-level keys: Go's decoder would accept
// case variants and keep the last of duplicate keys, so that what a
// reviewer sees could differ from what is decoded.
func checkKeys(data []byte, allowed map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("the body must be a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %v", err)
		}
		key := tok.(string)
		if !allowed[key] {
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[key] {
			return fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("invalid JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func wantsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}
