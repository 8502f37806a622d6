package auditchain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
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
	maxBatch                  = 1024
)

// Options configure a Log. Paths must be set; everything else has a
// useful zero value.
type Options struct {
	// Path is the SQLite database file (audit.db). It is created with
	// mode 0600 when missing.
	Path string

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
	// It is fixed when the database is created. Empty: "airlock/" and
	// the host name.
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

	// Logger receives operational messages. Nil: no logging.
	Logger hclog.Logger

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
	opts   Options
	log    hclog.Logger
	now    func() time.Time
	db     *sql.DB
	w      *sql.Conn // the writer's connection, used only by run
	lock   *os.File
	key    *signingKey
	vfy    note.Verifier
	reader *Reader

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
	ckpt      Checkpoint // last signed checkpoint (Size 0: none)
	ckptEntry bool       // the last entry is the checkpoint entry of ckpt
	ckptAt    time.Time  // when ckpt was signed, or the log opened (monotonic)
	retryAt   time.Time  // earliest retry of a checkpoint that could not run (monotonic)
}

type appendReq struct {
	e      Entry
	fields []Field
	state  atomic.Int32 // reqPending, reqTaken or reqCancelled
	done   chan appendResult
	extra  func(context.Context, *sql.Tx) error // internal entries only
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
	if opts.Path == "" || opts.KeyPath == "" {
		return nil, errors.New("auditchain: Options.Path and Options.KeyPath are required")
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
	l := &Log{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		reqs:    make(chan *appendReq, maxBatch),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
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

func (l *Log) open(ctx context.Context) error {
	dir := filepath.Dir(l.opts.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auditchain: create state directory: %w", err)
	}
	lock, err := os.OpenFile(l.opts.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("auditchain: lock: %w", err)
	}
	l.lock = lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("auditchain: %s is open in another process: %w", l.opts.Path, err)
	}
	if err := securefile.Create(l.opts.Path, 0o600); err != nil {
		return err
	}
	db, err := sql.Open("sqlite3", rwDSN(l.opts.Path))
	if err != nil {
		return fmt.Errorf("auditchain: open %s: %w", l.opts.Path, err)
	}
	l.db = db
	db.SetMaxOpenConns(8)
	if l.w, err = db.Conn(ctx); err != nil {
		return fmt.Errorf("auditchain: open %s: %w", l.opts.Path, err)
	}
	// Only the writer moves WAL frames into the main file, and only right
	// before a checkpoint is signed: a signed checkpoint then never covers
	// an entry that lives only in the WAL (see docs/audit.md, crashes).
	if _, err := l.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		return fmt.Errorf("auditchain: configure %s: %w", l.opts.Path, err)
	}
	var mode string
	if err := l.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("auditchain: %s: journal mode %q, want wal (err %v)", l.opts.Path, mode, err)
	}
	origin, err := l.initSchema(ctx)
	if err != nil {
		return err
	}
	l.opts.Origin = origin
	key, created, err := loadOrCreateKey(l.opts.KeyPath, l.opts.VerifierKeyPath, origin)
	if err != nil {
		return err
	}
	if created {
		l.log.Info("generated checkpoint signing key", "path", l.opts.KeyPath, "verifier_key", key.vkey)
	}
	l.key = key
	if l.vfy, err = note.NewVerifier(key.vkey); err != nil {
		return fmt.Errorf("auditchain: verifier key: %w", err)
	}
	l.reader = &Reader{db: db}
	return l.loadState(ctx)
}

