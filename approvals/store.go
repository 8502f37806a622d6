package approvals

import (
	"cmp"
	"context"
	"database/sql"
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

// How long a timer-driven change may take to record, and how soon it is
// retried when the sink refuses it.
const (
	eventTimeout  = 10 * time.Second
	retryInterval = 5 * time.Second
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
	// pool is the state database; db is what the store reads and writes
	// through: pool, or on PostgreSQL, under lock, the connection that
	// holds the state lock.
	pool        *sqldb.DB
	db          handle
	accounts    *Accounts
	sink        EventSink
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
		return nil, errors.New("approvals: Options.Sink is required")
	}
	if err := o.Policy.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		opts: o,
		sink: o.Sink, policy: o.Policy, timeout: o.ApprovalTimeout, runTTL: o.RunTTL,
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
		return nil, errors.New("approvals: a negative cap on pending requests")
	}
	if s.runTTL == 0 {
		s.runTTL = DefaultRunTTL
	}
	if s.maxRunTTL == 0 {
		s.maxRunTTL = DefaultMaxRunTTL
	}
	if s.timeout < 0 || s.runTTL < 0 || s.maxRunTTL < 0 {
		return nil, fmt.Errorf("approvals: negative timeout or ttl in options: %w", ErrBadTTL)
	}
	if s.runTTL > s.maxRunTTL {
		return nil, fmt.Errorf("approvals: run_ttl %v over max_run_ttl %v: %w", s.runTTL, s.maxRunTTL, ErrTTLOverCap)
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

// lock takes the store's lock: s.mu, and on PostgreSQL the state lock
// that every replica's store takes, with s.db pinned to the connection
// that holds it. Store methods that read and then write hold it
// throughout, so no replica acts on state another is changing.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.pin(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// unlock releases what lock took.
func (s *Store) unlock() {
	s.unpin()
	s.mu.Unlock()
}

// stateLockKey is the advisory lock every replica's store takes.
var stateLockKey = sqldb.LockKey("state")

// lockWait bounds the wait for the state lock.
const lockWait = 30 * time.Second

// pin, on PostgreSQL, takes the state lock on a connection of its own
// and points s.db at it. Called with s.mu held.
func (s *Store) pin() error {
	if s.pool.Engine != sqldb.Postgres {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	c, err := s.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("approvals: state database: %w", err)
	}
	if _, err := c.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, stateLockKey); err != nil {
		c.Discard()
		return fmt.Errorf("approvals: state lock: %w", err)
	}
	s.db = c
	return nil
}

// unpin releases the state lock and its connection. Called with s.mu held.
func (s *Store) unpin() {
	c, ok := s.db.(*sqldb.Conn)
	if !ok {
		return
	}
	s.db = s.pool
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	var released bool
	if err := c.QueryRowContext(ctx, `SELECT pg_advisory_unlock(?)`, stateLockKey).Scan(&released); err != nil || !released {
		// The session is gone or unsure: ending it releases the lock.
		c.Discard()
		return
	}
	c.Close()
}

