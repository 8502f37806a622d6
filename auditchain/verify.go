package auditchain

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// VerifyOptions say what to verify and what to trust.
type VerifyOptions struct {
	// Path is the database file. It is opened read-only.
	Path string

	// DB, instead of Path, is a PostgreSQL database that holds the log
	// (Options.DB). It is read in one repeatable-read, read-only
	// transaction: replicas may go on appending meanwhile.
	DB *sqldb.DB

	// Key verifies checkpoint signatures; its name is the expected origin.
	// Required: the key in the database's own directory proves nothing
	// to someone who distrusts that machine, so the caller chooses it.
	Key note.Verifier

	// Trusted are signed checkpoints kept outside the database (a copy of
	// checkpoints.log, notes a witness stored). The database must extend
	// each of them.
	Trusted []TrustedNote
}

// A TrustedNote is a signed checkpoint from outside the database. Source
// names where it came from (a file, a witness); Index is its position
// there, from 1. Reports label it "Source#Index".
type TrustedNote struct {
	Source string
	Index  int
	Note   []byte
}

func (t TrustedNote) label() string {
	if t.Index == 0 {
		return t.Source
	}
	return t.Source + "#" + strconv.Itoa(t.Index)
}

// EvidenceError: a checkpoint kept outside the database (a copy of
// checkpoints.log, a witness's notes) cannot be used — it is malformed, or
// not signed by this log's key. It says nothing about the database; the
// verification was not done.
type EvidenceError struct {
	Source string
	Index  int
	Err    error
}

func (e *EvidenceError) Error() string {
	return fmt.Sprintf("auditchain: the checkpoint file %s, note #%d, cannot be used: %v (this says nothing about the database: fix the file, or leave it out)", e.Source, e.Index, e.Err)
}

func (e *EvidenceError) Unwrap() error { return e.Err }

// ReadTrustedNotes reads a checkpoint file (one or more signed notes, as
// the log appends them) into TrustedNotes with path as their Source.
func ReadTrustedNotes(path string) ([]TrustedNote, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auditchain: read checkpoints: %w", err)
	}
	notes, err := SplitNotes(data)
	if err != nil {
		return nil, fmt.Errorf("auditchain: %s: %w", path, err)
	}
	out := make([]TrustedNote, len(notes))
	for i, n := range notes {
		out[i] = TrustedNote{Source: path, Index: i + 1, Note: n}
	}
	return out, nil
}

// A Damage is one finding of Verify.
type Damage struct {
	// Seq is the first entry the damage concerns, or -1 when it concerns
	// no entry (a checkpoint, the schema). For damage found only through a
	// checkpoint, Seq is the start of the range that checkpoint could not
	// vouch for (the size of the last checkpoint that did verify).
	Seq    int64      `json:"seq"`
	Kind   DamageKind `json:"kind"`
	Source string     `json:"source"` // "database" or a trusted note's label
	Detail string     `json:"detail"`
}

// A Fork is the evidence of a fork: a signed checkpoint that the database
// contradicts and, when the database holds one, its own signed checkpoint
// with a consistency proof from the contradicted size to it.
type Fork struct {
	Size        int64          `json:"size"`
	TrustedNote string         `json:"trusted_note"`
	Source      string         `json:"source"`
	TrustedRoot tlog.Hash      `json:"trusted_root"`
	LocalRoot   tlog.Hash      `json:"local_root"` // recomputed from the database's entries
	LocalNote   string         `json:"local_note,omitempty"`
	LocalSize   int64          `json:"local_size,omitempty"`
	Proof       tlog.TreeProof `json:"proof,omitempty"` // LocalRoot at Size is a prefix of LocalNote's tree
}

// A Report is the result of Verify.
type Report struct {
	Entries            int64    `json:"entries"`             // rows in the database
	Verified           int64    `json:"verified"`            // entries checked before the first entry damage
	Checkpoints        int      `json:"checkpoints"`         // database checkpoints that verified
	TrustedCheckpoints int      `json:"trusted_checkpoints"` // outside checkpoints that verified
	Covered            int64    `json:"covered"`             // entries vouched for by a verified checkpoint
	Uncovered          int64    `json:"uncovered"`           // Entries - Covered: not yet vouched for
	Damage             []Damage `json:"damage"`
	Fork               *Fork    `json:"fork,omitempty"`
	// TimeSetBack, when set, says entry times go backwards somewhere in
	// the verified entries: the system clock was set back while entries
	// were written. It is not damage (order is by seq, which the chain
	// fixes), but those times do not show the order of events.
	TimeSetBack *TimeSetBack `json:"time_set_back,omitempty"`
}

