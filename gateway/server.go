package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
)

// auditAppender is the part of *auditchain.Log the lifecycle writes to,
// declared here so tests can make appends fail.
type auditAppender interface {
	Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error)
}

// Options configure a Server.
type Options struct {
	// Config is the loaded configuration. Required.
	Config *Config
	// Logger receives the gateway's log; nil discards.
	Logger hclog.Logger
	// ShutdownGrace is how long in-flight actions may run on after Serve's
	// context ends before they are cancelled. Zero: 30 s.
	ShutdownGrace time.Duration
	// ProcessInspector reads processes for local runs; nil: /proc.
	ProcessInspector approvals.Inspector

	// auditWrap, when set, wraps the audit log (tests inject failures).
	auditWrap func(auditAppender) auditAppender
	// clock, when set, drives approval expiry and audit entry times
	// (tests set the clock back).
	clock approvals.Clock
	// notifyAttempt, when set, bounds one webhook delivery attempt instead
	// of notifyAttempt (tests make a stalled webhook stall for good).
	notifyAttempt time.Duration
}

// Server is a running gateway: its stores are open and recovery is done.
type Server struct {
	cfg     *Config
	log     hclog.Logger
	grace   time.Duration
	alog    *auditchain.Log
	audit   auditAppender
	outputs *auditchain.OutputStore
	store   *approvals.Store
	signers map[string]ssh.Signer
	// ca signs per-action certificates for ca = true credentials.
	ca            ssh.Signer
	notifyAttempt time.Duration
	slots         map[string]chan struct{}
	metrics       *metrics

	// base is cancelled when the gateway stops; in-flight actions derive
	// from it.
	base       context.Context
	cancelBase context.CancelFunc
	actionsWG  sync.WaitGroup
	draining   atomic.Bool

	mu      sync.Mutex
	actions map[string]*actionState
	recent  []string // action ids, oldest first, for eviction

	local   *localListener
	limiter *limiter
	links   loginLinks

	closeOnce sync.Once
	closeErr  error

	// uiOnce builds the reviewer pages (and their notifier) once.
	uiOnce sync.Once
	ui     http.Handler
	// background are goroutines that live as long as the server (the
	// notifier); Close waits for them before closing the stores they read.
	background sync.WaitGroup

	// ready is closed once Serve listens; httpAddr is its HTTP address.
	ready    chan struct{}
	httpAddr string
}

