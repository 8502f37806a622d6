package auditchain

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/mattn/go-sqlite3"
	"golang.org/x/mod/sumdb/tlog"
)

// A Reader reads a log's database without the signing key: exports,
// per-action views, stored checkpoints and proofs. What it returns is what
// the file holds; only Verify (and the Check methods of proofs against a
// signed checkpoint) say whether that can be trusted.
type Reader struct {
	db    *sqldb.DB
	owned bool
}

// OpenReader opens the database at path read-only.
func OpenReader(ctx context.Context, path string) (*Reader, error) {
	db, err := openReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	return &Reader{db: db, owned: true}, nil
}

// NewReader reads the log in a PostgreSQL database (Options.DB); the
// caller closes db.
func NewReader(db *sqldb.DB) *Reader { return &Reader{db: db} }

// readOnlyDriver opens database files that may come from anywhere (an
// investigator's copy): queries only, and functions in the file's schema
// (views, triggers) may not have side effects.
const readOnlyDriver = "auditchain-sqlite3-readonly"

func init() {
	sql.Register(readOnlyDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(`PRAGMA query_only = ON; PRAGMA trusted_schema = OFF`, nil)
			return err
		},
	})
}

func openReadOnly(ctx context.Context, path string) (*sqldb.DB, error) {
	raw, err := sql.Open(readOnlyDriver, roDSN(path))
	if err != nil {
		return nil, fmt.Errorf("audit log: open %s: %w", path, err)
	}
	db := sqldb.Wrap(raw, sqldb.SQLite)
	db.SetMaxOpenConns(4)
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("audit log: open %s: %w", path, err)
	}
	if n == 0 {
		db.Close()
		return nil, fmt.Errorf("audit log: %s is not an audit log (empty database): %w", path, ErrNotFound)
	}
	return db, nil
}

// Close closes a Reader from OpenReader; a Log's Reader closes with the Log.
func (r *Reader) Close() error {
	if r.owned {
		return r.db.Close()
	}
	return nil
}

// A Record is an entry as stored: the decoded entry, its exact leaf bytes
// and its hashes.
type Record struct {
	Entry
	Leaf     []byte
	LeafHash tlog.Hash
	Chain    [32]byte
}

func scanRecord(rows interface{ Scan(...any) error }) (Record, error) {
	var rec Record
	var seq int64
	var lh, chain []byte
	if err := rows.Scan(&seq, &rec.Leaf, &lh, &chain); err != nil {
		return rec, fmt.Errorf("audit log: read entry: %w", err)
	}
	e, err := DecodeLeaf(rec.Leaf)
	if err != nil {
		return rec, fmt.Errorf("audit log: entry %d: %w", seq, err)
	}
	if e.Seq != seq || len(lh) != tlog.HashSize || len(chain) != 32 {
		return rec, fmt.Errorf("audit log: entry %d: stored row does not match its leaf: %w", seq, ErrMalformedLeaf)
	}
	rec.Entry = e
	copy(rec.LeafHash[:], lh)
	copy(rec.Chain[:], chain)
	return rec, nil
}

const recordColumns = `seq, leaf, leaf_hash, chain`

// Size returns the number of entries.
func (r *Reader) Size(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := r.db.QueryRowContext(ctx, `SELECT max(seq) FROM entries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit log: size: %w", err)
	}
	if !n.Valid {
		return 0, nil
	}
	return n.Int64 + 1, nil
}

// Entries yields the records with seq > after in order (after = -1: all).
// It streams: memory does not grow with the log. Iteration stops at the
// first error, which is yielded.
func (r *Reader) Entries(ctx context.Context, after int64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		rows, err := r.db.QueryContext(ctx, `SELECT `+recordColumns+` FROM entries WHERE seq > ? ORDER BY seq`, after)
		if err != nil {
			yield(Record{}, fmt.Errorf("audit log: read entries: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			rec, err := scanRecord(rows)
			if !yield(rec, err) || err != nil {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(Record{}, fmt.Errorf("audit log: read entries: %w", err))
		}
	}
}

// Entry returns the record at seq, or an error wrapping ErrNotFound.
func (r *Reader) Entry(ctx context.Context, seq int64) (Record, error) {
	row := r.db.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM entries WHERE seq = ?`, seq)
	rec, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, fmt.Errorf("audit log: entry %d: %w", seq, ErrNotFound)
	}
	return rec, err
}