// TimeSetBack summarises entries whose time is earlier than the previous
// entry's.
type TimeSetBack struct {
	Entries  int64         `json:"entries"`   // entries earlier than their predecessor
	FirstSeq int64         `json:"first_seq"` // the first of them
	Largest  time.Duration `json:"largest_ns"`
}

// String explains the finding in a sentence for people.
func (t *TimeSetBack) String() string {
	n := "1 entry has a time"
	if t.Entries != 1 {
		n = fmt.Sprintf("%d entries have a time", t.Entries)
	}
	return fmt.Sprintf("%s earlier than the entry before (first at seq %d, by up to %v): the system clock was set back while the log was written; the order of events is the seq order, not the times",
		n, t.FirstSeq, t.Largest)
}

// Intact reports whether Verify found no damage.
func (r *Report) Intact() bool { return len(r.Damage) == 0 }

// First returns the finding with the lowest entry seq, or else the first
// finding, or nil when the log is intact.
func (r *Report) First() *Damage {
	var best *Damage
	for i := range r.Damage {
		d := &r.Damage[i]
		if d.Seq >= 0 && (best == nil || best.Seq < 0 || d.Seq < best.Seq) {
			best = d
		}
	}
	if best == nil && len(r.Damage) > 0 {
		best = &r.Damage[0]
	}
	return best
}

