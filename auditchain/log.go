package auditchain

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/hashicorp/go-hclog"
	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Defaults for Options fields left zero.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = 30 * time.Second
	DefaultWitnessTimeout     = 10 * time.Second
	DefaultWriteTimeout       = 10 * time.Second
	maxBatch                  = 1024
)

// Options configure a Log. Paths must be set; everything else has a
// useful zero value.
type Options struct {
	// Path is the SQLite database file (audit.db). It is created with
	// mode 0600 when missing.
	Path string

	// DB, when set, is a PostgreSQL database that holds the log instead
	// of Path, shared by every gateway replica: their appends fall into
	// one order. The caller closes it after the Log. The first replica to
	// open it creates the tables and records its verifier key; the others
	// must have the same signing key at KeyPath.
	DB *sqldb.DB

	// KeyPath is the checkpoint signing key (keys/checkpoint.key). It is
	// generated on first use, mode 0600, in a directory created 0700.
	// Open refuses a key readable or writable by group or others, or owned
	// by another user (*securefile.Error).
	KeyPath string

	// VerifierKeyPath is where the public verifier key is written
	// (keys/checkpoint.vkey). Empty: KeyPath with ".key" replaced by ".vkey".
	VerifierKeyPath string

	// CheckpointLogPath is the file outside the database to which every
	// signed checkpoint is appended (checkpoints.log). Empty: none.
	CheckpointLogPath string

	// Origin names the log in checkpoints and is the signing key's name.
	// It is fixed when the database is created. Empty: "airlock/", the
	// host name, "/" and ten random base32 characters.
	Origin string

	// CheckpointEvery signs a checkpoint once this many entries were
	// appended since the last one. Zero: DefaultCheckpointEvery; negative:
	// never by count.
	CheckpointEvery int

	// CheckpointInterval signs a checkpoint this often when entries were
	// appended since the last one. Zero: DefaultCheckpointInterval;
	// negative: never by time.
	CheckpointInterval time.Duration

	// WitnessCommand, when set, is run (argv, no shell) with each signed
	// checkpoint note on stdin. Failures are logged and never block appends.
	WitnessCommand []string

	// WitnessTimeout bounds one witness run. Zero: DefaultWitnessTimeout.
	WitnessTimeout time.Duration

	// OnWitness, when set, is called after each witness run with its
	// error (nil: the witness accepted the note), so that a failing
	// witness shows where an operator looks (a metric), not only in the
	// log. It runs on the witness goroutine and must not block.
	OnWitness func(err error)

	// Logger receives operational messages. Nil: no logging.
	Logger hclog.Logger

	// OnCommit, when set, is called by the writer after each committed
	// batch with how many entries it held and how long its transaction
	// took (from begin to the durable commit): what an append costs apart
	// from waiting for the writer. It must return quickly.
	OnCommit func(entries int, took time.Duration)

	// WriteTimeout bounds each write transaction on PostgreSQL (DB): a
	// database that stops answering (a network cut) fails appends after
	// it instead of holding them. Zero: DefaultWriteTimeout.
	WriteTimeout time.Duration

	// Now is the clock for entry times. Nil: time.Now. The checkpoint
	// interval is measured in elapsed time (Go's monotonic clock), not on
	// this clock, so setting the system clock back does not hold
	// checkpoints off.
	Now func() time.Time
}

// DefaultOptions returns Options for the contract's state directory layout:
// audit.db, keys/checkpoint.key, keys/checkpoint.vkey and checkpoints.log.
func DefaultOptions(stateDir string) Options {
	return Options{
		Path:              filepath.Join(stateDir, "audit.db"),
		KeyPath:           filepath.Join(stateDir, "keys", "checkpoint.key"),
		VerifierKeyPath:   filepath.Join(stateDir, "keys", "checkpoint.vkey"),
		CheckpointLogPath: filepath.Join(stateDir, "checkpoints.log"),
	}
}