// initSchema creates the tables in a new database or checks them in an
// existing one, and returns the log's origin.
func (l *Log) initSchema(ctx context.Context) (string, error) {
	got, err := readSchema(ctx, l.w)
	if err != nil {
		return "", err
	}
	if len(got) == 0 {
		origin := l.opts.Origin
		if origin == "" {
			host, _ := os.Hostname()
			origin = "airlock/" + strings.Map(func(r rune) rune {
				if r <= ' ' || r == '+' || r > 0x7e {
					return -1
				}
				return r
			}, host)
		}
		if !validOrigin(origin) {
			return "", fmt.Errorf("auditchain: origin %q: want non-empty UTF-8 without spaces or '+'", origin)
		}
		tx, err := l.w.BeginTx(ctx, nil)
		if err != nil {
			return "", fmt.Errorf("auditchain: create schema: %w", err)
		}
		defer tx.Rollback()
		for _, s := range schemaDDL {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return "", fmt.Errorf("auditchain: create schema: %w", err)
			}
		}
		for k, v := range map[string]string{"format": formatVersion, "origin": origin} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, k, v); err != nil {
				return "", fmt.Errorf("auditchain: create schema: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return "", fmt.Errorf("auditchain: create schema: %w", err)
		}
		return origin, nil
	}
	want, err := expectedSchema(ctx)
	if err != nil {
		return "", err
	}
	if d := schemaDiff(want, got); d != "" {
		return "", fmt.Errorf("auditchain: %s: schema differs (%s); run airlock audit verify: %w", l.opts.Path, d, ErrInconsistent)
	}
	var format, origin string
	if err := l.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'format'`).Scan(&format); err != nil {
		return "", fmt.Errorf("auditchain: read format: %w", err)
	}
	if format != formatVersion {
		return "", fmt.Errorf("auditchain: %s: format %q, this build reads %q", l.opts.Path, format, formatVersion)
	}
	if err := l.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'origin'`).Scan(&origin); err != nil {
		return "", fmt.Errorf("auditchain: read origin: %w", err)
	}
	if l.opts.Origin != "" && l.opts.Origin != origin {
		return "", fmt.Errorf("auditchain: %s has origin %q, options say %q", l.opts.Path, origin, l.opts.Origin)
	}
	return origin, nil
}

// loadState reads the size, the chain head and the tree frontier, and
// checks them against the last checkpoints.
func (l *Log) loadState(ctx context.Context) error {
	var n, maxSeq sql.NullInt64
	if err := l.w.QueryRowContext(ctx, `SELECT count(*), max(seq) FROM entries`).Scan(&n, &maxSeq); err != nil {
		return fmt.Errorf("auditchain: read size: %w", err)
	}
	l.size = n.Int64
	if l.size > 0 && maxSeq.Int64 != l.size-1 {
		return fmt.Errorf("auditchain: %d entries but last seq %d: %w", l.size, maxSeq.Int64, ErrInconsistent)
	}
	l.chain = chainGenesis
	if l.size > 0 {
		var leaf, chain, prev []byte
		if err := l.w.QueryRowContext(ctx, `SELECT leaf, chain FROM entries WHERE seq = ?`, l.size-1).Scan(&leaf, &chain); err != nil {
			return fmt.Errorf("auditchain: read last entry: %w", err)
		}
		prevChain := chainGenesis
		if l.size > 1 {
			if err := l.w.QueryRowContext(ctx, `SELECT chain FROM entries WHERE seq = ?`, l.size-2).Scan(&prev); err != nil {
				return fmt.Errorf("auditchain: read last entry: %w", err)
			}
			copy(prevChain[:], prev)
		}
		if got := ChainHash(prevChain, leaf); string(got[:]) != string(chain) {
			return fmt.Errorf("auditchain: last entry %d does not match its chain hash: %w", l.size-1, ErrInconsistent)
		}
		copy(l.chain[:], chain)
		e, err := DecodeLeaf(leaf)
		if err != nil || e.Seq != l.size-1 {
			return fmt.Errorf("auditchain: last entry %d is malformed: %w", l.size-1, ErrInconsistent)
		}
		l.ckptEntry = e.Kind == KindCheckpoint
	}
	// The frontier comes from the stored hashes of the complete subtrees.
	l.front = frontier{n: l.size}
	hr := dbHashReader{ctx, l.w}
	for lv := 0; lv < 63; lv++ {
		if l.size>>uint(lv)&1 == 1 {
			hs, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(lv, l.size>>uint(lv)-1)})
			if err != nil {
				return err
			}
			l.front.nodes[lv] = hs[0]
		}
	}
	var count int64
	if err := l.w.QueryRowContext(ctx, `SELECT count(*) FROM tree_hashes`).Scan(&count); err != nil {
		return fmt.Errorf("auditchain: read tree size: %w", err)
	}
	if count != tlog.StoredHashCount(l.size) {
		return fmt.Errorf("auditchain: %d stored tree hashes for %d entries: %w", count, l.size, ErrInconsistent)
	}
	root := l.front.root()
	// The last checkpoint in the database.
	var msg []byte
	err := l.w.QueryRowContext(ctx, `SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1`).Scan(&msg)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("auditchain: read last checkpoint: %w", err)
	default:
		c, err := OpenCheckpoint(msg, l.vfy)
		if err != nil {
			return fmt.Errorf("auditchain: last checkpoint in the database: %w: %w", err, ErrInconsistent)
		}
		if err := l.consistentWith(ctx, c, root); err != nil {
			return err
		}
		l.ckpt = c
	}
	// The last checkpoint in the file outside the database catches a
	// database restored from an older copy.
	if l.opts.CheckpointLogPath != "" {
		data, err := os.ReadFile(l.opts.CheckpointLogPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("auditchain: read checkpoint file: %w", err)
		}
		notes, err := SplitNotes(data)
		if err != nil {
			return fmt.Errorf("auditchain: checkpoint file %s: %w", l.opts.CheckpointLogPath, err)
		}
		if len(notes) > 0 {
			c, err := OpenCheckpoint(notes[len(notes)-1], l.vfy)
			if err != nil {
				return fmt.Errorf("auditchain: last checkpoint in %s: %w: %w", l.opts.CheckpointLogPath, err, ErrInconsistent)
			}
			if err := l.consistentWith(ctx, c, root); err != nil {
				return err
			}
			if c.Size > l.ckpt.Size {
				l.ckpt = c
			}
		}
	}
	return nil
}