// commit writes runs and requests in one transaction, records events in
// order, and commits only if all were recorded. Called with s.mu held.
func (s *Store) commit(ctx context.Context, runs []*Run, reqs []*Request, events []Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("approvals: begin: %w", err)
	}
	defer tx.Rollback()
	for _, r := range runs {
		if err := upsertRun(ctx, tx, r); err != nil {
			return err
		}
	}
	erased := false
	for _, q := range reqs {
		if q.Status != StatusPending {
			q.Original = "" // erased with the row's copy below
			erased = erased || len(q.Redactions) > 0
		}
		if err := upsertRequest(ctx, tx, q, s.replica()); err != nil {
			return err
		}
		if q.Status != StatusPending && s.pool.Engine == sqldb.Postgres {
			if err := notifyDecided(ctx, tx, q); err != nil {
				return fmt.Errorf("approvals: notify: %w", err)
			}
		}
	}
	for _, e := range events {
		if err := s.sink.Record(ctx, e); err != nil {
			return &eventError{kind: e.Kind, err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("approvals: commit: %w", err)
	}
	if erased && s.pool.Engine == sqldb.SQLite {
		// (PostgreSQL keeps old row versions until VACUUM: docs/high-availability.md.)
		s.scrubWAL(ctx)
	}
	return nil
}

// scrubWAL empties the write-ahead log after an original command was
// erased: its old page images would hold it until overwritten. (The
// database file itself zeroes what is deleted: secure_delete.)
func (s *Store) scrubWAL(ctx context.Context) {
	var busy, frames, done int
	err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
	if err != nil || busy != 0 {
		s.log.Warn("the state database's write-ahead log could not be emptied after an original command was erased; it is, at the next checkpoint", "error", err)
	}
}

// schedule arranges for f to run (under s.mu) after d, replacing any timer
// of the same key. If f fails — the sink refused its event — it is retried.
// Called with s.mu held.
func (s *Store) schedule(key string, d time.Duration, f func(ctx context.Context) error) {
	if stop, ok := s.timers[key]; ok {
		stop()
	}
	s.timers[key] = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		delete(s.timers, key)
		if err := s.pin(); err != nil {
			s.log.Error("state change not recorded; will retry", "change", key, "error", err, "retry_in", retryInterval)
			s.schedule(key, retryInterval, f)
			return
		}
		defer s.unpin()
		ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			s.log.Error("state change not recorded; will retry", "change", key, "error", err, "retry_in", retryInterval)
			s.schedule(key, retryInterval, f)
			return
		}
		// The lifetime is over (or what it bounded already ended).
		delete(s.deadlines, key)
	})
}

func (s *Store) unschedule(key string) {
	if stop, ok := s.timers[key]; ok {
		stop()
		delete(s.timers, key)
	}
	delete(s.deadlines, key)
}

// arm schedules f for when the lifetime keyed key runs out: at the wall-
// clock deadline wall, and in elapsed time no later than life after now
// (life is the whole lifetime; zero: no such bound). The first arming in
// this process fixes the elapsed-time deadline; arming again (a run
// approved after its token was armed) keeps it. Called with s.mu held.
func (s *Store) arm(key string, wall time.Time, life time.Duration, f func(ctx context.Context) error) {
	now, el := s.clock.Now(), s.clock.Elapsed()
	at, ok := s.deadlines[key]
	if !ok {
		// After a restart only the wall-clock deadline is known. If the
		// clock was set back meanwhile, it lies further ahead than the
		// whole lifetime; never allow more than that.
		d := max(wall.Sub(now), 0)
		if life > 0 {
			d = min(d, life)
		}
		at = el + d
		s.deadlines[key] = at
	}
	s.schedule(key, at-el, f)
}

// due reports whether the lifetime keyed key has run out at now: its
// wall-clock deadline wall has passed, or its elapsed-time deadline has
// (the system clock may have been set back). Called with s.mu held.
func (s *Store) due(key string, wall, now time.Time) bool {
	if !now.Before(wall) {
		return true
	}
	at, ok := s.deadlines[key]
	return ok && s.clock.Elapsed() >= at
}

// recover runs at Open, with s.mu held.
func (s *Store) recover(ctx context.Context) error {
	now := s.clock.Now()
	// Nobody waits for a request a previous gateway raised. Replicas
	// sharing PostgreSQL expire only what no replica raised (older rows):
	// the requests of a replica that stopped are a survivor's to expire,
	// once its lease runs out.
	where := "status = ?"
	if s.pool.Engine == sqldb.Postgres {
		where += " AND replica IS NULL"
	}
	if err := s.expirePending(ctx, "gateway restarted", where, StatusPending.String()); err != nil {
		return fmt.Errorf("approvals: at start-up: %w", err)
	}
	runs, err := loadRuns(ctx, s.db, "state IN (?, ?) OR (anchor_pid IS NOT NULL AND anchor_gone = 0)",
		RunPending.String(), RunApproved.String())
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Local() && !r.anchorGone && s.mine(r) {
			if !s.alive(r.Anchor.ID) {
				if err := s.anchorExited(ctx, r); err != nil {
					return fmt.Errorf("approvals: end run %s at start-up: %w", r.ID, err)
				}
				continue
			}
			// A live anchor keeps even a denied or expired run, so that the
			// process stays refused rather than getting a fresh run.
			s.anchors[r.Anchor.ID] = anchorEntry{run: r.ID, explicit: r.Explicit}
			s.watch(r.Anchor.ID)
		}
		if r.State.Terminal() {
			continue
		}
		if err := s.expireIfDue(ctx, r, now); err != nil {
			if isRunStateErr(err) {
				continue
			}
			return fmt.Errorf("approvals: expire run %s at start-up: %w", r.ID, err)
		}
		s.scheduleRun(r)
	}
	return nil
}

