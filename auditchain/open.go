package auditchain

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Opening a log: the lock, the schema, and the state read back (and
// checked against the last signed checkpoint) at start.

func (l *Log) open(ctx context.Context) error {
	if l.opts.DB != nil {
		return l.openShared(ctx)
	}
	dir := filepath.Dir(l.opts.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("audit log: create state directory: %w", err)
	}
	lock, err := os.OpenFile(l.opts.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: lock: %w", err)
	}
	l.lock = lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("audit log: %s is open in another process: %w", l.opts.Path, err)
	}
	if err := securefile.Create(l.opts.Path, 0o600); err != nil {
		return err
	}
	raw, err := sql.Open("sqlite3", rwDSN(l.opts.Path))
	if err != nil {
		return fmt.Errorf("audit log: open %s: %w", l.opts.Path, err)
	}
	db := sqldb.Wrap(raw, sqldb.SQLite)
	l.db = db
	db.SetMaxOpenConns(8)
	if l.w, err = db.Conn(ctx); err != nil {
		return fmt.Errorf("audit log: open %s: %w", l.opts.Path, err)
	}
	// Only the writer moves WAL frames into the main file, and only right
	// before a checkpoint is signed: a signed checkpoint then never covers
	// an entry that lives only in the WAL (see docs/audit.md, crashes).
	if _, err := l.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		return fmt.Errorf("audit log: configure %s: %w", l.opts.Path, err)
	}
	var mode string
	if err := l.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("audit log: %s: journal mode %q, want wal (err %v)", l.opts.Path, mode, err)
	}
	origin, err := l.initSchema(ctx)
	if err != nil {
		return err
	}
	if err := l.openKey(origin, true); err != nil {
		return err
	}
	l.reader = &Reader{db: db}
	return l.loadState(ctx, l.w)
}

// openShared opens the log in a PostgreSQL database that other replicas
// share: no lock (the database serializes appends), the schema created by
// the first replica, and one signing key for all, recorded by the first.
func (l *Log) openShared(ctx context.Context) error {
	if l.opts.DB.Engine != sqldb.Postgres {
		return errors.New("audit log: Options.DB must be a PostgreSQL database (SQLite logs open by Path)")
	}
	l.db = l.opts.DB
	origin, vkey, err := l.initSchemaPG(ctx)
	if err != nil {
		return err
	}
	if vkey != "" {
		// Another replica started the log: its key must be here already.
		if _, err := os.Stat(l.opts.KeyPath); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit log: the shared log's checkpoint key is not here (%s): copy keys/checkpoint.key and keys/checkpoint.vkey from the replica that started the log", l.opts.KeyPath)
		}
	}
	if err := l.openKey(origin, vkey == ""); err != nil {
		return err
	}
	switch {
	case vkey == "":
		err = l.recordVerifierKey(ctx, l.key.vkey)
	case vkey != l.key.vkey:
		err = errKeyMismatch(vkey, l.key.vkey)
	}
	if err != nil {
		return err
	}
	l.reader = &Reader{db: l.db}
	// Read the state while no replica appends.
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit log: read the log: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, chainLockKey); err != nil {
		return fmt.Errorf("audit log: read the log: %w", err)
	}
	if err := l.loadState(ctx, tx); err != nil {
		return err
	}
	tx.Rollback()
	// What was read may end with another replica's batch not yet on disk:
	// once the barrier returns, it is.
	if err := l.barrier(ctx); err != nil {
		return fmt.Errorf("audit log: read the log: %w", err)
	}
	l.durable = durableHead{l.size, l.chain}
	return nil
}

// openKey loads the signing key (creating it when create and missing).
func (l *Log) openKey(origin string, create bool) error {
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
		return fmt.Errorf("audit log: verifier key: %w", err)
	}
	return nil
}