// consistentWith checks that checkpoint c describes a prefix of the tree
// held in the database, whose root at the current size is root.
func (l *Log) consistentWith(ctx context.Context, c Checkpoint, root tlog.Hash) error {
	if c.Size > l.size {
		return fmt.Errorf("auditchain: a checkpoint covers %d entries, the database holds %d: %w", c.Size, l.size, ErrInconsistent)
	}
	hr := dbHashReader{ctx, l.w}
	if c.Size == l.size {
		if c.Root != root {
			return fmt.Errorf("auditchain: checkpoint root at size %d differs from the database: %w", c.Size, ErrInconsistent)
		}
		return nil
	}
	if c.Size == 0 {
		return nil
	}
	p, err := tlog.ProveTree(l.size, c.Size, hr)
	if err != nil {
		return fmt.Errorf("auditchain: prove consistency with checkpoint %d: %w", c.Size, err)
	}
	if err := tlog.CheckTree(p, l.size, root, c.Size, c.Root); err != nil {
		return fmt.Errorf("auditchain: checkpoint at size %d is not a prefix of the database: %w", c.Size, ErrInconsistent)
	}
	return nil
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
		return Ref{}, fmt.Errorf("auditchain: append: %w", err)
	}
	r := &appendReq{e: e, fields: fs, done: make(chan appendResult, 1)}
	select {
	case <-l.closing:
		return Ref{}, fmt.Errorf("auditchain: append: %w", ErrClosed)
	case <-ctx.Done():
		return Ref{}, fmt.Errorf("auditchain: append: %w", ctx.Err())
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
			return Ref{}, fmt.Errorf("auditchain: append: %w", ErrClosed)
		}
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqPending, reqCancelled) {
			return Ref{}, fmt.Errorf("auditchain: append: %w", ctx.Err())
		}
		return Ref{}, fmt.Errorf("auditchain: append: %w: %w", ErrOutcomeUnknown, ctx.Err())
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
		return fmt.Errorf("auditchain: close: %w", ctx.Err())
	}
	if l.witness != nil {
		select {
		case <-l.witnessDone:
		case <-ctx.Done():
			return fmt.Errorf("auditchain: close: waiting for witness: %w", ctx.Err())
		}
	}
	return l.final
}