// RecordQueued records the reviewer changes made offline (airlock
// reviewer add while no gateway ran here), in order. Open does it; on
// PostgreSQL each replica also does it from time to time, since another
// replica may be running all along. The state lock keeps two replicas
// from recording one change twice.
func (s *Store) RecordQueued(ctx context.Context) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	return s.accounts.recordQueued(ctx)
}

// mine reports whether local run r's anchor lives where this store can
// see it: always on SQLite (one gateway); on PostgreSQL when r was made
// in this store's process space (rows moved from SQLite, of no known
// host, are left to their TTL by a store that names its own).
func (s *Store) mine(r *Run) bool {
	return s.pool.Engine != sqldb.Postgres || r.host == s.opts.Host
}

// replica is this gateway's replica id ("" on SQLite).
func (s *Store) replica() string {
	if s.opts.Replica == nil {
		return ""
	}
	return s.opts.Replica()
}

// ExpireRequestsOf ends, as expired, the pending requests that agents of
// replica (a gateway replica taken for dead) waited for: nobody waits
// for them any more.
func (s *Store) ExpireRequestsOf(ctx context.Context, replica string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	return s.expirePending(ctx, "the gateway replica the agent waited through stopped", "status = ? AND replica = ?", StatusPending.String(), replica)
}

// expirePending ends the pending requests where says as expired, for
// reason. Called with the lock held.
func (s *Store) expirePending(ctx context.Context, reason, where string, args ...any) error {
	pending, err := loadRequests(ctx, s.db, where, args...)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, q := range pending {
		r, err := loadRun(ctx, s.db, q.RunID)
		if err != nil {
			return err
		}
		q.Status, q.DecidedAt, q.Reason = StatusExpired, now, reason
		ev := Event{Kind: EventApprovalDecided, Time: now, Run: *r, Request: q}
		if err := s.commit(ctx, nil, []*Request{q}, []Event{ev}); err != nil {
			return fmt.Errorf("approvals: expire request %s: %w", q.ID, err)
		}
	}
	return nil
}

// alive reports whether id is still running (same pid, same start time).
func (s *Store) alive(id ProcessID) bool {
	now, err := CurrentID(s.insp, id.PID)
	return err == nil && now == id
}

// CurrentID is which process pid is now: insp's IDReader when it has one,
// else its Stat.
func CurrentID(insp Inspector, pid int) (ProcessID, error) {
	if r, ok := insp.(IDReader); ok {
		return r.ID(pid)
	}
	st, err := insp.Stat(pid)
	return st.ID, err
}

// IDReader is an Inspector that can tell which process a pid is now more
// cheaply than Stat (ProcFS reads one file instead of three): the store
// checks that a run's anchor still runs with it. An Inspector that wraps
// another should pass it on.
type IDReader interface {
	ID(pid int) (ProcessID, error)
}