// ActionEntries returns every record of one action, in order, or an error
// wrapping ErrNotFound when there is none.
func (r *Reader) ActionEntries(ctx context.Context, actionID string) ([]Record, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT `+recordColumns+` FROM entries WHERE action_id = ? ORDER BY seq`, actionID)
	if err != nil {
		return nil, fmt.Errorf("audit log: read action %q: %w", actionID, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: read action %q: %w", actionID, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("audit log: action %q: %w", actionID, ErrNotFound)
	}
	return out, nil
}

// Dangling returns the action ids with an action.connecting entry and no
// action.finished entry, in the order they connected.
func (r *Reader) Dangling(ctx context.Context) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, `
		SELECT c.action_id FROM entries AS c
		WHERE c.kind = 'action.connecting' AND c.action_id <> ''
		  AND NOT EXISTS (SELECT 1 FROM entries AS f
		                  WHERE f.action_id = c.action_id AND f.kind = 'action.finished')
		GROUP BY c.action_id ORDER BY min(c.seq)`)
	if err != nil {
		return nil, fmt.Errorf("audit log: dangling actions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("audit log: dangling actions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: dangling actions: %w", err)
	}
	return ids, nil
}

// A StoredCheckpoint is a signed checkpoint note as the database holds it.
type StoredCheckpoint struct {
	ID   int64
	Size int64
	Note []byte
}

// Checkpoints returns the stored checkpoint notes in the order they were
// signed. They are not verified here.
func (r *Reader) Checkpoints(ctx context.Context) ([]StoredCheckpoint, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, size, note FROM checkpoints ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("audit log: read checkpoints: %w", err)
	}
	defer rows.Close()
	var out []StoredCheckpoint
	for rows.Next() {
		var c StoredCheckpoint
		if err := rows.Scan(&c.ID, &c.Size, &c.Note); err != nil {
			return nil, fmt.Errorf("audit log: read checkpoints: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: read checkpoints: %w", err)
	}
	return out, nil
}

// An InclusionProof shows that the leaf at Seq is in the tree of size Size
// whose root is Root (RFC 6962 §2.1.1 audit path).
type InclusionProof struct {
	Seq      int64
	Size     int64
	LeafHash tlog.Hash
	Root     tlog.Hash
	Proof    tlog.RecordProof
}

// Check verifies the proof. Check it against a root from a signed
// checkpoint (p.Root == checkpoint.Root) for it to mean anything.
func (p InclusionProof) Check() error {
	if err := tlog.CheckRecord(p.Proof, p.Size, p.Root, p.Seq, p.LeafHash); err != nil {
		return fmt.Errorf("audit log: inclusion proof of %d in %d: %w", p.Seq, p.Size, err)
	}
	return nil
}

// A ConsistencyProof shows that the tree of size Old with root OldRoot is
// a prefix of the tree of size New with root NewRoot (RFC 6962 §2.1.2).
type ConsistencyProof struct {
	Old, New         int64
	OldRoot, NewRoot tlog.Hash
	Proof            tlog.TreeProof
}

// Check verifies the proof.
func (p ConsistencyProof) Check() error {
	if p.Old == 0 || p.Old == p.New {
		// Every tree extends the empty tree, and a tree only itself.
		if len(p.Proof) != 0 || (p.Old == 0 && p.OldRoot != emptyRoot) || (p.Old == p.New && p.OldRoot != p.NewRoot) {
			return fmt.Errorf("audit log: consistency proof %d to %d: %w", p.Old, p.New, errBadProof)
		}
		return nil
	}
	if err := tlog.CheckTree(p.Proof, p.New, p.NewRoot, p.Old, p.OldRoot); err != nil {
		return fmt.Errorf("audit log: consistency proof %d to %d: %w", p.Old, p.New, err)
	}
	return nil
}

// TreeHash returns the root of the tree of the first size entries, from the
// stored hashes.
func (r *Reader) TreeHash(ctx context.Context, size int64) (tlog.Hash, error) {
	if err := r.checkSize(ctx, size); err != nil {
		return tlog.Hash{}, err
	}
	return tlog.TreeHash(size, dbHashReader{ctx, r.db})
}

func (r *Reader) checkSize(ctx context.Context, size int64) error {
	n, err := r.Size(ctx)
	if err != nil {
		return err
	}
	if size < 0 || size > n {
		return fmt.Errorf("audit log: tree size %d outside 0..%d: %w", size, n, ErrNotFound)
	}
	return nil
}

// ProveInclusion proves that entry seq is in the tree of the given size.
// The proof is checked before it is returned.
func (r *Reader) ProveInclusion(ctx context.Context, seq, size int64) (InclusionProof, error) {
	if err := r.checkSize(ctx, size); err != nil {
		return InclusionProof{}, err
	}
	if seq < 0 || seq >= size {
		return InclusionProof{}, fmt.Errorf("audit log: entry %d is not in a tree of size %d: %w", seq, size, ErrNotFound)
	}
	rec, err := r.Entry(ctx, seq)
	if err != nil {
		return InclusionProof{}, err
	}
	hr := dbHashReader{ctx, r.db}
	p := InclusionProof{Seq: seq, Size: size, LeafHash: tlog.RecordHash(rec.Leaf)}
	if p.Root, err = tlog.TreeHash(size, hr); err != nil {
		return p, fmt.Errorf("audit log: prove inclusion: %w", err)
	}
	if p.Proof, err = tlog.ProveRecord(size, seq, hr); err != nil {
		return p, fmt.Errorf("audit log: prove inclusion: %w", err)
	}
	return p, p.Check()
}

// ProveConsistency proves that the tree of size old is a prefix of the
// tree of size new. The proof is checked before it is returned.
func (r *Reader) ProveConsistency(ctx context.Context, old, new int64) (ConsistencyProof, error) {
	if err := r.checkSize(ctx, new); err != nil {
		return ConsistencyProof{}, err
	}
	if old < 0 || old > new {
		return ConsistencyProof{}, fmt.Errorf("audit log: consistency from %d to %d: %w", old, new, ErrNotFound)
	}
	hr := dbHashReader{ctx, r.db}
	p := ConsistencyProof{Old: old, New: new}
	var err error
	if p.OldRoot, err = tlog.TreeHash(old, hr); err != nil {
		return p, fmt.Errorf("audit log: prove consistency: %w", err)
	}
	if p.NewRoot, err = tlog.TreeHash(new, hr); err != nil {
		return p, fmt.Errorf("audit log: prove consistency: %w", err)
	}
	if old > 0 && old < new {
		if p.Proof, err = tlog.ProveTree(new, old, hr); err != nil {
			return p, fmt.Errorf("audit log: prove consistency: %w", err)
		}
	}
	return p, p.Check()
}

// emptyRoot is the root of the empty tree, SHA-256 of nothing (RFC 6962 §2.1).
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

var errBadProof = errors.New("invalid proof")

// jsonTime is the export's time format.
const jsonTime = time.RFC3339Nano
