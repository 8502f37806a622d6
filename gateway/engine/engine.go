package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec"
)

// Appender is the part of *auditchain.Log the engine writes to: declared
// here so that Options.WrapAudit can stand between them.
type Appender interface {
	Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error)
}

// Options configure an Engine.
type Options struct {
	// Config is the loaded configuration. Required.
	Config *config.Config
	// Logger receives the engine's log; nil discards.
	Logger hclog.Logger
	// Version is recorded in gateway.started.
	Version string
	// Clock stamps audit entries and action objects and drives every
	// expiry (approval requests, runs, tokens, login links); nil: the
	// system clock. Tests move it instead of sleeping.
	Clock Clock
	// WrapAudit, when set, wraps the audit log the engine appends to (tests
	// make appends fail, as a full disk does).
	WrapAudit func(Appender) Appender
	// Tracer, when set, receives one span per action with a child span
	// per phase (see phases); nil traces nothing.
	Tracer trace.Tracer
}

// core is what the engine holds, shared by its faces: the stores, the
// configuration in force, the actions in flight.
type core struct {
	// cur is the configuration in force and what the engine made of it;
	// a reload swaps it whole (Reload).
	cur     atomic.Pointer[loaded]
	log     hclog.Logger
	version string
	clock   approvals.Clock

	// pg is the PostgreSQL database of the storage block (nil: SQLite
	// files in the state directory), which this gateway shares with other
	// replicas as replica.
	pg      *sqldb.DB
	replica *replica
	// inflightCtx is cancelled when the gateway loses its database: the
	// actions in flight then end (a new one replaces it).
	inflightCtx atomic.Pointer[cancelCtx]
	alog        *auditchain.Log
	audit       Appender
	// commandKey makes the MACs of redacted commands.
	commandKey []byte
	outputs    *auditchain.OutputStore
	// spool holds transfer files: uploads, got files.
	spool *spool
	// spills holds output past the output store's cap (outspill.go).
	spills  *spillDir
	store   *approvals.Store
	metrics *metrics
	tracer  trace.Tracer // nil: tracing off
	limiter *limiter
	authLog authLog
	links   loginLinks
	// accountsChanged is closed (and replaced) at each reviewer account
	// change.
	accountsMu      sync.Mutex
	accountsChanged chan struct{}
	// reloadMu serialises reloads.
	reloadMu sync.Mutex

	// base is cancelled when the engine stops; in-flight actions derive
	// from it.
	base       context.Context
	cancelBase context.CancelFunc
	actionsWG  sync.WaitGroup
	draining   atomic.Bool
	// background are goroutines that live as long as the engine (late
	// outcome records, the notifier); Close waits for them before closing
	// the stores they use.
	background sync.WaitGroup

	// runEnds wakes watchRunEnds: a run ended.
	runEnds chan struct{}

	mu      sync.Mutex
	actions map[string]*Action
	recent  []string // action ids, oldest first, for eviction

	closeOnce sync.Once
	closeErr  error
}

