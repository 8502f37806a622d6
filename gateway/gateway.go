package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/httpapi"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/gateway/notify"
	"github.com/airlockgw/airlock/gateway/web"
)

// Version is the gateway's version, set by cmd/airlock.
var Version = "dev"

// Options configure a Server.
type Options struct {
	// Config is the loaded configuration. Required.
	Config *config.Config
	// Logger receives the gateway's log; nil discards.
	Logger hclog.Logger
	// ShutdownGrace is how long in-flight actions may run on after Serve's
	// context ends before they are cancelled. Zero: 30 s.
	ShutdownGrace time.Duration

	// auditWrap, when set, wraps the audit log (tests inject failures).
	auditWrap func(engine.Appender) engine.Appender
	// clock, when set, stamps and expires everything (tests move it).
	clock engine.Clock
	// notifyAttempt, when set, bounds one webhook delivery attempt
	// (tests make a stalled webhook stall for good).
	notifyAttempt time.Duration
	// heartbeat, when set, is the event streams' heartbeat interval
	// (tests shorten it).
	heartbeat time.Duration
}

// Server is a gateway: the engine with its stores open, and the front ends
// it serves on the local socket and the HTTP listener.
type Server struct {
	cfg   *config.Config
	log   hclog.Logger
	grace time.Duration
	eng   *engine.Engine
	// handler serves the API, MCP and the pages on both listeners.
	handler http.Handler
	local   *localListener
	// tracing sends the engine's spans; nil when off.
	tracing *tracing

	// ready is closed once Serve listens; httpAddr is its HTTP address.
	ready     chan struct{}
	readyOnce sync.Once
	httpAddr  string
}

// New opens the engine (state directory, audit log, output store, state
// database, credentials; recovery of actions a previous run left in
// flight) and builds the front ends over it. It refuses to start, with an
// error saying what to fix, on anything that would weaken the security
// posture.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Config == nil {
		return nil, errors.New("no config")
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	tr, err := newTracing(o.Config.Telemetry, log)
	if err != nil {
		return nil, err
	}
	eng, err := engine.Open(ctx, engine.Options{
		Config: o.Config, Logger: log, Version: Version,
		Clock: o.clock, WrapAudit: o.auditWrap, Tracer: tr.tracer(),
	})
	if err != nil {
		tr.shutdown(ctx)
		return nil, err
	}
	s := &Server{cfg: o.Config, log: log, grace: o.ShutdownGrace, eng: eng, tracing: tr, ready: make(chan struct{})}
	if s.grace == 0 {
		s.grace = 30 * time.Second
	}
	s.local = &localListener{s: s}
	backend := web.NewEngineBackend(eng.Review(), eng.Runs(), eng.Audit())
	pages := web.New(backend, web.Options{MaxAge: engine.LoginTTL, Now: eng.Now, Logger: log.Named("ui"), SSO: backend.SSO})
	s.handler = httpapi.New(httpapi.Options{Engine: eng, Local: s.local, UI: pages, MCP: mcpSessions(eng, o.Config, log), Logger: log, Heartbeat: o.heartbeat, UIBase: s.uiBase})
	if o.Config.Notify != nil {
		notify.Start(eng, notify.Options{Config: o.Config.Notify, Base: s.uiBase, Ready: s.ready,
			Version: Version, Attempt: o.notifyAttempt, Logger: log.Named("notify")})
	}
	return s, nil
}

// mcpSessions builds the MCP server of each session the API opens at /mcp:
// the tools over the engine's actions, for that session's caller. The
// front ends know nothing of each other; this wiring joins them.
func mcpSessions(eng *engine.Engine, cfg *config.Config, log hclog.Logger) func(engine.Caller) *sdk.Server {
	opts := mcp.Options{Version: Version, Logger: log.Named("mcp"),
		OutputBudget: cfg.MCP.OutputBudget, ApprovalTimeout: cfg.Approval.Timeout, MaxWait: cfg.MCP.MaxWait}
	return func(c engine.Caller) *sdk.Server {
		return mcp.NewServer(mcp.NewEngineBackend(eng.Actions(), c), opts)
	}
}

// Close stops the gateway without waiting: in-flight actions are cancelled
// (and recorded), gateway.stopped is recorded, a final checkpoint signed.
// Serve calls it on the way out, also when it fails to start listening;
// call it directly only when Serve was never called. Calling it again does
// nothing.
func (s *Server) Close(ctx context.Context) error {
	err := s.eng.Close(ctx)
	// The last actions' spans, within a bound: a collector that is down
	// must not hold the gateway's stop.
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if terr := s.tracing.shutdown(tctx); terr != nil {
		s.log.Warn("sending the last traces", "error", terr)
	}
	return err
}

// Reload reads the configuration file again and puts it in force (what
// SIGHUP does): see engine.Reload. On any error the configuration in
// force stays.
func (s *Server) Reload(ctx context.Context) error {
	_, err := s.eng.Admin().ReloadFile(ctx)
	return err
}

// Ready is closed when Serve is listening.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// HTTPAddr is the HTTP listener's address once Ready is closed ("" when
// there is none).
func (s *Server) HTTPAddr() string { return s.httpAddr }

// LoginLink makes a one-time link to the reviewer pages that logs the
// reviewer in without a password, working once for engine.LoginLinkTTL,
// recorded in the audit log as asked for by by. It is for `airlock demo`;
// an operator asks the running gateway for one (airlock reviewer link).
// Anyone holding the link can use it once, so give it only to that
// person.
func (s *Server) LoginLink(ctx context.Context, reviewer, by string) (string, error) {
	base := s.uiBase()
	if base == "" {
		return "", errors.New("no HTTP listener for the reviewer pages: set listen.http")
	}
	l, err := s.eng.Admin().NewLoginLink(ctx, reviewer, by)
	if err != nil {
		return "", err
	}
	return api.LoginLinkURL(base, l.Token.Reveal()), nil
}
