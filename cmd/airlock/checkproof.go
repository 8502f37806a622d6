package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/airlockgw/airlock/auditchain"
)

// proofFile is what audit prove --json and audit consistency --json
// write: one of the two proofs, with the hashes in base64.
type proofFile struct {
	// Inclusion (audit prove): entry Seq with leaf hash LeafHash is in the
	// tree of Size with Root; Checkpoint, when one covers it, is the
	// signed note of that tree.
	Seq        *int64 `json:"seq"`
	Size       int64  `json:"size"`
	LeafHash   string `json:"leaf_hash"`
	Root       string `json:"root"`
	Checkpoint string `json:"checkpoint"`
	// Consistency (audit consistency): the tree of Old (OldRoot) is a
	// prefix of the tree of New (NewRoot).
	Old     *int64   `json:"old"`
	New     int64    `json:"new"`
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root"`
	Proof   []string `json:"proof"`
}

const checkProofUsage = `airlock audit check-proof --key FILE [--checkpoint FILE] PROOF.json

Checks a proof offline, against a signed checkpoint and nothing else: no
database is opened. PROOF.json is what airlock audit prove --json or airlock
audit consistency --json wrote.

  inclusion    the entry's leaf hash, with the audit path, gives the root of
               the checkpoint that covers it
  consistency  the older tree's root is a prefix of the newer tree's

The root must be in a checkpoint signed by the key in --key (a copy kept
away from the gateway): for an inclusion proof, the checkpoint in the file
or --checkpoint; for a consistency proof, --checkpoint, a note of the newer
size (one you kept, say from a witness). Exit 0: the proof holds; 1: it does
not; 2: it could not be checked.`

func auditCheckProof(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock audit check-proof", checkProofUsage, stderr)
	keyFile := fs.String("key", "", "checkpoint verifier key `FILE` (required)")
	ckptFile := fs.String("checkpoint", "", "a signed checkpoint `FILE` (a note you kept) for the proof's tree")
	pos, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		if code != 0 {
			code = exitFailed
		}
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "airlock audit check-proof: "+format+"\n", a...)
		return exitFailed
	}
	if len(pos) != 1 || *keyFile == "" {
		return fail("give --key FILE and the proof file (see --help)")
	}
	key, err := auditchain.ReadVerifierKey(*keyFile)
	if err != nil {
		return fail("%v", err)
	}
	b, err := os.ReadFile(pos[0])
	if err != nil {
		return fail("%v", err)
	}
	var p proofFile
	if err := json.Unmarshal(b, &p); err != nil {
		return fail("%s is not a proof airlock audit prove --json or consistency --json wrote: %v", pos[0], err)
	}
	proof := make([]tlog.Hash, len(p.Proof))
	for i, s := range p.Proof {
		if proof[i], err = tlog.ParseHash(s); err != nil {
			return fail("proof hash %d: %v", i, err)
		}
	}
	note := []byte(p.Checkpoint)
	if *ckptFile != "" {
		if note, err = os.ReadFile(*ckptFile); err != nil {
			return fail("%v", err)
		}
	}
	if len(note) == 0 {
		return fail("no signed checkpoint to check against: pass --checkpoint FILE")
	}
	c, err := auditchain.OpenCheckpoint(note, key)
	if err != nil {
		return fail("the checkpoint does not verify with the key: %v", err)
	}
	holds := func(what string, err error) int {
		if err != nil {
			fmt.Fprintf(stdout, "DOES NOT HOLD: %s: %v\n", what, err)
			return exitDamaged
		}
		fmt.Fprintf(stdout, "holds: %s, under the checkpoint of %s signed for %s\n", what, count(int(c.Size), "entry"), c.Origin)
		return exitOK
	}
	switch {
	case p.Seq != nil:
		leaf, err := tlog.ParseHash(p.LeafHash)
		if err != nil {
			return fail("leaf_hash: %v", err)
		}
		if p.Size != c.Size {
			return holds(fmt.Sprintf("entry %d", *p.Seq), fmt.Errorf("the proof is for a tree of %d entries, the checkpoint for %d", p.Size, c.Size))
		}
		return holds(fmt.Sprintf("entry %d (leaf hash %s) is in the log", *p.Seq, leaf), c.CheckInclusion(auditchain.InclusionProof{Seq: *p.Seq, Size: p.Size, LeafHash: leaf, Proof: proof}))
	case p.Old != nil:
		old, err := tlog.ParseHash(p.OldRoot)
		if err != nil {
			return fail("old_root: %v", err)
		}
		if p.New != c.Size {
			return holds(fmt.Sprintf("the tree of %d is a prefix of the tree of %d", *p.Old, p.New), fmt.Errorf("the checkpoint is for a tree of %d entries, not %d: pass --checkpoint with a note of size %d", c.Size, p.New, p.New))
		}
		return holds(fmt.Sprintf("the tree of %d (root %s) is a prefix of the tree of %d", *p.Old, old, p.New), c.CheckConsistency(auditchain.ConsistencyProof{Old: *p.Old, New: p.New, OldRoot: old, Proof: proof}))
	}
	return fail("%s holds neither an inclusion proof (seq) nor a consistency proof (old)", pos[0])
}