// A Ref identifies a durable entry.
type Ref struct {
	Seq      int64
	Time     time.Time
	LeafHash tlog.Hash // RFC 6962 leaf hash, tlog.RecordHash(leaf)
	Chain    [32]byte  // chain_seq
}

// A Log is an open audit log. Its methods are safe for concurrent use.
type Log struct {
	opts Options
	log  hclog.Logger
	now  func() time.Time
	db   *sqldb.DB
	w    *sqldb.Conn // the writer's connection on SQLite, used only by run
	lock *os.File
	// lease holds the checkpoint signer lease on PostgreSQL (a session
	// lock); used only by run.
	lease     *sqldb.Conn
	leaseHeld bool
	key       *signingKey
	vfy       note.Verifier
	reader    *Reader

	reqs    chan *appendReq
	closing chan struct{}
	done    chan struct{} // closed when run returns
	closeMu sync.Once
	final   error // the final checkpoint's error, set by run

	failed atomic.Pointer[error] // sticky: set once, appends fail after

	witness     chan []byte
	witnessDone chan struct{}

	// State owned by the writer goroutine.
	size      int64
	chain     [32]byte
	front     frontier
	ckpt      Checkpoint  // last signed checkpoint (Size 0: none)
	ckptEntry bool        // the last entry is the checkpoint entry of ckpt
	ckptAt    time.Time   // when ckpt was signed, or the log opened (monotonic)
	retryAt   time.Time   // earliest retry of a checkpoint that could not run (monotonic)
	durable   durableHead // on PostgreSQL: how far this writer confirmed the log durable
	writerID  string      // on PostgreSQL: this writer's row in flush_barrier
	wconn     *sqldb.Conn // on PostgreSQL: the writer's own connection (pgfast.go)
}

type appendReq struct {
	e      Entry
	fields []Field
	state  atomic.Int32 // reqPending, reqTaken or reqCancelled
	done   chan appendResult
}

const (
	reqPending int32 = iota
	reqTaken
	reqCancelled
)

type appendResult struct {
	ref Ref
	err error
}

