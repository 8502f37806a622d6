package auditchain

import (
	"crypto/sha256"
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// chainPrefix is the domain separator of the hash chain.
const chainPrefix = "airlock/chain/v1"

// chainGenesis is chain_{-1}: the chain value before the first entry.
var chainGenesis [32]byte

// ChainHash returns chain_i = SHA-256("airlock/chain/v1" ‖ chain_{i-1} ‖ leaf_i).
// The prefix and the previous value have fixed lengths, so the leaf needs
// no length prefix.
func ChainHash(prev [32]byte, leaf []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(chainPrefix))
	h.Write(prev[:])
	h.Write(leaf)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// chainHasher computes ChainHash with a reusable buffer.
type chainHasher struct{ buf []byte }

func (c *chainHasher) sum(prev [32]byte, leaf []byte) [32]byte {
	c.buf = append(append(append(c.buf[:0], chainPrefix...), prev[:]...), leaf...)
	return sha256.Sum256(c.buf)
}

// frontier holds the roots of the complete subtrees on the right edge of
// an RFC 6962 tree of size n: for each bit L set in n, the hash of the
// subtree of 2^L leaves at level L. It is all that tlog.StoredHashes needs
// to extend the tree, so writer and verifier run in O(log n) memory.
type frontier struct {
	n     int64
	nodes [64]tlog.Hash // nodes[L] valid when bit L of n is set
}

// ReadHashes serves the stored hashes tlog asks for when appending record
// n: always complete subtrees on the frontier.
func (f *frontier) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		level, k := tlog.SplitStoredHashIndex(idx)
		if level >= 64 || f.n>>uint(level)&1 == 0 || k != f.n>>uint(level)-1 {
			return nil, fmt.Errorf("audit log: tree hash %d (level %d, %d) not on the frontier of size %d", idx, level, k, f.n)
		}
		out[i] = f.nodes[level]
	}
	return out, nil
}

// add appends a leaf with record hash h and returns the hashes to store at
// tlog.StoredHashIndex(0, n) onwards, as tlog.StoredHashesForRecordHash
// defines them.
func (f *frontier) add(h tlog.Hash) ([]tlog.Hash, error) {
	hs, err := tlog.StoredHashesForRecordHash(f.n, h, f)
	if err != nil {
		return nil, err
	}
	f.push(hs)
	return hs, nil
}

// addFast is add without tlog's allocations, for the verifier's hot loop:
// record n completes one subtree per trailing one bit of n, each the node
// hash of the frontier subtree on its left and the one just completed.
// TestFrontierMatchesTlog checks it against tlog.StoredHashes.
func (f *frontier) addFast(h tlog.Hash, out []tlog.Hash) []tlog.Hash {
	out = append(out[:0], h)
	for l := 0; f.n>>uint(l)&1 == 1; l++ {
		h = tlog.NodeHash(f.nodes[l], h)
		out = append(out, h)
	}
	f.push(out)
	return out
}

// push updates the frontier with the stored hashes of record n: hs[L] is
// the subtree of level L that the new record completes.
func (f *frontier) push(hs []tlog.Hash) {
	n1 := f.n + 1
	// The new frontier's lowest set bit is the highest completed level.
	top := bits.TrailingZeros64(uint64(n1))
	f.nodes[top] = hs[len(hs)-1]
	f.n = n1
}

// root returns the RFC 6962 root of the tree of size n (the empty tree
// hashes to SHA-256 of nothing, RFC 6962 §2.1).
func (f *frontier) root() tlog.Hash {
	if f.n == 0 {
		return tlog.Hash(sha256.Sum256(nil))
	}
	var h tlog.Hash
	first := true
	for l := 0; l < 64; l++ {
		if f.n>>uint(l)&1 == 0 {
			continue
		}
		if first {
			h, first = f.nodes[l], false
		} else {
			h = tlog.NodeHash(f.nodes[l], h)
		}
	}
	return h
}