// watch starts the goroutine that ends id's run when id exits. Called with
// s.mu held and the store open.
func (s *Store) watch(id ProcessID) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.insp.Wait(s.ctx, id); err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("cannot watch anchor process; its run ends on its next use", "process", id, "error", err)
			}
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		e, ok := s.anchors[id]
		if !ok {
			return
		}
		delete(s.anchors, id)
		f := func(ctx context.Context) error {
			r, err := loadRun(ctx, s.db, e.run)
			if err != nil {
				return err
			}
			if r.anchorGone {
				return nil
			}
			return s.anchorExited(ctx, r)
		}
		if err := s.pin(); err != nil {
			s.log.Error("run end not recorded; will retry", "run", e.run, "error", err)
			s.schedule("anchor:"+string(e.run), retryInterval, f)
			return
		}
		defer s.unpin()
		ctx, cancel := context.WithTimeout(s.ctx, eventTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			s.log.Error("run end not recorded; will retry", "run", e.run, "error", err)
			s.schedule("anchor:"+string(e.run), retryInterval, f)
		}
	}()
}

// anchorExited records that r's anchor is gone, ending r if it was live.
func (s *Store) anchorExited(ctx context.Context, r *Run) error {
	if r.State.Terminal() {
		r = r.clone()
		r.anchorGone = true
		return s.commit(ctx, []*Run{r}, nil, nil)
	}
	return s.endRun(ctx, r, EndAnchorExited, "", "")
}

// endRun moves r to ended or expired for reason, withdrawing its pending
// requests at once: nothing is left to approve once the run is over (its
// anchor exited, it was closed or revoked, or ran out). Called with s.mu
// held; on error nothing changed.
func (s *Store) endRun(ctx context.Context, r *Run, reason EndReason, by, note string) error {
	now := s.clock.Now()
	r = r.clone()
	r.State, r.EndedAt, r.EndReason, r.EndedBy, r.EndNote = reason.state(), now, reason, by, note
	if reason == EndAnchorExited {
		r.anchorGone = true
	}
	var reqs []*Request
	var events []Event
	for _, w := range s.waits {
		if w.req.RunID != r.ID {
			continue
		}
		q := *w.req
		q.Status, q.DecidedAt, q.Reason = StatusWithdrawn, now, "withdrawn: the run "+r.State.String()+" ("+reason.String()+")"
		reqs = append(reqs, &q)
		events = append(events, Event{Kind: EventApprovalDecided, Time: now, Run: *r, Request: &q})
	}
	events = append(events, Event{Kind: EventRunEnded, Time: now, Run: *r})
	if err := s.commit(ctx, []*Run{r}, reqs, events); err != nil {
		return err
	}
	for _, q := range reqs {
		s.finish(q, StatusWithdrawn)
	}
	s.unschedule(runKey(r.ID))
	s.unschedule(tokenKey(r.ID))
	if reason == EndAnchorExited {
		delete(s.anchors, r.Anchor.ID)
	}
	return nil
}

// finish wakes the waiters of q after its final state was committed.
func (s *Store) finish(q *Request, st Status) {
	w, ok := s.waits[q.ID]
	if !ok {
		return
	}
	w.req, w.status = q, st
	close(w.done)
	delete(s.waits, q.ID)
	if s.runReq[q.RunID] == q.ID {
		delete(s.runReq, q.RunID)
	}
	s.unschedule(requestKey(q.ID))
}

// scheduleRun sets the timers that expire r: its approval's TTL and its
// token's expiry. Called with s.mu held.
func (s *Store) scheduleRun(r *Run) {
	id := r.ID
	expire := func(ctx context.Context) error { return s.expireByID(ctx, id) }
	if r.State == RunApproved && !r.ExpiresAt.IsZero() {
		s.arm(runKey(id), r.ExpiresAt, r.ExpiresAt.Sub(r.DecidedAt), expire)
	}
	if !r.State.Terminal() && !r.TokenExpiresAt.IsZero() {
		s.arm(tokenKey(id), r.TokenExpiresAt, r.TokenExpiresAt.Sub(r.CreatedAt), expire)
	}
}

// Timer and deadline keys.
func runKey(id RunID) string         { return "run:" + string(id) }
func tokenKey(id RunID) string       { return "token:" + string(id) }
func requestKey(id RequestID) string { return "req:" + string(id) }

func (s *Store) expireByID(ctx context.Context, id RunID) error {
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return err
	}
	if err := s.expireIfDue(ctx, r, s.clock.Now()); err != nil && !isRunStateErr(err) {
		return err
	}
	return nil
}