// Open opens the log at opts.Path, creating the database and the signing
// key on first use. It takes an exclusive lock on the log (a second Open of
// the same database fails until the first is closed), checks the schema,
// and refuses a database that lost or changed entries its last checkpoint
// (in the database or in the checkpoint file) vouches for (ErrInconsistent).
func Open(ctx context.Context, opts Options) (*Log, error) {
	if (opts.Path == "" && opts.DB == nil) || opts.KeyPath == "" {
		return nil, errors.New("audit log: Options.Path (or DB) and Options.KeyPath are required")
	}
	if opts.VerifierKeyPath == "" {
		opts.VerifierKeyPath = strings.TrimSuffix(opts.KeyPath, ".key") + ".vkey"
	}
	if opts.CheckpointEvery == 0 {
		opts.CheckpointEvery = DefaultCheckpointEvery
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.WitnessTimeout <= 0 {
		opts.WitnessTimeout = DefaultWitnessTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	l := &Log{
		opts:     opts,
		log:      opts.Logger,
		now:      opts.Now,
		reqs:     make(chan *appendReq, maxBatch),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		writerID: rand.Text(),
	}
	if l.log == nil {
		l.log = hclog.NewNullLogger()
	}
	l.log = l.log.Named("auditchain")
	if l.now == nil {
		l.now = time.Now
	}
	if err := l.open(ctx); err != nil {
		l.release()
		return nil, err
	}
	if len(opts.WitnessCommand) > 0 {
		l.witness = make(chan []byte, 1)
		l.witnessDone = make(chan struct{})
		go l.runWitness()
	}
	l.ckptAt = time.Now()
	go l.run()
	return l, nil
}

// Origin returns the log's origin line.
func (l *Log) Origin() string { return l.opts.Origin }

// VerifierKey returns the note verifier key for this log's checkpoints
// ("<origin>+<hash>+<key>"), as written to the verifier key file.
func (l *Log) VerifierKey() string { return l.key.vkey }

// Reader returns a read-only view of the log (exports, proofs, lookups).
func (l *Log) Reader() *Reader { return l.reader }

// Append validates e, assigns its sequence number and time, and returns
// once the entry is durable (committed with synchronous=FULL). Concurrent
// calls share one transaction and one fsync.
//
// An error means the entry is not in the log, except ErrOutcomeUnknown:
// ctx ended after the writer took the entry. ErrInvalidEntry means e breaks
// the encoding rules; ErrClosed and ErrFailed mean the log accepts nothing.
func (l *Log) Append(ctx context.Context, e Entry) (Ref, error) {
	fs, err := e.normalize()
	if err != nil {
		return Ref{}, err
	}
	// Seq and time have fixed widths: checking the size now holds later.
	if _, err := appendLeaf(nil, e, fs); err != nil {
		return Ref{}, err
	}
	if p := l.failed.Load(); p != nil {
		return Ref{}, *p
	}
	// A context that has already ended must not race the writer for the
	// entry: select picks among ready cases at random.
	if err := ctx.Err(); err != nil {
		return Ref{}, fmt.Errorf("audit log: append: %w", err)
	}
	r := &appendReq{e: e, fields: fs, done: make(chan appendResult, 1)}
	select {
	case <-l.closing:
		return Ref{}, fmt.Errorf("audit log: append: %w", ErrClosed)
	case <-ctx.Done():
		return Ref{}, fmt.Errorf("audit log: append: %w", ctx.Err())
	case l.reqs <- r:
	}
	select {
	case res := <-r.done:
		return res.ref, res.err
	case <-l.done:
		select {
		case res := <-r.done:
			return res.ref, res.err
		default:
			return Ref{}, fmt.Errorf("audit log: append: %w", ErrClosed)
		}
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqPending, reqCancelled) {
			return Ref{}, fmt.Errorf("audit log: append: %w", ctx.Err())
		}
		return Ref{}, fmt.Errorf("audit log: append: %w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// Close stops accepting entries, commits those already queued, signs a
// final checkpoint over everything (when anything is new) and closes the
// database. It returns the final checkpoint's error, if any, or ctx's
// error when ctx ends first (the writer then finishes on its own).
func (l *Log) Close(ctx context.Context) error {
	l.closeMu.Do(func() { close(l.closing) })
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("audit log: close: %w", ctx.Err())
	}
	if l.witness != nil {
		select {
		case <-l.witnessDone:
		case <-ctx.Done():
			return fmt.Errorf("audit log: close: waiting for witness: %w", ctx.Err())
		}
	}
	return l.final
}

// release frees the database and lock; the writer has stopped.
func (l *Log) release() {
	if l.w != nil {
		l.w.Close()
	}
	l.dropLease()
	l.dropWriterConn()
	if l.db != nil && l.shared() {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.WriteTimeout)
		l.db.ExecContext(ctx, `DELETE FROM flush_barrier WHERE writer = ?`, l.writerID)
		cancel()
	}
	if l.db != nil && l.db != l.opts.DB {
		l.db.Close()
	}
	if l.lock != nil {
		l.lock.Close()
	}
}

// shared reports whether the log is on PostgreSQL, shared with other
// replicas.
func (l *Log) shared() bool { return l.db.Engine == sqldb.Postgres }

// writeCtx bounds a write transaction on PostgreSQL (WriteTimeout); on
// SQLite, where the writer owns the file, it is ctx.
func (l *Log) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if !l.shared() {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.opts.WriteTimeout)
}

// begin starts a write transaction. On PostgreSQL it holds the chain lock
// and the writer's view is brought up to the head first.
func (l *Log) begin(ctx context.Context) (*sqldb.Tx, error) {
	if !l.shared() {
		return l.w.BeginTx(ctx, nil)
	}
	tx, _, err := l.beginShared(ctx, false, nil)
	return tx, err
}

// Dangling returns the action ids that have an action.connecting entry and
// no action.finished entry, in the order they connected: the actions a
// crashed gateway left in flight.
func (l *Log) Dangling(ctx context.Context) ([]string, error) {
	return l.reader.Dangling(ctx)
}