// Verify re-derives the log from its stored leaves and checks everything
// against everything: sequence numbers, each leaf's encoding and columns,
// the leaf hashes, the chain, every stored Merkle hash, every checkpoint's
// signature, origin, order and root, the checkpoint entries in the chain,
// and the trusted notes. It reads the database in one read transaction and
// streams it: memory stays O(log n) in the number of entries.
//
// Damage is reported in the Report, with the first bad seq and its kind;
// the error is for a verification that could not run (unreadable file, not
// a database, no key).
func Verify(ctx context.Context, opts VerifyOptions) (*Report, error) {
	if opts.Key == nil {
		return nil, errors.New("auditchain: verify: a verifier key is required")
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
			return nil, fmt.Errorf("auditchain: verify: %w", err)
		}
	}
	tx, err := db.BeginTx(ctx, txo)
	if err != nil {
		return nil, fmt.Errorf("auditchain: verify: %w", err)
	}
	defer tx.Rollback()
	v := &verifier{ctx: ctx, tx: tx, key: opts.Key, rep: &Report{Damage: []Damage{}}, lastTrusted: map[string]int64{}}
	if db.Engine == sqldb.Postgres {
		// A PostgreSQL connection streams one result at a time: each
		// cursor gets a transaction of its own on the same snapshot.
		if err := tx.QueryRowContext(ctx, `SELECT pg_export_snapshot()`).Scan(&v.snapshot); err != nil {
			return nil, fmt.Errorf("auditchain: verify: %w", err)
		}
		v.db, v.txo = db, txo
		defer func() {
			for _, s := range v.streams {
				s.Rollback()
			}
		}()
	}
	if err := v.run(opts.Trusted); err != nil {
		return nil, fmt.Errorf("auditchain: verify %s: %w", name, err)
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
		return nil, fmt.Errorf("auditchain: verify: odd snapshot id %q", v.snapshot)
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

// checkpointEntry checks a checkpoint entry against the tree and the
// stored checkpoints.
func (v *verifier) checkpointEntry(seq int64, e *Entry) error {
	var rec checkpointRecord
	err := e.Decode(&rec)
	size, root, sum := rec.Size, rec.Root[:], rec.NoteSHA256[:]
	if err == nil && size > seq {
		// The entry was written right after the checkpoint of its size:
		// it now sits earlier, so entries before it were removed and the
		// rest renumbered (and, to get this far, rewritten with their
		// chain). Only the span since the last checkpoint that verified
		// can be blamed.
		v.entryDamage(v.lastGood, DamageDeleted, "the checkpoint entry now at seq %d records the signed checkpoint of size %d: entries after seq %d (the last point a signed checkpoint vouches for) were removed (%d fewer) and the later ones renumbered%s",
			seq, size, v.lastGood, size-seq, v.keptNote(size))
		return nil
	}
	if err != nil || size <= 0 {
		v.entryDamage(seq, DamageModified, "checkpoint entry %d has malformed fields", seq)
		return nil
	}
	got, err := tlog.TreeHash(size, dbHashReader{v.ctx, v.tx})
	if err != nil || !bytes.Equal(got[:], root) {
		v.entryDamage(v.lastGood, DamageModified, "checkpoint entry %d records a root the entries do not give at size %d: entries after seq %d (the last point a signed checkpoint vouches for) were changed%s",
			seq, size, v.lastGood, v.keptNote(size))
		return nil
	}
	rows, err := v.tx.QueryContext(v.ctx, `SELECT note FROM checkpoints WHERE size = ?`, size)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var msg []byte
		if rows.Scan(&msg) == nil {
			if s := sha256.Sum256(msg); bytes.Equal(s[:], sum) {
				return nil
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Not under its size: a row whose size column was edited is reported
	// as malformed when the scan reaches it; only a missing note is a
	// deleted checkpoint. This full scan runs only on damage.
	all, err := v.tx.QueryContext(v.ctx, `SELECT note FROM checkpoints`)
	if err != nil {
		return err
	}
	defer all.Close()
	for all.Next() {
		var msg []byte
		if all.Scan(&msg) == nil {
			if s := sha256.Sum256(msg); bytes.Equal(s[:], sum) {
				return nil
			}
		}
	}
	if err := all.Err(); err != nil {
		return err
	}
	v.damage(-1, DamageCheckpointDeleted, "database",
		"the checkpoint of size %d recorded by entry %d is not in the checkpoints table", size, seq)
	return nil
}

// keptNote names the signed checkpoints of size that the database or the
// files kept outside hold, for a damage report: the evidence it
// contradicts.
func (v *verifier) keptNote(size int64) string {
	var where []string
	var n int
	if v.tx.QueryRowContext(v.ctx, `SELECT count(*) FROM checkpoints WHERE size = ?`, size).Scan(&n) == nil && n > 0 {
		where = append(where, "the database")
	}
	for _, t := range v.trusted {
		if t.Size == size {
			where = append(where, t.label)
		}
	}
	if len(where) == 0 {
		return ""
	}
	return fmt.Sprintf("; the signed checkpoint of size %d is in %s", size, strings.Join(where, " and "))
}

// checkpointsAt verifies the database and trusted checkpoints of the given
// size, now that the scan has reached it.
func (v *verifier) checkpointsAt(size int64) error {
	var root tlog.Hash
	rooted := false
	for {
		c, err := v.peekCheckpoint()
		if err != nil {
			return err
		}
		if c == nil || c.Size > size {
			break
		}
		if !rooted {
			root, rooted = v.front.root(), true
		}
		v.ckptPending = nil
		v.dbCheckpoint(c, size, root)
	}
	if len(v.trusted) > 0 && v.trusted[0].Size <= size && !rooted {
		root = v.front.root()
	}
	for len(v.trusted) > 0 && v.trusted[0].Size <= size {
		t := v.trusted[0]
		v.trusted = v.trusted[1:]
		if t.Size < size {
			continue // cannot happen: sizes are visited in order
		}
		if t.Root != root {
			v.fork(t.Checkpoint, t.label, v.lastTrusted[t.source], t.note, root)
			continue
		}
		v.rep.TrustedCheckpoints++
		v.lastTrusted[t.source] = size
		v.covered(size)
	}
	return nil
}

func (v *verifier) covered(size int64) {
	v.rep.Covered = max(v.rep.Covered, size)
	v.lastGood = max(v.lastGood, size)
}

// peekCheckpoint returns the next stored checkpoint without consuming it.
// A row that is not well formed is reported and skipped.
func (v *verifier) peekCheckpoint() (*StoredCheckpoint, error) {
	for v.ckptPending == nil {
		if !v.ckpts.Next() {
			return nil, v.ckpts.Err()
		}
		var c StoredCheckpoint
		var size sql.NullInt64
		var types string
		if err := v.ckpts.Scan(&c.ID, &size, &c.Note, &types); err != nil || types != "integerblob" {
			v.damage(-1, DamageMalformed, "database", "checkpoint row %d has column types %q", c.ID, types)
			continue
		}
		c.Size = size.Int64
		v.ckptPending = &c
	}
	return v.ckptPending, nil
}

func (v *verifier) dbCheckpoint(sc *StoredCheckpoint, size int64, root tlog.Hash) {
	c, err := OpenCheckpoint(sc.Note, v.key)
	if err != nil {
		var ce *CheckpointError
		kind := DamageMalformed
		if errors.As(err, &ce) {
			kind = ce.Problem.damage()
		}
		v.damage(-1, kind, "database", "checkpoint %d: %v", sc.ID, err)
		return
	}
	if c.Size != sc.Size {
		v.damage(-1, DamageMalformed, "database", "checkpoint %d: size column %d, note says %d", sc.ID, sc.Size, c.Size)
		return
	}
	if c.Size < v.lastDB.Size || (c.Size == v.lastDB.Size && c.Size > 0) {
		var n int
		_ = v.tx.QueryRowContext(v.ctx, `SELECT count(*) FROM checkpoints WHERE note = ? AND id < ?`, sc.Note, sc.ID).Scan(&n)
		if n > 0 {
			v.damage(-1, DamageReplayed, "database", "checkpoint %d repeats an earlier checkpoint of size %d", sc.ID, c.Size)
		} else {
			v.damage(-1, DamageCheckpointOrder, "database", "checkpoint %d has size %d after a checkpoint of size %d", sc.ID, c.Size, v.lastDB.Size)
		}
		return
	}
	if c.Size != size {
		return // unreachable: peeked only when c.Size <= size, and sizes rise
	}
	if c.Root != root {
		v.fork(c, "database", v.lastGood, sc.Note, root)
		return
	}
	v.lastDB = c
	v.rep.Checkpoints++
	v.covered(size)
	if f := v.rep.Fork; f != nil && f.LocalNote == "" && size >= f.Size {
		f.LocalNote, f.LocalSize = string(sc.Note), size
	}
}

// fork records a signed checkpoint that contradicts the recomputed tree.
//
// The damage's seq, from, is where the contradicted history is last known
// to agree with the database: for a trusted checkpoint, the last checkpoint
// from the same source that matched (the database's own checkpoints may be
// re-signed with a stolen key); for a checkpoint in the database, the last
// checkpoint of any source that matched.
func (v *verifier) fork(c Checkpoint, source string, from int64, msg []byte, root tlog.Hash) {
	where := ""
	if from < c.Size {
		where = fmt.Sprintf(" (they differ somewhere in %d..%d)", from, c.Size-1)
	}
	v.damage(from, DamageFork, source,
		"a signed checkpoint of size %d has root %s; the database's entries give %s%s",
		c.Size, c.Root, root, where)
	if v.rep.Fork == nil {
		v.rep.Fork = &Fork{Size: c.Size, TrustedNote: string(msg), Source: source, TrustedRoot: c.Root, LocalRoot: root}
	}
}

// finish handles what lies beyond the last entry.
func (v *verifier) finish() error {
	n := v.next
	if !v.stopped {
		// Stored hashes beyond the last entry remember entries that are gone.
		if v.tree.Next() {
			v.damage(n, DamageTruncated, "database", "the stored tree holds hashes for entries after the last one (%d)", n-1)
		}
		for {
			c, err := v.peekCheckpoint()
			if err != nil {
				return err
			}
			if c == nil {
				break
			}
			v.ckptPending = nil
			if oc, err := OpenCheckpoint(c.Note, v.key); err != nil {
				v.dbCheckpoint(c, n, v.front.root()) // reports the problem
			} else if oc.Size > n {
				v.damage(n, DamageTruncated, "database", "checkpoint %d vouches for %d entries; the database holds %d", c.ID, oc.Size, n)
			} else {
				v.dbCheckpoint(c, n, v.front.root())
			}
		}
		truncated := slices.ContainsFunc(v.rep.Damage, func(d Damage) bool { return d.Kind == DamageTruncated })
		// The database's own evidence (truncated) already says so; else
		// the first checkpoint kept outside does.
		if len(v.trusted) > 0 && !truncated {
			t := v.trusted[0]
			v.damage(n, DamageRolledBack, t.label, "a checkpoint kept outside vouches for %d entries; the database holds %d", t.Size, n)
		}
	}
	v.rep.Uncovered = v.rep.Entries - v.rep.Covered
	if f := v.rep.Fork; f != nil && f.LocalNote != "" && f.LocalSize > f.Size {
		p, err := tlog.ProveTree(f.LocalSize, f.Size, dbHashReader{v.ctx, v.tx})
		if err == nil {
			f.Proof = p
		}
	}
	return nil
}
