package auditchain

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// RFC 6962 compatibility: the Certificate Transparency reference test
// vectors (leaves and the root of each prefix of the tree).
var ctLeaves = []string{
	"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f",
}

var ctRoots = []string{
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

// memHashes is a stored-hash array for tlog.
type memHashes []tlog.Hash

func (m memHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(m)) {
			return nil, errors.New("no such hash")
		}
		out[i] = m[x]
	}
	return out, nil
}

func TestRFC6962Vectors(t *testing.T) {
	var f frontier
	var stored memHashes
	if got := f.root(); hex.EncodeToString(got[:]) != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("empty root %x", got)
	}
	for i, l := range ctLeaves {
		leaf, _ := hex.DecodeString(l)
		hs, err := f.add(tlog.RecordHash(leaf))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		want := ctRoots[i]
		if got := f.root(); hex.EncodeToString(got[:]) != want {
			t.Errorf("frontier root of %d leaves = %x, want %s", i+1, got, want)
		}
		th, err := tlog.TreeHash(int64(i+1), stored)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(th[:]) != want {
			t.Errorf("tlog.TreeHash of %d leaves = %x, want %s", i+1, th, want)
		}
	}
}

// The writer's frontier must agree with tlog's own stored hashes, roots
// and proofs at every size.
func TestFrontierMatchesTlog(t *testing.T) {
	var f frontier
	var stored memHashes
	for n := int64(0); n < 300; n++ {
		leaf := []byte{byte(n), byte(n >> 8)}
		want, err := tlog.StoredHashes(n, leaf, stored)
		if err != nil {
			t.Fatal(err)
		}
		fast := f
		got, err := f.add(tlog.RecordHash(leaf))
		if err != nil {
			t.Fatal(err)
		}
		if gotFast := fast.addFast(tlog.RecordHash(leaf), nil); !slices.Equal(gotFast, got) || fast != f {
			t.Fatalf("record %d: addFast differs from add", n)
		}
		if len(got) != len(want) {
			t.Fatalf("record %d: %d stored hashes, want %d", n, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("record %d: stored hash %d differs", n, i)
			}
		}
		stored = append(stored, got...)
		th, _ := tlog.TreeHash(n+1, stored)
		if f.root() != th {
			t.Fatalf("size %d: frontier root differs from tlog.TreeHash", n+1)
		}
	}
}

func TestProofs(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = -1
	buildLog(t, o, 37)
	ctx := context.Background()
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, size := range []int64{1, 2, 7, 8, 9, 36, 37} {
		root, err := r.TreeHash(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		for seq := int64(0); seq < size; seq++ {
			p, err := r.ProveInclusion(ctx, seq, size)
			if err != nil {
				t.Fatalf("ProveInclusion(%d, %d): %v", seq, size, err)
			}
			if p.Root != root {
				t.Fatalf("inclusion root differs from TreeHash(%d)", size)
			}
		}
		for old := int64(0); old <= size; old++ {
			p, err := r.ProveConsistency(ctx, old, size)
			if err != nil {
				t.Fatalf("ProveConsistency(%d, %d): %v", old, size, err)
			}
			if p.NewRoot != root {
				t.Fatalf("consistency root differs")
			}
		}
	}
	for _, tc := range []struct{ seq, size int64 }{{-1, 5}, {5, 5}, {0, 38}} {
		if _, err := r.ProveInclusion(ctx, tc.seq, tc.size); !errors.Is(err, ErrNotFound) {
			t.Errorf("ProveInclusion(%d, %d): %v, want ErrNotFound", tc.seq, tc.size, err)
		}
	}
	if _, err := r.ProveConsistency(ctx, 6, 5); !errors.Is(err, ErrNotFound) {
		t.Errorf("ProveConsistency(6, 5): %v, want ErrNotFound", err)
	}
}

// A proof with any hash changed, a hash dropped or added, or checked
// against another leaf or root must fail.
func TestCorruptedProofsFail(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = -1
	buildLog(t, o, 37)
	ctx := context.Background()
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	inc, err := r.ProveInclusion(ctx, 13, 37)
	if err != nil {
		t.Fatal(err)
	}
	con, err := r.ProveConsistency(ctx, 13, 37)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(h tlog.Hash) tlog.Hash { h[31] ^= 1; return h }
	incCases := map[string]func(p InclusionProof) InclusionProof{
		"hash flipped": func(p InclusionProof) InclusionProof {
			p.Proof = cloneProof(p.Proof)
			p.Proof[1] = flip(p.Proof[1])
			return p
		},
		"hash dropped": func(p InclusionProof) InclusionProof { p.Proof = p.Proof[:len(p.Proof)-1]; return p },
		"hash added":   func(p InclusionProof) InclusionProof { p.Proof = append(cloneProof(p.Proof), tlog.Hash{}); return p },
		"other leaf":   func(p InclusionProof) InclusionProof { p.LeafHash = flip(p.LeafHash); return p },
		"other index":  func(p InclusionProof) InclusionProof { p.Seq++; return p },
		"other root":   func(p InclusionProof) InclusionProof { p.Root = flip(p.Root); return p },
		"other size":   func(p InclusionProof) InclusionProof { p.Size = 20; return p },
	}
	for name, f := range incCases {
		if err := f(inc).Check(); err == nil {
			t.Errorf("inclusion proof, %s: Check succeeded", name)
		}
	}
	conCases := map[string]func(p ConsistencyProof) ConsistencyProof{
		"hash flipped": func(p ConsistencyProof) ConsistencyProof {
			p.Proof = cloneTree(p.Proof)
			p.Proof[0] = flip(p.Proof[0])
			return p
		},
		"hash dropped": func(p ConsistencyProof) ConsistencyProof { p.Proof = p.Proof[1:]; return p },
		"old root":     func(p ConsistencyProof) ConsistencyProof { p.OldRoot = flip(p.OldRoot); return p },
		"new root":     func(p ConsistencyProof) ConsistencyProof { p.NewRoot = flip(p.NewRoot); return p },
		"old size":     func(p ConsistencyProof) ConsistencyProof { p.Old++; return p },
		"empty proof":  func(p ConsistencyProof) ConsistencyProof { p.Proof = nil; return p },
	}
	for name, f := range conCases {
		if err := f(con).Check(); err == nil {
			t.Errorf("consistency proof, %s: Check succeeded", name)
		}
	}
	if err := inc.Check(); err != nil {
		t.Errorf("untouched inclusion proof: %v", err)
	}
	if err := con.Check(); err != nil {
		t.Errorf("untouched consistency proof: %v", err)
	}
	_ = bytes.Equal
}

func cloneProof(p tlog.RecordProof) tlog.RecordProof { return append(tlog.RecordProof(nil), p...) }
func cloneTree(p tlog.TreeProof) tlog.TreeProof      { return append(tlog.TreeProof(nil), p...) }
