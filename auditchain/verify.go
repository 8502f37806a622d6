package auditchain

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Verify re-derives the log from its stored leaves and checks everything
// against everything: sequence numbers, each leaf's encoding and columns,
// the leaf hashes, the chain, every stored Merkle hash, every checkpoint's
// signature, origin, order and root, the checkpoint entries in the chain,
// and the trusted notes. It reads the database in one read transaction and
// streams it: memory stays O(log n) in the number of entries.
//
// Damage is reported in the Report, with the first bad seq and its kind;
// the error is for a verification that could not run (unreadable file, not
// a database, no key), or a *KeyMismatchError when the key signed none of
// the database's checkpoints.
func Verify(ctx context.Context, opts VerifyOptions) (*Report, error) {
	if opts.Key == nil {
		return nil, errors.New("audit log: verify: a verifier key is required")
	}
	txo := &sql.TxOptions{ReadOnly: true}
	db, name := opts.DB, opts.Path
	if db != nil {
		txo.Isolation, name = sql.LevelRepeatableRead, "the log on PostgreSQL"
	} else {
		var err error
		if db, err = openReadOnly(ctx, opts.Path); err != nil {
			return nil, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		// Reading the file through a memory map saves a copy per page on a
		// full scan; the page cache is sized for the scan, not kept after.
		if _, err := db.ExecContext(ctx, `PRAGMA mmap_size = 1073741824`); err != nil {
			return nil, fmt.Errorf("audit log: verify: %w", err)
		}
	}
	tx, err := db.BeginTx(ctx, txo)
	if err != nil {
		return nil, fmt.Errorf("audit log: verify: %w", err)
	}
	defer tx.Rollback()
	v := &verifier{ctx: ctx, tx: tx, key: opts.Key, rep: &Report{Damage: []Damage{}}, lastTrusted: map[string]int64{}}
	if db.Engine == sqldb.Postgres {
		// A PostgreSQL connection streams one result at a time: each
		// cursor gets a transaction of its own on the same snapshot.
		if err := tx.QueryRowContext(ctx, `SELECT pg_export_snapshot()`).Scan(&v.snapshot); err != nil {
			return nil, fmt.Errorf("audit log: verify: %w", err)
		}
		v.db, v.txo = db, txo
		defer func() {
			for _, s := range v.streams {
				s.Rollback()
			}
		}()
	}
	if err := v.run(opts.Trusted); err != nil {
		return nil, fmt.Errorf("audit log: verify %s: %w", name, err)
	}
	return v.rep, nil
}

type trustedCheckpoint struct {
	Checkpoint
	source string // the TrustedNote's Source
	label  string
	note   []byte
}

type verifier struct {
	ctx context.Context
	tx  *sqldb.Tx
	// On PostgreSQL: the snapshot tx exported, and the transactions that
	// read it for the cursors (stream).
	db       *sqldb.DB
	txo      *sql.TxOptions
	snapshot string
	streams  []*sqldb.Tx
	key      note.Verifier
	rep      *Report

	next     int64 // the seq expected next (= entries verified)
	prev     [32]byte
	prevTime int64 // time_ns of entry next-1
	front    frontier
	stopped  bool // an entry damage ended the scan

	tree     *sql.Rows // tree_hashes cursor
	treeNext int64     // the stored hash index expected next
	hashes   []tlog.Hash
	chainer  chainHasher

	ckpts       *sql.Rows // checkpoints cursor
	ckptPending *StoredCheckpoint
	lastDB      Checkpoint // last database checkpoint that verified
	trusted     []trustedCheckpoint
	lastGood    int64            // size of the last checkpoint that matched
	lastTrusted map[string]int64 // per source, the size of the last trusted checkpoint that matched
}

func (v *verifier) damage(seq int64, kind DamageKind, source, format string, args ...any) {
	v.rep.Damage = append(v.rep.Damage, Damage{Seq: seq, Kind: kind, Source: source, Detail: fmt.Sprintf(format, args...)})
}

func (v *verifier) entryDamage(seq int64, kind DamageKind, format string, args ...any) {
	v.damage(seq, kind, "database", format, args...)
	v.stopped = true
}

func (v *verifier) run(trusted []TrustedNote) error {
	ctx := v.ctx
	d, err := v.schemaDiff()
	if err != nil {
		return err
	}
	if d != "" {
		v.damage(-1, DamageSchema, "database", "schema differs from the log's: %s", d)
	} else if err := v.keyCheck(); err != nil {
		return err
	}
	for _, t := range trusted {
		c, err := OpenCheckpoint(t.Note, v.key)
		if err != nil {
			// Evidence that cannot be read or was not signed by this
			// log's key says nothing about the database.
			return &EvidenceError{Source: t.Source, Index: t.Index, Err: err}
		}
		v.trusted = append(v.trusted, trustedCheckpoint{c, t.Source, t.label(), t.Note})
	}
	slices.SortStableFunc(v.trusted, func(a, b trustedCheckpoint) int { return cmp.Compare(a.Size, b.Size) })

	if v.tree, err = v.stream(`SELECT idx, hash FROM tree_hashes ORDER BY idx`); err != nil {
		return err
	}
	defer v.tree.Close()
	if v.ckpts, err = v.stream(`SELECT id, size, note, ` + v.types("typeof(size) || typeof(note)", "integerblob") + ` FROM checkpoints ORDER BY id`); err != nil {
		return err
	}
	defer v.ckpts.Close()
	// Column types are checked only when a row fails (see bad): a value
	// of the wrong type but with the right bytes changes nothing that is
	// hashed, and checking every row would cost a third of the scan.
	rows, err := v.stream(`SELECT seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain FROM entries ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	v.prev = chainGenesis
	if err := v.checkpointsAt(0); err != nil {
		return err
	}
	var r row
	for rows.Next() {
		v.rep.Entries++
		if v.stopped {
			continue
		}
		if err := rows.Scan(&r.seq, &r.time, &r.kind, &r.action, &r.run, &r.leaf, &r.leafHash, &r.chain); err != nil {
			// An integer column holding something else: the types check
			// would have named it, had the scan succeeded.
			v.entryDamage(v.next, DamageMalformed, "the row after entry %d cannot be read: %v", v.next-1, err)
			continue
		}
		if err := v.entry(&r); err != nil {
			return err
		}
		if v.stopped {
			continue
		}
		if err := v.checkpointsAt(v.next); err != nil {
			return err
		}
		if v.next%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	v.rep.Verified = v.next
	if err := v.finish(); err != nil {
		return err
	}
	// Damage blamed on an earlier span than where the scan found it: no
	// entry from there on is vouched for.
	for _, d := range v.rep.Damage {
		if d.Seq >= 0 && d.Seq < v.rep.Verified {
			v.rep.Verified = d.Seq
		}
	}
	return nil
}

// stream runs a query whose rows are read while other queries run: on
// SQLite in the verifier's transaction, on PostgreSQL in one of its own
// that sees the same snapshot.
func (v *verifier) stream(query string, args ...any) (*sql.Rows, error) {
	if v.db == nil {
		return v.tx.QueryContext(v.ctx, query, args...)
	}
	if strings.Trim(v.snapshot, "0123456789ABCDEF-") != "" {
		return nil, fmt.Errorf("audit log: verify: odd snapshot id %q", v.snapshot)
	}
	tx, err := v.db.BeginTx(v.ctx, v.txo)
	if err != nil {
		return nil, err
	}
	v.streams = append(v.streams, tx)
	if _, err := tx.ExecContext(v.ctx, `SET TRANSACTION SNAPSHOT '`+v.snapshot+`'`); err != nil {
		return nil, err
	}
	return tx.QueryContext(v.ctx, query, args...)
}

// schemaDiff describes how the log's tables differ from what the
// gateway creates, or "".
func (v *verifier) schemaDiff() (string, error) {
	if v.tx.Engine == sqldb.Postgres {
		return pgSchemaDiff(v.ctx, v.tx)
	}
	want, err := expectedSchema(v.ctx)
	if err != nil {
		return "", err
	}
	got, err := readSchema(v.ctx, v.tx)
	if err != nil {
		return "", err
	}
	return schemaDiff(want, got), nil
}

// types is the SQL that gives a row's column types: on SQLite, expr (a
// column may hold any type there); on PostgreSQL, where the schema check
// fixed the columns' types, the expected answer.
func (v *verifier) types(expr, want string) string {
	if v.tx.Engine == sqldb.Postgres {
		return "'" + want + "'"
	}
	return expr
}

// row is one scanned entries row; RawBytes keep the scan allocation-free.
type row struct {
	seq, time             sql.NullInt64
	kind, action, run     sql.RawBytes
	leaf, leafHash, chain sql.RawBytes
}

const entryTypes = "integerintegertexttexttextblobblobblob"

// entry checks one row against the expected next entry.
func (v *verifier) entry(r *row) error {
	s := v.next
	if !r.seq.Valid || !r.time.Valid {
		v.entryDamage(s, DamageMalformed, "the row after entry %d has a NULL seq or time", s-1)
		return nil
	}
	seq := r.seq.Int64
	switch {
	case seq > s:
		v.entryDamage(s, DamageDeleted, "entries %d to %d are missing", s, seq-1)
		return nil
	case seq < s:
		v.entryDamage(seq, DamageDuplicated, "seq %d appears twice", seq)
		return nil
	}
	h, err := walkLeaf(r.leaf, nil)
	if err != nil {
		return v.bad(r, "leaf does not decode: %v", err)
	}
	if h.seq != s {
		return v.misplaced(r, h.seq)
	}
	if h.timeNs != r.time.Int64 || kindNames[h.kind] != string(r.kind) ||
		!bytes.Equal(h.action, r.action) || !bytes.Equal(h.run, r.run) {
		return v.bad(r, "columns differ from the leaf")
	}
	lh := tlog.RecordHash(r.leaf)
	if !bytes.Equal(lh[:], r.leafHash) {
		return v.bad(r, "stored leaf hash differs from the leaf")
	}
	chain := v.chainer.sum(v.prev, r.leaf)
	if !bytes.Equal(chain[:], r.chain) {
		return v.bad(r, "chain hash does not follow from the previous entry")
	}
	front := v.front
	v.hashes = front.addFast(lh, v.hashes)
	ok, detail, err := v.treeHashes(v.hashes)
	if err != nil {
		return err
	}
	if !ok {
		return v.bad(r, "%s", detail)
	}
	if h.kind == KindCheckpoint {
		e, err := DecodeLeaf(r.leaf)
		if err != nil {
			return err
		}
		if err := v.checkpointEntry(s, &e); err != nil || v.stopped {
			return err
		}
	}
	if s > 0 && h.timeNs < v.prevTime {
		v.timeSetBack(s, time.Duration(v.prevTime-h.timeNs))
	}
	v.front, v.prev, v.next, v.prevTime = front, chain, s+1, h.timeNs
	return nil
}

// timeSetBack notes that entry seq is step earlier than its predecessor.
func (v *verifier) timeSetBack(seq int64, step time.Duration) {
	t := v.rep.TimeSetBack
	if t == nil {
		t = &TimeSetBack{FirstSeq: seq}
		v.rep.TimeSetBack = t
	}
	t.Entries++
	t.Largest = max(t.Largest, step)
}

// treeHashes reads the stored hashes of the next entry and compares them.
func (v *verifier) treeHashes(hs []tlog.Hash) (bool, string, error) {
	var idx int64
	var hash sql.RawBytes
	for _, h := range hs {
		if !v.tree.Next() {
			if err := v.tree.Err(); err != nil {
				return false, "", err
			}
			return false, fmt.Sprintf("stored tree hash %d is missing", v.treeNext), nil
		}
		if err := v.tree.Scan(&idx, &hash); err != nil {
			return false, fmt.Sprintf("stored tree hash after %d is malformed", v.treeNext), nil
		}
		if idx != v.treeNext || !bytes.Equal(hash, h[:]) {
			return false, fmt.Sprintf("stored tree hash %d differs", v.treeNext), nil
		}
		v.treeNext++
	}
	return true, "", nil
}

// bad classifies a row at the expected seq that fails a check: an inserted
// row when the next row is the genuine entry, otherwise a modification.
func (v *verifier) bad(r *row, format string, args ...any) error {
	s := v.next
	var types string
	if err := v.tx.QueryRowContext(v.ctx, `SELECT `+v.types(`typeof(seq) || typeof(time_ns) || typeof(kind) || typeof(action_id) ||
		typeof(run_id) || typeof(leaf) || typeof(leaf_hash) || typeof(chain)`, entryTypes)+` FROM entries WHERE seq = ?`, s).Scan(&types); err == nil && types != entryTypes {
		v.entryDamage(s, DamageMalformed, "row has column types %q, want %q", types, entryTypes)
		return nil
	}
	fits, err := v.nextFits(s)
	if err != nil {
		return err
	}
	if fits {
		v.entryDamage(s, DamageInserted, "the row at %d is not part of the log; the genuine entry %d follows it", s, s)
		return nil
	}
	v.entryDamage(s, DamageModified, format, args...)
	return nil
}

// nextFits reports whether the row after seq holds the genuine entry seq:
// its leaf says seq and its chain hash follows from the previous entry.
func (v *verifier) nextFits(seq int64) (bool, error) {
	var leaf, chain []byte
	err := v.tx.QueryRowContext(v.ctx, `SELECT leaf, chain FROM entries WHERE seq > ? ORDER BY seq LIMIT 1`, seq).Scan(&leaf, &chain)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, nil // a malformed next row does not fit
	}
	if leafSeq(leaf) != seq {
		return false, nil
	}
	c := ChainHash(v.prev, leaf)
	return bytes.Equal(c[:], chain), nil
}

// leafSeq reads the seq of a version 1 leaf without decoding the rest, or
// returns -1.
func leafSeq(leaf []byte) int64 {
	if len(leaf) < 9 || leaf[0] != leafVersion1 {
		return -1
	}
	n := binary.BigEndian.Uint64(leaf[1:9])
	if n > 1<<62 {
		return -1
	}
	return int64(n)
}

// misplaced classifies a well-formed leaf whose own seq t is not its row's.
func (v *verifier) misplaced(r *row, t int64) error {
	s := v.next
	if t < s {
		var orig []byte
		err := v.tx.QueryRowContext(v.ctx, `SELECT leaf FROM entries WHERE seq = ?`, t).Scan(&orig)
		if err == nil && bytes.Equal(orig, r.leaf) {
			v.entryDamage(s, DamageDuplicated, "the row at %d repeats entry %d", s, t)
			return nil
		}
		return v.bad(r, "the row at %d holds a leaf for %d", s, t)
	}
	fits, err := v.nextFits(s)
	if err != nil {
		return err
	}
	if fits && t == s+1 {
		// Is this row the genuine entry s+1, following the next row?
		var next []byte
		if err := v.tx.QueryRowContext(v.ctx, `SELECT chain FROM entries WHERE seq > ? ORDER BY seq LIMIT 1`, s).Scan(&next); err == nil && len(next) == 32 {
			var nc [32]byte
			copy(nc[:], next)
			if c := ChainHash(nc, r.leaf); bytes.Equal(c[:], r.chain) {
				v.entryDamage(s, DamageReordered, "entries %d and %d are swapped", s, s+1)
				return nil
			}
		}
	}
	if fits {
		v.entryDamage(s, DamageInserted, "the row at %d is not part of the log; the genuine entry %d follows it", s, s)
		return nil
	}
	// Does entry s appear later?
	rows, err := v.stream(`SELECT seq, leaf FROM entries WHERE seq > ? ORDER BY seq`, s)
	if err != nil {
		return err
	}
	defer rows.Close()
	var at int64
	var leaf sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&at, &leaf); err != nil {
			break
		}
		if leafSeq(leaf) == s {
			v.entryDamage(s, DamageReordered, "entry %d was moved to row %d", s, at)
			return nil
		}
	}
	v.entryDamage(s, DamageDeleted, "entries from %d on are missing (the row at %d holds entry %d)", s, s, t)
	return nil
}