// newOrigin is the origin of a new log.
func (l *Log) newOrigin() (string, error) {
	origin := l.opts.Origin
	if origin == "" {
		// The host name and a random part: two gateways on one host
		// (or two hosts of one name) never share an origin, whose
		// checkpoints would then pass for each other's.
		host, _ := os.Hostname()
		origin = "airlock/" + strings.Map(func(r rune) rune {
			if r <= ' ' || r == '+' || r > 0x7e {
				return -1
			}
			return r
		}, host) + "/" + rand.Text()[:10]
	}
	if !validOrigin(origin) {
		return "", fmt.Errorf("audit log: origin %q: want non-empty UTF-8 without spaces or '+'", origin)
	}
	return origin, nil
}

// initSchema creates the tables in a new database or checks them in an
// existing one, and returns the log's origin.
func (l *Log) initSchema(ctx context.Context) (string, error) {
	got, err := readSchema(ctx, l.w)
	if err != nil {
		return "", err
	}
	if len(got) == 0 {
		origin, err := l.newOrigin()
		if err != nil {
			return "", err
		}
		tx, err := l.w.BeginTx(ctx, nil)
		if err != nil {
			return "", fmt.Errorf("audit log: create schema: %w", err)
		}
		defer tx.Rollback()
		for _, s := range schemaDDL {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return "", fmt.Errorf("audit log: create schema: %w", err)
			}
		}
		for k, v := range map[string]string{"format": formatVersion, "origin": origin} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, k, v); err != nil {
				return "", fmt.Errorf("audit log: create schema: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return "", fmt.Errorf("audit log: create schema: %w", err)
		}
		return origin, nil
	}
	want, err := expectedSchema(ctx)
	if err != nil {
		return "", err
	}
	if d := schemaDiff(want, got); d != "" {
		return "", fmt.Errorf("audit log: %s: schema differs (%s); run airlock audit verify: %w", l.opts.Path, d, ErrInconsistent)
	}
	var format, origin string
	if err := l.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'format'`).Scan(&format); err != nil {
		return "", fmt.Errorf("audit log: read format: %w", err)
	}
	if format != formatVersion {
		return "", fmt.Errorf("audit log: %s: format %q, this build reads %q", l.opts.Path, format, formatVersion)
	}
	if err := l.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'origin'`).Scan(&origin); err != nil {
		return "", fmt.Errorf("audit log: read origin: %w", err)
	}
	if l.opts.Origin != "" && l.opts.Origin != origin {
		return "", fmt.Errorf("audit log: %s has origin %q, options say %q", l.opts.Path, origin, l.opts.Origin)
	}
	return origin, nil
}