// Open opens the state directory, the audit log, the output store and the
// state database, loads the credentials, finishes actions a previous run
// left in flight as interrupted, and records gateway.started and
// config.loaded. It refuses to start, with an error saying what to fix, on
// anything that would weaken the security posture.
func Open(ctx context.Context, o Options) (*Engine, error) {
	cfg := o.Config
	if cfg == nil {
		return nil, errors.New("no configuration was given")
	}
	e := &core{
		log:     cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger()),
		version: cmp.Or(o.Version, "dev"),
		clock:   cmp.Or[approvals.Clock](o.Clock, approvals.SystemClock{}),
		actions: map[string]*Action{},
		metrics: newMetrics(),
		tracer:  o.Tracer,
		limiter: newLimiter(o.Clock),

		accountsChanged: make(chan struct{}),
		runEnds:         make(chan struct{}, 1),
	}
	e.base, e.cancelBase = context.WithCancel(context.Background())
	e.inflightCtx.Store(newCancelCtx())

	// The state directory is the gateway's alone; when the socket its
	// group uses is inside it (the default layout), that group may pass
	// through it (0710), never list or read it.
	gid, err := SocketGroupID(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if gid >= 0 && socketUnderStateDir(cfg) {
		err = securefile.PassageDir(cfg.StateDir, gid)
	} else {
		err = securefile.PrivateDir(cfg.StateDir, -1)
	}
	if err != nil {
		return nil, err
	}
	l, err := e.load(cfg, nil)
	if err != nil {
		return nil, err
	}
	e.cur.Store(l)
	// fail closes whatever of the stores Open opened so far.
	fail := func(err error) (*Engine, error) {
		e.closeStores(context.Background())
		return nil, err
	}
	if e.pg, err = OpenStorage(ctx, cfg); err != nil {
		return nil, err
	}
	if e.pg != nil {
		if e.replica, err = joinReplicas(ctx, e, e.pg, cfg.Storage.Lease); err != nil {
			return fail(err)
		}
		// Before any key is read or made: this replica's keys are the
		// shared ones, or it does not start.
		if err := claimSharedKeys(ctx, e.pg, cfg.StateDir, usesGatewayCA(cfg)); err != nil {
			return fail(err)
		}
	}
	if e.commandKey, err = redact.LoadOrCreateKey(filepath.Join(cfg.StateDir, redact.KeyFile)); err != nil {
		return fail(err)
	}
	alog, err := auditchain.Open(ctx, e.auditOptions(cfg))
	if err != nil {
		return fail(err)
	}
	if e.pg != nil {
		// The log made or checked its checkpoint key: record it with the
		// others, for airlock storage status and the next replicas.
		if _, err := RecordKeys(ctx, e.pg, cfg.StateDir); err != nil {
			alog.Close(ctx)
			return fail(err)
		}
	}
	e.alog = alog
	e.audit = timedAppender{alog, e.metrics, e.clock}
	if o.WrapAudit != nil {
		e.audit = o.WrapAudit(e.audit)
	}

	if e.outputs, err = auditchain.OpenOutputs(ctx, auditchain.OutputOptions{Path: filepath.Join(cfg.StateDir, "outputs.db"), DB: e.pg}); err != nil {
		return fail(err)
	}
	if e.spool, err = openSpool(cfg.StateDir, e.clock); err != nil {
		return fail(err)
	}
	if e.spills, err = openSpillDir(cfg.StateDir, e.clock); err != nil {
		return fail(err)
	}

	e.store, err = e.openApprovals(ctx, cfg)
	if err != nil {
		return fail(err)
	}

	if err := e.recover(ctx); err != nil {
		return fail(err)
	}
	host, _ := os.Hostname()
	if _, err := e.record(ctx, "", "", gatewayStarted{PID: int64(os.Getpid()), Host: host, Version: e.version}); err != nil {
		return fail(fmt.Errorf("recording the gateway's start: %w", err))
	}
	if _, err := e.record(ctx, "", "", configLoaded{Path: cfg.Path, SHA256: cfg.Digest, Targets: int64(len(cfg.Targets))}); err != nil {
		return fail(fmt.Errorf("recording the configuration loaded: %w", err))
	}
	if e.replica != nil {
		e.replica.run()
	}
	e.background.Go(e.watchRunEnds)
	e.log.Info("state opened", "state_dir", cfg.StateDir, "targets", len(cfg.Targets), "audit_origin", alog.Origin())
	return newEngine(e), nil
}

// auditOptions are the options of the audit log of cfg.
func (e *core) auditOptions(cfg *config.Config) auditchain.Options {
	ao := auditchain.DefaultOptions(cfg.StateDir)
	ao.DB = e.pg
	if cfg.Storage != nil {
		// A replica that cannot write for half its lease stops anyway.
		ao.WriteTimeout = max(cfg.Storage.Lease/2, time.Second)
	}
	ao.Logger = e.log.Named("audit")
	ao.CheckpointEvery = cfg.Audit.CheckpointEntries
	if ao.CheckpointEvery == 0 {
		ao.CheckpointEvery = -1
	}
	ao.CheckpointInterval = cfg.Audit.CheckpointInterval
	if ao.CheckpointInterval == 0 {
		ao.CheckpointInterval = -1
	}
	ao.WitnessCommand = cfg.Audit.WitnessCommand
	ao.OnWitness = e.metrics.witnessRun
	ao.Now = e.clock.Now
	ao.OnCommit = func(n int, took time.Duration) {
		e.metrics.auditCommit.Observe(took.Seconds())
		e.metrics.auditBatch.Observe(float64(n))
	}
	return ao
}

// openApprovals opens the approvals state of cfg, reading local runs'
// processes from /proc.
func (e *core) openApprovals(ctx context.Context, cfg *config.Config) (*approvals.Store, error) {
	return approvals.Open(ctx, approvals.Options{
		Path:                   filepath.Join(cfg.StateDir, "state.db"),
		DB:                     e.pg,
		Replica:                e.replicaID,
		Host:                   processSpace(),
		Sink:                   approvals.EventSinkFunc(e.recordApprovalEvent),
		Policy:                 approvalPolicy(cfg),
		ApprovalTimeout:        cfg.Approval.Timeout,
		RunTTL:                 cfg.Approval.RunTTL,
		MaxRunTTL:              cfg.Approval.MaxRunTTL,
		MaxPendingPerRun:       cfg.Approval.MaxPendingPerRun,
		MaxPendingPerRequester: cfg.Approval.MaxPendingPerRequester,
		Links:                  cfg.ReviewerLinks,
		Inspector:              redactingInspector{Inspector: &approvals.ProcFS{}, redactor: func() *redact.Redactor { return e.conf().redactor }},
		Clock:                  e.clock,
		Logger:                 e.log.Named("approvals"),
	})
}

