package approvals

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/hashicorp/go-hclog"
)

// Defaults of Options, as in the contract's approval block.
const (
	DefaultApprovalTimeout = 120 * time.Second
	DefaultRunTTL          = time.Hour
	DefaultMaxRunTTL       = 8 * time.Hour
)

// Options configure a Store. Path and Sink are required.
type Options struct {
	// Path is the state database file (state.db in the state directory).
	Path string
	// DB, instead of Path, is a PostgreSQL database shared by the
	// gateway's replicas; the caller closes it after the Store.
	DB *sqldb.DB
	// Host names the process space this store's Inspector sees (a host,
	// or a container's pid namespace on it), with DB: the anchors of
	// local runs made by a replica elsewhere are not looked for here,
	// where their pids mean nothing.
	Host string
	// Replica names this gateway among the replicas sharing DB (it may
	// change: a replica taken for dead joins again). The requests an
	// agent of this replica waits for carry it: when the replica dies, a
	// survivor expires them (ExpireRequestsOf). nil: they carry none, and
	// the next Open expires them, as on SQLite.
	Replica func() string
	// Sink receives every state change; see EventSink for the failure rule.
	Sink EventSink
	// Policy gives the mode of each target account.
	Policy Policy
	// ApprovalTimeout is how long a request waits for a decision
	// (approval.timeout; zero means DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// RunTTL is the default TTL of a run approval and of a remote run's
	// token (approval.run_ttl; zero means DefaultRunTTL).
	RunTTL time.Duration
	// MaxRunTTL caps every TTL (approval.max_run_ttl; zero means
	// DefaultMaxRunTTL).
	MaxRunTTL time.Duration
	// MaxPendingPerRun and MaxPendingPerRequester cap the requests waiting
	// for a decision at once, of one run and of one requester (all its
	// runs); a request past either is refused with a *PendingLimitError.
	// Zero means DefaultMaxPendingPerRun, DefaultMaxPendingPerRequester.
	MaxPendingPerRun       int
	MaxPendingPerRequester int
	// Transparent lists executable names that never anchor a run; nil means
	// DefaultTransparent.
	Transparent []string
	// Links are, per reviewer name, the identities linked to that
	// reviewer: Unix user names, and agents as "agent:NAME/" (every token
	// of that agent). A reviewer never decides a request whose requester
	// is one of them, as if it were the reviewer's own name.
	Links map[string][]string
	// Inspector reads processes; nil means &ProcFS{}.
	Inspector Inspector
	// Clock drives expiry; nil means SystemClock{}.
	Clock Clock
	// Logger gets what cannot be returned (a timer's event that failed to
	// record); nil discards.
	Logger hclog.Logger
	// Argon2 are the parameters for new reviewer password hashes; the zero
	// value means DefaultArgon2.
	Argon2 Argon2Params
}

// Store holds runs, approval requests and decisions, and reviewer accounts.
// All methods are safe for concurrent use.
type Store struct {
	opts Options
	// stateDB is what the store reads and writes through (s.db) and
	// commits with (s.commit).
	stateDB
	accounts    *Accounts
	policy      Policy
	timeout     time.Duration
	runTTL      time.Duration
	maxRunTTL   time.Duration
	maxPending  [2]int // per run, per requester
	transparent map[string]bool
	// links are Options.Links by lower-case reviewer name.
	links map[string][]string
	insp  Inspector
	clock Clock
	log   hclog.Logger

	ctx    context.Context // cancelled by Close: stops watchers
	cancel context.CancelFunc
	wg     sync.WaitGroup // anchor watchers

	mu      sync.Mutex
	closed  bool
	waits   map[RequestID]*waitSet
	runReq  map[RunID]RequestID // the pending run request of a run
	anchors map[ProcessID]anchorEntry
	timers  map[string]func() bool
	// deadlines are the monotonic (Clock.Elapsed) deadlines of live
	// requests, approvals and tokens, by timer key. They exist only in
	// memory; at start-up they are derived from the stored wall-clock ones.
	deadlines map[string]time.Duration
}

type anchorEntry struct {
	run      RunID
	explicit bool
	uid      int // the anchor's effective uid
}

// waitSet is a pending request and everyone waiting for it. done is closed
// once, under Store.mu, after the outcome fields are set.
type waitSet struct {
	req    *Request
	done   chan struct{}
	status Status
	// waiters counts the actions waiting on req: when the last one goes
	// away, the request is withdrawn.
	waiters int
}