// New opens the state directory, the audit log, the output store and the
// state database, loads the credentials, finishes actions a previous run
// left in flight as interrupted, and records gateway.started and
// config.loaded. It refuses to start, with an error saying what to fix, on
// anything that would weaken the security posture.
func New(ctx context.Context, o Options) (*Server, error) {
	cfg := o.Config
	if cfg == nil {
		return nil, errors.New("gateway: no config")
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{
		cfg:     cfg,
		log:     log,
		grace:   o.ShutdownGrace,
		signers: map[string]ssh.Signer{},
		slots:   map[string]chan struct{}{},
		actions: map[string]*actionState{},
		metrics: newMetrics(),
		limiter: newLimiter(),
		ready:   make(chan struct{}),
	}
	if s.grace == 0 {
		s.grace = 30 * time.Second
	}
	s.notifyAttempt = cmp.Or(o.notifyAttempt, notifyAttempt)
	s.base, s.cancelBase = context.WithCancel(context.Background())

	if err := privateDir(cfg.StateDir, -1); err != nil {
		return nil, err
	}
	for _, c := range cfg.Credentials {
		if c.CA {
			if s.ca == nil {
				ca, err := LoadCA(cfg, c)
				if err != nil {
					return nil, err
				}
				s.ca = ca
			}
			continue
		}
		signer, err := LoadSigner(c)
		if err != nil {
			return nil, err
		}
		s.signers[c.Name] = signer
	}
	for _, t := range cfg.Targets {
		s.slots[t.Name] = make(chan struct{}, t.MaxParallel)
	}

	ao := auditchain.DefaultOptions(cfg.StateDir)
	ao.Logger = log.Named("audit")
	ao.CheckpointEvery = cfg.Audit.CheckpointEntries
	if ao.CheckpointEvery == 0 {
		ao.CheckpointEvery = -1
	}
	ao.CheckpointInterval = cfg.Audit.CheckpointInterval
	if ao.CheckpointInterval == 0 {
		ao.CheckpointInterval = -1
	}
	if cfg.Audit.WitnessCommand != "" {
		ao.WitnessCommand = []string{cfg.Audit.WitnessCommand}
	}
	if o.clock != nil {
		ao.Now = o.clock.Now
	}
	alog, err := auditchain.Open(ctx, ao)
	if err != nil {
		return nil, err
	}
	s.alog = alog
	s.audit = timedAppender{alog, s.metrics}
	if o.auditWrap != nil {
		s.audit = o.auditWrap(s.audit)
	}
	fail := func(err error) (*Server, error) {
		s.closeStores(context.Background())
		return nil, err
	}

	if s.outputs, err = auditchain.OpenOutputs(ctx, auditchain.OutputOptions{Path: filepath.Join(cfg.StateDir, "outputs.db")}); err != nil {
		return fail(err)
	}

	var rules []approvals.Rule
	for _, t := range cfg.Targets {
		for _, a := range t.Accounts {
			m, err := approvals.ParseMode(a.Approval)
			if err != nil {
				return fail(fmt.Errorf("gateway: target %q account %q: %w", t.Name, a.Name, err))
			}
			rules = append(rules, approvals.Rule{Target: t.Name, Account: a.Name, Mode: m})
		}
	}
	s.store, err = approvals.Open(ctx, approvals.Options{
		Path:            filepath.Join(cfg.StateDir, "state.db"),
		Sink:            approvals.EventSinkFunc(s.recordApprovalEvent),
		Policy:          approvals.Policy{Rules: rules},
		ApprovalTimeout: cfg.Approval.Timeout,
		RunTTL:          cfg.Approval.RunTTL,
		MaxRunTTL:       cfg.Approval.MaxRunTTL,
		Inspector:       o.ProcessInspector,
		Clock:           o.clock,
		Logger:          log.Named("approvals"),
	})
	if err != nil {
		return fail(err)
	}

	if err := s.recover(ctx); err != nil {
		return fail(err)
	}
	host, _ := os.Hostname()
	if err := s.record(ctx, auditchain.KindGatewayStarted, "", "",
		auditchain.Int("pid", int64(os.Getpid())), auditchain.Str("host", host), auditchain.Str("version", Version)); err != nil {
		return fail(fmt.Errorf("gateway: audit log: %w", err))
	}
	if err := s.record(ctx, auditchain.KindConfigLoaded, "", "",
		auditchain.Str("path", cfg.Path), auditchain.Str("sha256", cfg.Digest),
		auditchain.Int("targets", int64(len(cfg.Targets)))); err != nil {
		return fail(fmt.Errorf("gateway: audit log: %w", err))
	}
	log.Info("state opened", "state_dir", cfg.StateDir, "targets", len(cfg.Targets), "audit_origin", alog.Origin())
	return s, nil
}

// Version is the gateway's version, set by cmd/airlock.
var Version = "dev"

// recover finishes every action a previous gateway left between
// action.connecting and action.finished as interrupted: the gateway died
// and the remote state is unknown.
func (s *Server) recover(ctx context.Context) error {
	ids, err := s.alog.Dangling(ctx)
	if err != nil {
		return fmt.Errorf("gateway: recovery: %w", err)
	}
	for _, id := range ids {
		runID := ""
		if recs, err := s.alog.Reader().ActionEntries(ctx, id); err == nil && len(recs) > 0 {
			runID = recs[0].RunID
		}
		if err := s.record(ctx, auditchain.KindActionFinished, id, runID,
			auditchain.Str("outcome", "interrupted"),
			auditchain.Str("detail", "the gateway stopped while the action was in flight; the remote state is unknown"),
			auditchain.Str("termination", "unconfirmed")); err != nil {
			return fmt.Errorf("gateway: recovery of action %s: %w", id, err)
		}
		s.metrics.actions.WithLabelValues("interrupted").Inc()
		s.log.Warn("action interrupted by a previous stop", "action", id)
	}
	return nil
}

// record appends one audit entry durably.
func (s *Server) record(ctx context.Context, kind auditchain.Kind, actionID, runID string, fields ...auditchain.Field) error {
	_, err := s.recordRef(ctx, kind, actionID, runID, fields...)
	return err
}

// recordRef is record, returning where the entry landed.
func (s *Server) recordRef(ctx context.Context, kind auditchain.Kind, actionID, runID string, fields ...auditchain.Field) (auditchain.Ref, error) {
	return s.audit.Append(ctx, auditchain.Entry{Kind: kind, ActionID: actionID, RunID: runID, Fields: fields})
}

// recordApprovalEvent is the approvals store's EventSink: every run and
// approval state change becomes an audit entry before it takes effect.
func (s *Server) recordApprovalEvent(ctx context.Context, e approvals.Event) error {
	kind, err := auditchain.ParseKind(e.Kind.String())
	if err != nil {
		return err
	}
	f := []auditchain.Field{
		auditchain.Str("run_state", e.Run.State.String()),
		auditchain.Str("requester", e.Run.Requester),
	}
	if a := e.Run.Anchor; a != nil && e.Kind == approvals.EventRunCreated {
		f = append(f,
			auditchain.Int("anchor_pid", int64(a.ID.PID)),
			auditchain.Int("anchor_start_time", int64(a.ID.StartTime)),
			auditchain.Str("anchor_exe", a.Exe),
			auditchain.Str("anchor_exe_sha256", a.ExeSHA256),
			auditchain.Int("anchor_uid", int64(a.UID)),
			auditchain.Str("anchor_cwd", a.Cwd),
			auditchain.Str("anchor_argv", quoteArgv(a.Argv)))
	}
	if !e.Run.ExpiresAt.IsZero() && (e.Kind == approvals.EventRunApproved) {
		f = append(f, auditchain.Str("expires_at", e.Run.ExpiresAt.UTC().Format(time.RFC3339)),
			auditchain.Int("max_actions", int64(e.Run.MaxActions)))
	}
	if e.Kind == approvals.EventRunEnded {
		f = append(f, auditchain.Str("end_reason", e.Run.EndReason.String()))
		if e.Run.EndedBy != "" {
			f = append(f, auditchain.Str("ended_by", e.Run.EndedBy), auditchain.Str("end_note", e.Run.EndNote))
		}
	}
	if r := e.Request; r != nil {
		f = append(f,
			auditchain.Str("approval_id", string(r.ID)),
			auditchain.Str("approval_kind", r.Kind.String()),
			auditchain.Str("status", r.Status.String()),
			auditchain.Str("target", r.Target),
			auditchain.Str("account", r.Account),
			auditchain.Str("command", r.Command),
			auditchain.Int("timeout_s", int64(r.Timeout/time.Second)),
			auditchain.Str("digest", fmt.Sprintf("%x", r.Digest[:])))
		if r.DecidedBy != "" {
			f = append(f, auditchain.Str("decided_by", r.DecidedBy), auditchain.Str("reason", r.Reason))
		}
	}
	_, err = s.audit.Append(ctx, auditchain.Entry{Kind: kind, RunID: string(e.Run.ID), Fields: f})
	return err
}

// closeStores closes what New opened, the audit log last (it signs a final
// checkpoint).
func (s *Server) closeStores(ctx context.Context) {
	if s.store != nil {
		s.store.Close()
	}
	if s.outputs != nil {
		s.outputs.Close()
	}
	if s.alog != nil {
		if err := s.alog.Close(ctx); err != nil {
			s.log.Error("closing the audit log", "error", err)
		}
	}
}

// Close stops the gateway without waiting: in-flight actions are cancelled
// (and recorded), gateway.stopped is recorded, a final checkpoint signed.
// Serve calls it on the way out, also when it fails to start listening;
// call it directly only when Serve was never called. Calling it again does
// nothing.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		s.cancelBase()
		s.actionsWG.Wait()
		s.background.Wait()
		s.closeErr = s.record(ctx, auditchain.KindGatewayStopped, "", "", auditchain.Int("pid", int64(os.Getpid())))
		s.closeStores(ctx)
	})
	return s.closeErr
}

// timedAppender measures audit append latency.
type timedAppender struct {
	l *auditchain.Log
	m *metrics
}

func (t timedAppender) Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error) {
	start := time.Now()
	ref, err := t.l.Append(ctx, e)
	t.m.auditAppend.Observe(time.Since(start).Seconds())
	return ref, err
}