// release frees the database and lock; the writer has stopped.
func (l *Log) release() {
	if l.w != nil {
		l.w.Close()
	}
	if l.db != nil {
		l.db.Close()
	}
	if l.lock != nil {
		l.lock.Close()
	}
}

// fail makes every later Append return ErrFailed wrapping cause.
func (l *Log) fail(cause error) error {
	err := fmt.Errorf("auditchain: %w: %w", ErrFailed, cause)
	if l.failed.CompareAndSwap(nil, &err) {
		l.log.Error("audit log failed; refusing further appends", "error", cause)
	}
	return *l.failed.Load()
}

// run is the writer goroutine: it owns the writer connection and state.
func (l *Log) run() {
	defer close(l.done)
	defer l.release()
	defer func() {
		if l.witness != nil {
			close(l.witness)
		}
	}()
	var tick <-chan time.Time
	if l.opts.CheckpointInterval > 0 {
		t := time.NewTicker(min(l.opts.CheckpointInterval, time.Second))
		defer t.Stop()
		tick = t.C
	}
	ctx := context.Background()
	for {
		select {
		case r := <-l.reqs:
			l.commit(ctx, l.gather(r))
			l.maybeCheckpoint(ctx, false)
		case <-tick:
			l.maybeCheckpoint(ctx, false)
		case <-l.closing:
			for {
				select {
				case r := <-l.reqs:
					l.commit(ctx, l.gather(r))
					continue
				default:
				}
				break
			}
			l.final = l.maybeCheckpoint(ctx, true)
			return
		}
	}
}

// gather takes r and whatever else is queued, up to maxBatch, skipping
// requests whose caller gave up.
func (l *Log) gather(r *appendReq) []*appendReq {
	batch := make([]*appendReq, 0, 16)
	take := func(r *appendReq) {
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			batch = append(batch, r)
		}
	}
	take(r)
	for len(batch) < maxBatch {
		select {
		case r := <-l.reqs:
			take(r)
			continue
		default:
		}
		break
	}
	return batch
}

// commit writes a batch in one transaction and answers every request.
func (l *Log) commit(ctx context.Context, batch []*appendReq) {
	if len(batch) == 0 {
		return
	}
	refs, err := l.write(ctx, batch)
	for i, r := range batch {
		if err != nil {
			r.done <- appendResult{err: err}
		} else {
			r.done <- appendResult{ref: refs[i]}
		}
	}
}