// Open opens the state database and recovers: pending requests are ended
// as expired, runs whose anchor is gone are ended, expired approvals and
// tokens are ended, and live anchors are watched again. Each of these is
// recorded through Sink; if one cannot be, Open fails.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Sink == nil {
		return nil, errors.New("Options.Sink is required")
	}
	if err := o.Policy.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		opts:    o,
		stateDB: stateDB{sink: o.Sink, replica: o.Replica}, policy: o.Policy, timeout: o.ApprovalTimeout, runTTL: o.RunTTL,
		maxRunTTL: o.MaxRunTTL, insp: o.Inspector, clock: o.Clock, log: o.Logger,
		transparent: make(map[string]bool),
		waits:       make(map[RequestID]*waitSet), runReq: make(map[RunID]RequestID),
		anchors: make(map[ProcessID]anchorEntry), timers: make(map[string]func() bool),
		deadlines: make(map[string]time.Duration),
	}
	if s.timeout == 0 {
		s.timeout = DefaultApprovalTimeout
	}
	s.SetLinks(o.Links)
	s.maxPending = [2]int{cmp.Or(o.MaxPendingPerRun, DefaultMaxPendingPerRun), cmp.Or(o.MaxPendingPerRequester, DefaultMaxPendingPerRequester)}
	if s.maxPending[0] < 0 || s.maxPending[1] < 0 {
		return nil, errors.New("a negative cap on pending requests")
	}
	if s.runTTL == 0 {
		s.runTTL = DefaultRunTTL
	}
	if s.maxRunTTL == 0 {
		s.maxRunTTL = DefaultMaxRunTTL
	}
	if s.timeout < 0 || s.runTTL < 0 || s.maxRunTTL < 0 {
		return nil, fmt.Errorf("negative timeout or ttl in options: %w", ErrBadTTL)
	}
	if s.runTTL > s.maxRunTTL {
		return nil, fmt.Errorf("run_ttl %v over max_run_ttl %v: %w", s.runTTL, s.maxRunTTL, ErrTTLOverCap)
	}
	transparent := o.Transparent
	if transparent == nil {
		transparent = DefaultTransparent
	}
	for _, n := range transparent {
		s.transparent[n] = true
	}
	if s.insp == nil {
		s.insp = &ProcFS{}
	}
	if s.clock == nil {
		s.clock = SystemClock{}
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	s.log = s.log.Named("approvals")
	s.logger = s.log
	var db *sqldb.DB
	var err error
	if o.DB != nil {
		db, err = o.DB, migratePG(ctx, o.DB)
	} else {
		db, err = openDB(ctx, o.Path)
	}
	if err != nil {
		return nil, err
	}
	s.pool, s.db = db, db
	s.accounts = newAccounts(db, o.Argon2, s.clock, false)
	s.accounts.sink = o.Sink
	if err := s.accounts.armTokens(ctx); err != nil {
		if o.DB == nil {
			db.Close()
		}
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err = s.lock(); err == nil {
		err = s.recover(ctx)
		s.unlock()
	}
	if err == nil {
		err = s.RecordQueued(ctx)
	}
	if err == nil {
		err = s.pruneQuota(ctx)
	}
	if err == nil {
		err = s.armGrants(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if db.Engine == sqldb.Postgres {
		s.watchDecisions()
	}
	return s, nil
}

// Close stops timers and anchor watchers, wakes every waiter (their
// Authorize returns ErrClosed), and closes the database. Requests still
// pending stay pending in the database and are expired at the next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, stop := range s.timers {
		stop()
	}
	for id, w := range s.waits {
		close(w.done)
		delete(s.waits, id)
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if s.pool == s.opts.DB {
		return nil // the caller's
	}
	return s.pool.Close()
}

// SetLinks replaces the identities linked to each reviewer (Options.Links),
// as a reloaded configuration says; decisions from now on use them.
func (s *Store) SetLinks(links map[string][]string) {
	m := make(map[string][]string, len(links))
	for name, ids := range links {
		key := strings.ToLower(strings.TrimSpace(name))
		m[key] = append(m[key], ids...)
	}
	s.mu.Lock()
	s.links = m
	s.mu.Unlock()
}

// Accounts returns the reviewer accounts kept in the store's database.
func (s *Store) Accounts() *Accounts { return s.accounts }

// SetPolicy replaces the policy (a configuration reload): the actions
// that ask from now on get the new modes and grant bounds; a decision
// already given stays as it was.
func (s *Store) SetPolicy(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.policy = p
	s.mu.Unlock()
	return nil
}

// mine reports whether local run r's anchor lives where this store can
// see it: always on SQLite (one gateway); on PostgreSQL when r was made
// in this store's process space (rows moved from SQLite, of no known
// host, are left to their TTL by a store that names its own).
func (s *Store) mine(r *Run) bool {
	return s.pool.Engine != sqldb.Postgres || r.host == s.opts.Host
}
