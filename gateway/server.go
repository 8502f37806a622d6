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
	"github.com/airlockgw/airlock/sshexec"
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
			rules = append(rules, approvals.Rule{Target: t.Name, Account: a.Name, Mode: a.Approval})
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
	if _, err := s.record(ctx, "", "", gatewayStarted{PID: int64(os.Getpid()), Host: host, Version: Version}); err != nil {
		return fail(fmt.Errorf("gateway: audit log: %w", err))
	}
	if _, err := s.record(ctx, "", "", configLoaded{Path: cfg.Path, SHA256: cfg.Digest, Targets: int64(len(cfg.Targets))}); err != nil {
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
		if _, err := s.record(ctx, id, runID, actionFinished{
			Outcome:     sshexec.Interrupted,
			Detail:      "the gateway stopped while the action was in flight; the remote state is unknown",
			Termination: sshexec.Unconfirmed,
		}); err != nil {
			return fmt.Errorf("gateway: recovery of action %s: %w", id, err)
		}
		s.metrics.actions.WithLabelValues(sshexec.Interrupted.String()).Inc()
		s.log.Warn("action interrupted by a previous stop", "action", id)
	}
	return nil
}

// record appends one audit record durably and returns where it landed.
func (s *Server) record(ctx context.Context, actionID, runID string, rec record) (auditchain.Ref, error) {
	return s.recordKind(ctx, rec.kind(), actionID, runID, rec)
}

// recordKind appends a record whose kind is given: runEvent serves
// several.
func (s *Server) recordKind(ctx context.Context, kind auditchain.Kind, actionID, runID string, rec any) (auditchain.Ref, error) {
	f, err := auditchain.FieldsOf(rec)
	if err != nil {
		return auditchain.Ref{}, err
	}
	return s.audit.Append(ctx, auditchain.Entry{Kind: kind, ActionID: actionID, RunID: runID, Fields: f})
}

// recordApprovalEvent is the approvals store's EventSink: every run and
// approval state change becomes an audit entry before it takes effect.
func (s *Server) recordApprovalEvent(ctx context.Context, e approvals.Event) error {
	kind, err := auditchain.ParseKind(e.Kind.String())
	if err != nil {
		return err
	}
	rec := runEvent{RunState: e.Run.State, Requester: e.Run.Requester}
	if a := e.Run.Anchor; a != nil && e.Kind == approvals.EventRunCreated {
		rec.Anchor = &anchorFacts{PID: int64(a.ID.PID), StartTime: a.ID.StartTime, Exe: a.Exe, ExeSHA256: a.ExeSHA256,
			UID: int64(a.UID), Cwd: a.Cwd, Argv: quoteArgv(a.Argv)}
	}
	if !e.Run.ExpiresAt.IsZero() && e.Kind == approvals.EventRunApproved {
		n := int64(e.Run.MaxActions)
		rec.ExpiresAt, rec.MaxActions = e.Run.ExpiresAt, &n
	}
	if e.Kind == approvals.EventRunEnded {
		rec.EndReason = e.Run.EndReason
		if e.Run.EndedBy != "" {
			rec.EndedBy, rec.EndNote = e.Run.EndedBy, &e.Run.EndNote
		}
	}
	if r := e.Request; r != nil {
		rec.Request = &requestFacts{ID: r.ID, Kind: r.Kind, Status: r.Status, Target: r.Target, Account: r.Account,
			Command: r.Command, TimeoutS: int64(r.Timeout / time.Second), Digest: r.Digest}
		if r.DecidedBy != "" {
			rec.Request.DecidedBy, rec.Request.Reason = r.DecidedBy, &r.Reason
		}
	}
	_, err = s.recordKind(ctx, kind, "", string(e.Run.ID), rec)
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
		_, s.closeErr = s.record(ctx, "", "", gatewayStopped{PID: int64(os.Getpid())})
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