// Config is the configuration in force.
func (e *Engine) Config() *config.Config { return e.conf().cfg }

// conf is the configuration in force and what the engine made of it.
func (e *core) conf() *loaded { return e.cur.Load() }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// recover finishes every action a previous gateway left between
// action.connecting and action.finished as interrupted: the gateway died
// and the remote state is unknown. On PostgreSQL only those no replica
// holds are: a live replica's are its own, a dead one's a survivor's
// once its lease runs out.
func (e *core) recover(ctx context.Context) error {
	ids, err := e.alog.Dangling(ctx)
	if err != nil {
		return fmt.Errorf("recovering the actions left unfinished: %w", err)
	}
	for _, id := range ids {
		if held, err := e.replica.holds(ctx, id); err != nil {
			return fmt.Errorf("recovering the actions left unfinished: %w", err)
		} else if held {
			continue
		}
		runID := ""
		if recs, err := e.alog.Reader().ActionEntries(ctx, id); err == nil && len(recs) > 0 {
			runID = recs[0].RunID
		}
		if _, err := e.record(ctx, id, runID, actionFinished{
			Outcome:     sshexec.Interrupted,
			Detail:      "the gateway stopped while the action was in flight; the remote state is unknown",
			Termination: sshexec.Unconfirmed,
		}); errors.Is(err, auditchain.ErrAlreadyFinished) {
			continue // finished meanwhile
		} else if err != nil {
			return fmt.Errorf("recovering the unfinished action %s: %w", id, err)
		}
		e.metrics.actions.WithLabelValues(sshexec.Interrupted.String()).Inc()
		e.log.Warn("action interrupted by a previous stop", "action", id)
	}
	return nil
}

// Go runs f in a goroutine the engine owns: f's context ends when the
// engine stops, and Close waits for f to return before closing the stores.
func (e *Engine) Go(f func(ctx context.Context)) {
	e.background.Go(func() { f(e.base) })
}

// Drain stops the engine taking new actions; those in flight go on.
func (e *Engine) Drain() { e.draining.Store(true) }

// Idle returns a channel closed once no action is in flight (call Drain
// first, or new ones may start).
func (e *Engine) Idle() <-chan struct{} {
	done := make(chan struct{})
	go func() { e.actionsWG.Wait(); close(done) }()
	return done
}

// Cancel stops the engine taking new actions, cancels those in flight and
// waits until each has its outcome recorded.
func (e *Engine) Cancel() {
	e.draining.Store(true)
	e.cancelBase()
	e.actionsWG.Wait()
}

// Close stops the engine without waiting: in-flight actions are cancelled
// (and recorded), gateway.stopped is recorded, a final checkpoint signed.
// Calling it again does nothing.
func (e *Engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.Cancel()
		e.background.Wait()
		_, e.closeErr = e.record(ctx, "", "", gatewayStopped{PID: int64(os.Getpid())})
		e.closeStores(ctx)
	})
	return e.closeErr
}

// closeStores closes what Open opened, the audit log last (it signs a
// final checkpoint).
func (e *core) closeStores(ctx context.Context) {
	// First, as its sweeps use the stores.
	e.replica.leave()
	if e.store != nil {
		e.store.Close()
	}
	if e.outputs != nil {
		e.outputs.Close()
	}
	if e.spills != nil {
		e.spills.close()
	}
	if e.alog != nil {
		if err := e.alog.Close(ctx); err != nil {
			e.log.Error("closing the audit log", "error", err)
		}
	}
	if e.pg != nil {
		e.pg.Close()
	}
}

// timedAppender measures audit append latency.
type timedAppender struct {
	l     *auditchain.Log
	m     *metrics
	clock approvals.Clock
}

func (t timedAppender) Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error) {
	start := t.clock.Elapsed()
	ref, err := t.l.Append(ctx, e)
	t.m.auditAppend.Observe((t.clock.Elapsed() - start).Seconds())
	return ref, err
}

// approvalPolicy is cfg's approval policy: each account's mode and grant
// bound.
func approvalPolicy(cfg *config.Config) approvals.Policy {
	var rules []approvals.Rule
	for _, t := range cfg.Targets {
		for _, a := range t.Accounts {
			rules = append(rules, approvals.Rule{Target: t.Name, Account: a.Name, Mode: a.Approval, MaxGrant: a.MaxGrant})
		}
	}
	return approvals.Policy{Rules: rules}
}