// loadState reads the size, the chain head and the tree frontier, and
// checks them against the last checkpoints.
func (l *Log) loadState(ctx context.Context, q querier) error {
	var n, maxSeq sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT count(*), max(seq) FROM entries`).Scan(&n, &maxSeq); err != nil {
		return fmt.Errorf("audit log: read size: %w", err)
	}
	l.size = n.Int64
	if l.size > 0 && maxSeq.Int64 != l.size-1 {
		return fmt.Errorf("audit log: %d entries but last seq %d: %w", l.size, maxSeq.Int64, ErrInconsistent)
	}
	l.chain = chainGenesis
	if l.size > 0 {
		var leaf, chain, prev []byte
		if err := q.QueryRowContext(ctx, `SELECT leaf, chain FROM entries WHERE seq = ?`, l.size-1).Scan(&leaf, &chain); err != nil {
			return fmt.Errorf("audit log: read last entry: %w", err)
		}
		prevChain := chainGenesis
		if l.size > 1 {
			if err := q.QueryRowContext(ctx, `SELECT chain FROM entries WHERE seq = ?`, l.size-2).Scan(&prev); err != nil {
				return fmt.Errorf("audit log: read last entry: %w", err)
			}
			copy(prevChain[:], prev)
		}
		if got := ChainHash(prevChain, leaf); string(got[:]) != string(chain) {
			return fmt.Errorf("audit log: last entry %d does not match its chain hash: %w", l.size-1, ErrInconsistent)
		}
		copy(l.chain[:], chain)
		e, err := DecodeLeaf(leaf)
		if err != nil || e.Seq != l.size-1 {
			return fmt.Errorf("audit log: last entry %d is malformed: %w", l.size-1, ErrInconsistent)
		}
		l.ckptEntry = e.Kind == KindCheckpoint
	}
	var err error
	if l.front, err = loadFrontier(ctx, q, l.size); err != nil {
		return err
	}
	var count int64
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM tree_hashes`).Scan(&count); err != nil {
		return fmt.Errorf("audit log: read tree size: %w", err)
	}
	if count != tlog.StoredHashCount(l.size) {
		return fmt.Errorf("audit log: %d stored tree hashes for %d entries: %w", count, l.size, ErrInconsistent)
	}
	root := l.front.root()
	// The last checkpoint in the database.
	var msg []byte
	err = q.QueryRowContext(ctx, `SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1`).Scan(&msg)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("audit log: read last checkpoint: %w", err)
	default:
		c, err := OpenCheckpoint(msg, l.vfy)
		if err != nil {
			return fmt.Errorf("audit log: last checkpoint in the database: %w: %w", err, ErrInconsistent)
		}
		if err := l.consistentWith(ctx, q, c, root); err != nil {
			return err
		}
		l.ckpt = c
	}
	// The last checkpoint in the file outside the database catches a
	// database restored from an older copy.
	if l.opts.CheckpointLogPath != "" {
		data, err := os.ReadFile(l.opts.CheckpointLogPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit log: read checkpoint file: %w", err)
		}
		notes, err := SplitNotes(data)
		if err != nil {
			return fmt.Errorf("audit log: checkpoint file %s: %w", l.opts.CheckpointLogPath, err)
		}
		if len(notes) > 0 {
			c, err := OpenCheckpoint(notes[len(notes)-1], l.vfy)
			if err != nil {
				return fmt.Errorf("audit log: last checkpoint in %s: %w: %w", l.opts.CheckpointLogPath, err, ErrInconsistent)
			}
			if err := l.consistentWith(ctx, q, c, root); err != nil {
				return err
			}
			if c.Size > l.ckpt.Size {
				l.ckpt = c
			}
		}
	}
	return nil
}

// loadFrontier reads the frontier of a tree of size entries from the
// stored hashes of its complete subtrees.
func loadFrontier(ctx context.Context, q querier, size int64) (frontier, error) {
	f := frontier{n: size}
	hr := dbHashReader{ctx, q}
	for lv := 0; lv < 63; lv++ {
		if size>>uint(lv)&1 == 1 {
			hs, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(lv, size>>uint(lv)-1)})
			if err != nil {
				return f, err
			}
			f.nodes[lv] = hs[0]
		}
	}
	return f, nil
}

// consistentWith checks that checkpoint c describes a prefix of the tree
// held in the database, whose root at the current size is root.
func (l *Log) consistentWith(ctx context.Context, q querier, c Checkpoint, root tlog.Hash) error {
	if c.Size > l.size {
		return fmt.Errorf("audit log: a checkpoint covers %d entries, the database holds %d: %w", c.Size, l.size, ErrInconsistent)
	}
	hr := dbHashReader{ctx, q}
	if c.Size == l.size {
		if c.Root != root {
			return fmt.Errorf("audit log: checkpoint root at size %d differs from the database: %w", c.Size, ErrInconsistent)
		}
		return nil
	}
	if c.Size == 0 {
		return nil
	}
	p, err := tlog.ProveTree(l.size, c.Size, hr)
	if err != nil {
		return fmt.Errorf("audit log: prove consistency with checkpoint %d: %w", c.Size, err)
	}
	if err := tlog.CheckTree(p, l.size, root, c.Size, c.Root); err != nil {
		return fmt.Errorf("audit log: checkpoint at size %d is not a prefix of the database: %w", c.Size, ErrInconsistent)
	}
	return nil
}