// expireIfDue ends r if its token or approval has expired at now, and
// returns the run-state error the caller should see (nil if r is usable).
func (s *Store) expireIfDue(ctx context.Context, r *Run, now time.Time) error {
	if r.State.Terminal() {
		return stateErr(r)
	}
	reason := EndReason(0)
	switch {
	case !r.TokenExpiresAt.IsZero() && s.due(tokenKey(r.ID), r.TokenExpiresAt, now):
		reason = EndTokenExpired
	case r.State == RunApproved && s.due(runKey(r.ID), r.ExpiresAt, now):
		reason = EndTTL
	default:
		return nil
	}
	if err := s.endRun(ctx, r, reason, "", ""); err != nil {
		return err
	}
	return ErrRunExpired
}

// stateErr is the error for an action in terminal run r.
func stateErr(r *Run) error {
	switch r.State {
	case RunDenied:
		return ErrRunDenied
	case RunEnded:
		return ErrRunEnded
	case RunExpired:
		return ErrRunExpired
	}
	return nil
}

func isRunStateErr(err error) bool {
	return errors.Is(err, ErrRunDenied) || errors.Is(err, ErrRunEnded) || errors.Is(err, ErrRunExpired)
}

// Run returns one run.
func (s *Store) Run(ctx context.Context, id RunID) (Run, error) {
	if err := s.lock(); err != nil {
		return Run{}, err
	}
	defer s.unlock()
	r, err := loadRun(ctx, s.db, id)
	if err != nil {
		return Run{}, err
	}
	return *r, nil
}

// RecentRuns returns the n runs created last, whatever their state,
// oldest first.
func (s *Store) RecentRuns(ctx context.Context, n int) ([]Run, error) {
	return s.runsWhere(ctx, "id IN (SELECT id FROM runs ORDER BY created_at DESC, id DESC LIMIT ?)", n)
}

// Runs returns the runs that are pending or approved, oldest first.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	return s.runsWhere(ctx, "state IN (?, ?)", RunPending.String(), RunApproved.String())
}

// runsWhere returns the runs where says, oldest first.
func (s *Store) runsWhere(ctx context.Context, where string, args ...any) ([]Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	rs, err := loadRuns(ctx, s.db, where, args...)
	if err != nil {
		return nil, err
	}
	out := make([]Run, len(rs))
	for i, r := range rs {
		out[i] = *r
	}
	return out, nil
}

// Request returns one approval request.
func (s *Store) Request(ctx context.Context, id RequestID) (Request, error) {
	if err := s.lock(); err != nil {
		return Request{}, err
	}
	defer s.unlock()
	q, err := loadRequest(ctx, s.db, id)
	if err != nil {
		return Request{}, err
	}
	return *q, nil
}

// PendingOriginal returns the command of a pending request whose stored
// command is redacted, for a reviewer who asks to see it (the caller
// records that). A request that has ended, or was not redacted, has none:
// ErrNoOriginal.
func (s *Store) PendingOriginal(ctx context.Context, id RequestID) (string, error) {
	if err := s.lock(); err != nil {
		return "", err
	}
	defer s.unlock()
	var orig sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT command_original FROM requests WHERE id = ? AND status = ?`, string(id), StatusPending.String()).Scan(&orig)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", ErrNoOriginal
	case err != nil:
		return "", fmt.Errorf("approvals: read request %s: %w", id, err)
	case !orig.Valid:
		return "", ErrNoOriginal
	}
	return orig.String, nil
}

// Pending returns the requests waiting for a reviewer, oldest first
// (`approvals list`).
func (s *Store) Pending(ctx context.Context) ([]Request, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	out := make([]Request, 0, len(s.waits))
	qs, err := loadRequests(ctx, s.db, "status = ?", StatusPending.String())
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	for _, q := range qs {
		if !s.due(requestKey(q.ID), q.ExpiresAt, now) { // one whose timer is about to fire is not shown
			out = append(out, *q)
		}
	}
	return out, nil
}
