package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/note"
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
size (one you kept, say from a witness). --checkpoint may be a file of many
notes (checkpoints.log, or what a witness appended): the note of the
proof's tree size signed by the key (the last one, if several) is used, and
named. Exit 0: the proof holds; 1: it does not; 2: it could not be checked;
3: the key signed none of the notes (wrong key).`

// proofCheckpoint is the signed checkpoint a proof is checked against:
// the one in the proof file, or the note of --checkpoint FILE of the
// proof's tree size, signed by key (a file a witness keeps holds many:
// the last of that size is used, and said). Else the exit code.
func proofCheckpoint(p proofFile, key note.Verifier, file string, stdout, stderr io.Writer) (auditchain.Checkpoint, int) {
	fail := func(code int, format string, a ...any) (auditchain.Checkpoint, int) {
		fmt.Fprintf(stderr, "airlock audit check-proof: "+format+"\n", a...)
		return auditchain.Checkpoint{}, code
	}
	size := p.Size
	if p.Old != nil {
		size = p.New
	}
	source := "the proof file's checkpoint"
	notes := [][]byte{[]byte(p.Checkpoint)}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fail(exitFailed, "%v", err)
		}
		if notes, err = auditchain.SplitNotes(data); err != nil {
			return fail(exitFailed, "%s is not a file of signed checkpoints: %v", file, err)
		}
		source = file
	} else if p.Checkpoint == "" {
		return fail(exitFailed, "no signed checkpoint to check against: pass --checkpoint FILE (a note of tree size %d, or a file of notes that holds one)", size)
	}
	c, at, err := auditchain.PickCheckpoint(notes, key, size, source)
	var mm *auditchain.KeyMismatchError
	var ns *auditchain.NoCheckpointOfSizeError
	switch {
	case errors.As(err, &mm):
		return fail(exitWrongKey, "%v", mm)
	case file == "" && errors.As(err, &ns):
		// The proof file's own checkpoint is for another tree: the file
		// contradicts itself.
		fmt.Fprintf(stdout, "DOES NOT HOLD: the proof is for a tree of %d entries, the checkpoint in the proof file for %d\n", size, ns.Sizes[0])
		return auditchain.Checkpoint{}, exitDamaged
	case err != nil:
		return fail(exitFailed, "%s: %v", source, err)
	}
	if file != "" {
		fmt.Fprintf(stdout, "using note #%d of %s (%d in the file): tree size %d, origin %s\n", at, file, len(notes), c.Size, c.Origin)
	}
	return c, exitOK
}

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
	// c is of the proof's tree size: CheckInclusion and CheckConsistency
	// check that again.
	c, code := proofCheckpoint(p, key, *ckptFile, stdout, stderr)
	if code != exitOK {
		return code
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
		return holds(fmt.Sprintf("entry %d (leaf hash %s) is in the log", *p.Seq, leaf), c.CheckInclusion(auditchain.InclusionProof{Seq: *p.Seq, Size: p.Size, LeafHash: leaf, Proof: proof}))
	case p.Old != nil:
		old, err := tlog.ParseHash(p.OldRoot)
		if err != nil {
			return fail("old_root: %v", err)
		}
		return holds(fmt.Sprintf("the tree of %d (root %s) is a prefix of the tree of %d", *p.Old, old, p.New), c.CheckConsistency(auditchain.ConsistencyProof{Old: *p.Old, New: p.New, OldRoot: old, Proof: proof}))
	}
	return fail("%s holds neither an inclusion proof (seq) nor a consistency proof (old)", pos[0])
}
