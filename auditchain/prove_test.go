package auditchain

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// ProveSigned proves under the first signed checkpoint that covers the
// entry, unsigned without a key, and refuses a stored tree that no longer
// gives the signed root.
func TestProveSigned(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 5
	key := buildLog(t, o, 12)
	ctx := context.Background()
	prove := func(seq int64, withKey bool) (SignedInclusion, error) {
		t.Helper()
		r, err := OpenReader(ctx, o.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if !withKey {
			return r.ProveSigned(ctx, seq, nil)
		}
		return r.ProveSigned(ctx, seq, key)
	}

	p, err := prove(3, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenCheckpoint(p.Checkpoint, key)
	if err != nil {
		t.Fatalf("the proof's checkpoint: %v", err)
	}
	if c.Size != p.Size || c.Root != p.Root || p.Size <= 3 {
		t.Errorf("proof of 3 in the tree of %d (root %s), under the checkpoint of %d (root %s)", p.Size, p.Root, c.Size, c.Root)
	}
	if err := p.Check(); err != nil {
		t.Error(err)
	}

	p, err = prove(3, false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	size, err := r.Size(ctx)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if p.Checkpoint != nil || p.Size != size {
		t.Errorf("without a key: size %d, checkpoint %q; want the whole tree (%d), unsigned", p.Size, p.Checkpoint, size)
	}

	if _, err := prove(99, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("entry 99 of 12: %v, want ErrNotFound", err)
	}

	signed, err := prove(0, true)
	if err != nil {
		t.Fatal(err)
	}
	// The last leaf hash of the signed tree is in the proof of entry 0 as
	// stored and in the root: changing it changes the root without
	// breaking the proof's own arithmetic.
	tamper(t, o.Path, func(db *sql.DB) {
		mustExec(t, db, `UPDATE tree_hashes SET hash = zeroblob(32) WHERE idx = ?`, tlog.StoredHashIndex(0, signed.Size-1))
	})
	_, err = prove(0, true)
	var mismatch *CheckpointMismatchError
	if !errors.As(err, &mismatch) || mismatch.Size != signed.Size || !errors.Is(err, ErrInconsistent) {
		t.Errorf("after a stored hash changed: %v, want a CheckpointMismatchError of size %d", err, signed.Size)
	}
}

func TestReportFirstUnvouched(t *testing.T) {
	tests := []struct {
		name   string
		damage []Damage
		want   int64
	}{
		{"intact", nil, math.MaxInt64},
		{"entries", []Damage{{Seq: 7, Kind: DamageModified}, {Seq: 4, Kind: DamageDeleted}}, 4},
		{"the log as a whole", []Damage{{Seq: -1, Kind: DamageSchema}}, 0},
		{"an entry and the log as a whole", []Damage{{Seq: -1, Kind: DamageSchema}, {Seq: 9, Kind: DamageModified}}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Damage: tt.damage}
			if got := r.FirstUnvouched(); got != tt.want {
				t.Errorf("FirstUnvouched() = %d, want %d", got, tt.want)
			}
		})
	}
}

// A checkpoint checks a proof offline against its own size and root: the
// proof's claimed root counts for nothing, a proof for another size is
// refused, and the trivial consistency of a tree with itself holds.
func TestCheckpointChecksProofs(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = -1
	buildLog(t, o, 20)
	ctx := context.Background()
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	root, err := r.TreeHash(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	c := Checkpoint{Origin: "test", Size: 20, Root: root}
	inc, err := r.ProveInclusion(ctx, 7, 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckInclusion(inc); err != nil {
		t.Errorf("CheckInclusion of a good proof: %v", err)
	}
	forged := inc
	forged.Root[0] ^= 1 // the proof's own root is not what is checked
	if err := c.CheckInclusion(forged); err != nil {
		t.Errorf("CheckInclusion took the proof's root instead of the checkpoint's: %v", err)
	}
	other := c
	other.Root[0] ^= 1
	if err := other.CheckInclusion(inc); err == nil {
		t.Error("CheckInclusion held under another root")
	}
	small, err := r.ProveInclusion(ctx, 7, 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckInclusion(small); !errors.Is(err, errBadProof) {
		t.Errorf("CheckInclusion of a proof for another size: %v", err)
	}
	con, err := r.ProveConsistency(ctx, 9, 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConsistency(con); err != nil {
		t.Errorf("CheckConsistency of a good proof: %v", err)
	}
	if err := other.CheckConsistency(con); err == nil {
		t.Error("CheckConsistency held under another root")
	}
	// Every tree extends the empty one (audit consistency 0 N writes
	// this proof), and no tree extends an empty tree of another root.
	if err := c.CheckConsistency(ConsistencyProof{Old: 0, New: 20, OldRoot: emptyRoot}); err != nil {
		t.Errorf("a tree extends the empty tree: %v", err)
	}
	if err := c.CheckConsistency(ConsistencyProof{Old: 0, New: 20, OldRoot: root}); err == nil {
		t.Error("CheckConsistency held from an empty tree with another root")
	}
	if err := c.CheckConsistency(ConsistencyProof{Old: 20, New: 20, OldRoot: root}); err != nil {
		t.Errorf("a tree is consistent with itself: %v", err)
	}
	short, err := r.ProveConsistency(ctx, 9, 15)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConsistency(short); !errors.Is(err, errBadProof) {
		t.Errorf("CheckConsistency of a proof for another size: %v", err)
	}
}