func (l *Log) write(ctx context.Context, batch []*appendReq) ([]Ref, error) {
	if p := l.failed.Load(); p != nil {
		return nil, *p
	}
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, l.recover(ctx, fmt.Errorf("auditchain: begin: %w", err))
	}
	size, chain, front := l.size, l.chain, l.front
	refs := make([]Ref, len(batch))
	entryArgs := make([]any, 0, 8*len(batch))
	hashArgs := make([]any, 0, 4*len(batch))
	isCkpt := false
	for i, r := range batch {
		e := r.e
		e.Seq = size
		e.Time = time.Unix(0, l.now().UnixNano()).UTC()
		leaf, err := appendLeaf(nil, e, r.fields)
		if err != nil {
			tx.Rollback()
			return nil, err
		}
		lh := tlog.RecordHash(leaf)
		chain = ChainHash(chain, leaf)
		hs, err := front.add(lh)
		if err != nil {
			tx.Rollback()
			return nil, l.fail(err)
		}
		entryArgs = append(entryArgs, e.Seq, e.Time.UnixNano(), e.Kind.String(), e.ActionID, e.RunID, leaf, bytes.Clone(lh[:]), bytes.Clone(chain[:]))
		base := tlog.StoredHashIndex(0, e.Seq)
		for j, h := range hs {
			hashArgs = append(hashArgs, base+int64(j), bytes.Clone(h[:]))
		}
		if r.extra != nil {
			if err := r.extra(ctx, tx); err != nil {
				tx.Rollback()
				return nil, l.recover(ctx, err)
			}
		}
		isCkpt = e.Kind == KindCheckpoint
		refs[i] = Ref{Seq: e.Seq, Time: e.Time, LeafHash: lh, Chain: chain}
		size++
	}
	// Multi-row inserts: a batch costs a few statements, not three per entry.
	if err := insertRows(ctx, tx, `INSERT INTO entries (seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain) VALUES `, 8, entryArgs); err != nil {
		tx.Rollback()
		return nil, l.recover(ctx, fmt.Errorf("auditchain: insert entries from %d: %w", l.size, err))
	}
	if err := insertRows(ctx, tx, `INSERT INTO tree_hashes (idx, hash) VALUES `, 2, hashArgs); err != nil {
		tx.Rollback()
		return nil, l.recover(ctx, fmt.Errorf("auditchain: insert tree hashes: %w", err))
	}
	if err := tx.Commit(); err != nil {
		return nil, l.recover(ctx, fmt.Errorf("auditchain: commit: %w", err))
	}
	l.size, l.chain, l.front, l.ckptEntry = size, chain, front, isCkpt
	return refs, nil
}

// insertRows runs prefix with as many "(?, …)" tuples of width columns as
// args holds, in chunks that stay under SQLite's parameter limit.
func insertRows(ctx context.Context, tx *sql.Tx, prefix string, width int, args []any) error {
	const maxRows = 256
	for len(args) > 0 {
		n := min(len(args)/width, maxRows)
		tuple := "(" + strings.Repeat("?, ", width-1) + "?)"
		q := prefix + strings.Repeat(tuple+", ", n-1) + tuple
		if _, err := tx.ExecContext(ctx, q, args[:n*width]...); err != nil {
			return err
		}
		args = args[n*width:]
	}
	return nil
}

// recover is called after a failed write: when the database still ends
// where the writer's state says, the failure cost only this batch;
// otherwise the log fails closed.
func (l *Log) recover(ctx context.Context, cause error) error {
	var n int64
	var chain []byte
	err := l.w.QueryRowContext(ctx, `SELECT count(*), coalesce((SELECT chain FROM entries ORDER BY seq DESC LIMIT 1), x'') FROM entries`).Scan(&n, &chain)
	if err != nil || n != l.size || (n > 0 && string(chain) != string(l.chain[:])) {
		return l.fail(cause)
	}
	l.log.Warn("append batch failed and was rolled back", "error", cause)
	return cause
}

// maybeCheckpoint signs a checkpoint when one is due (or, when final,
// whenever entries are uncovered). It runs on the writer goroutine, so no
// entry is appended while it works.
func (l *Log) maybeCheckpoint(ctx context.Context, final bool) error {
	if p := l.failed.Load(); p != nil {
		if final {
			return *p // Close reports that the log had failed
		}
		return nil
	}
	if l.size == l.ckpt.Size {
		return nil
	}
	// A checkpoint's own entry alone does not call for another checkpoint,
	// or an idle log would sign forever.
	if !final && l.ckptEntry && l.size == l.ckpt.Size+1 {
		return nil
	}
	now := time.Now()
	if !final {
		byCount := l.opts.CheckpointEvery > 0 && l.size-l.ckpt.Size >= int64(l.opts.CheckpointEvery)
		byTime := l.opts.CheckpointInterval > 0 && now.Sub(l.ckptAt) >= l.opts.CheckpointInterval
		if !byCount && !byTime || now.Before(l.retryAt) {
			return nil
		}
	}
	err := l.checkpoint(ctx, !final)
	if err != nil {
		l.retryAt = now.Add(time.Second)
		l.log.Error("checkpoint failed", "size", l.size, "error", err)
	}
	return err
}

