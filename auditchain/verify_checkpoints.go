package auditchain

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

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