// checkpoint signs the current tree. With entry, it also appends a
// checkpoint entry recording it (in the same transaction as the stored
// note); the final checkpoint at Close has no entry, so that it covers
// everything.
func (l *Log) checkpoint(ctx context.Context, entry bool) error {
	// Move every committed frame into the main database file and sync it:
	// losing the WAL after a crash must not lose an entry a signed
	// checkpoint vouches for. PASSIVE never waits for readers; when a
	// reader holds frames back, signing waits for a later attempt.
	var busy, walFrames, moved int
	if err := l.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walFrames, &moved); err != nil {
		return fmt.Errorf("auditchain: wal checkpoint: %w", err)
	}
	if busy != 0 || walFrames != moved {
		return fmt.Errorf("auditchain: wal checkpoint moved %d of %d frames; readers hold the rest", moved, walFrames)
	}
	size := l.size
	root, err := tlog.TreeHash(size, dbHashReader{ctx, l.w})
	if err != nil {
		return fmt.Errorf("auditchain: tree hash: %w", err)
	}
	if root != l.front.root() {
		return l.fail(fmt.Errorf("auditchain: stored tree hashes disagree with the appended entries: %w", ErrInconsistent))
	}
	if l.ckpt.Size > 0 {
		p, err := tlog.ProveTree(size, l.ckpt.Size, dbHashReader{ctx, l.w})
		if err == nil {
			err = tlog.CheckTree(p, size, root, l.ckpt.Size, l.ckpt.Root)
		}
		if err != nil {
			return l.fail(fmt.Errorf("auditchain: new tree is not consistent with checkpoint %d: %w: %w", l.ckpt.Size, err, ErrInconsistent))
		}
	}
	c := Checkpoint{Origin: l.opts.Origin, Size: size, Root: root}
	msg, err := note.Sign(&note.Note{Text: c.Text()}, l.key.signer)
	if err != nil {
		return fmt.Errorf("auditchain: sign checkpoint: %w", err)
	}
	if err := l.appendCheckpointFile(msg); err != nil {
		// The outside copy is evidence, not a condition for appending.
		l.log.Error("could not append checkpoint to file", "path", l.opts.CheckpointLogPath, "error", err)
	}
	insert := func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (size, note) VALUES (?, ?)`, size, msg); err != nil {
			return fmt.Errorf("auditchain: store checkpoint: %w", err)
		}
		return nil
	}
	if entry {
		sum := sha256.Sum256(msg)
		r := &appendReq{
			e: Entry{Kind: KindCheckpoint},
			fields: []Field{ // sorted by name
				Bytes("note_sha256", sum[:]),
				Bytes("root", root[:]),
				Int("size", size),
			},
			done:  make(chan appendResult, 1),
			extra: insert,
		}
		r.state.Store(reqTaken)
		if _, err := l.write(ctx, []*appendReq{r}); err != nil {
			return err
		}
	} else {
		tx, err := l.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("auditchain: store checkpoint: %w", err)
		}
		if err := insert(ctx, tx); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("auditchain: store checkpoint: %w", err)
		}
	}
	l.ckpt, l.ckptAt = c, time.Now()
	l.log.Debug("signed checkpoint", "size", size, "root", root.String())
	if l.witness != nil {
		select {
		case <-l.witness: // drop a note the witness has not taken yet
		default:
		}
		l.witness <- msg
	}
	return nil
}

func (l *Log) appendCheckpointFile(msg []byte) error {
	if l.opts.CheckpointLogPath == "" {
		return nil
	}
	f, err := os.OpenFile(l.opts.CheckpointLogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(append([]byte(nil), msg...), '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Dangling returns the action ids that have an action.connecting entry and
// no action.finished entry, in the order they connected: the actions a
// crashed gateway left in flight.
func (l *Log) Dangling(ctx context.Context) ([]string, error) {
	return l.reader.Dangling(ctx)
}
