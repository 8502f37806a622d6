package auditchain

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// A SignedInclusion is an inclusion proof under a signed checkpoint.
type SignedInclusion struct {
	InclusionProof
	// Checkpoint is the signed note of the proof's tree: the first stored
	// checkpoint that covers the entry and verifies with the key. nil:
	// none does (or no key was given); the proof is then in the whole
	// stored tree, and its root is signed by nobody.
	Checkpoint []byte
}

// A CheckpointMismatchError means the stored tree gives another root at
// Size than the signed checkpoint of that size: the database changed
// after the checkpoint was signed. Run Verify. It is ErrInconsistent.
type CheckpointMismatchError struct {
	Size int64
}

func (e *CheckpointMismatchError) Error() string {
	return fmt.Sprintf("audit log: the stored tree disagrees with the signed checkpoint of size %d", e.Size)
}

func (e *CheckpointMismatchError) Unwrap() error { return ErrInconsistent }

// ProveSigned proves that entry seq is in the tree of the first stored
// checkpoint that covers it and verifies with key, and that the stored
// tree gives that checkpoint's root (else *CheckpointMismatchError). With
// key nil, or no such checkpoint, the proof is in the whole stored tree,
// unsigned. An entry outside the tree is ErrNotFound.
func (r *Reader) ProveSigned(ctx context.Context, seq int64, key note.Verifier) (SignedInclusion, error) {
	var signed []byte
	var size int64
	var root tlog.Hash
	if key != nil {
		cps, err := r.Checkpoints(ctx)
		if err != nil {
			return SignedInclusion{}, err
		}
		for _, sc := range cps {
			if c, err := OpenCheckpoint(sc.Note, key); err == nil && c.Size > seq {
				signed, size, root = sc.Note, c.Size, c.Root
				break
			}
		}
	}
	if signed == nil {
		var err error
		if size, err = r.Size(ctx); err != nil {
			return SignedInclusion{}, err
		}
	}
	p, err := r.ProveInclusion(ctx, seq, size)
	if err != nil {
		return SignedInclusion{}, err
	}
	if signed != nil && p.Root != root {
		return SignedInclusion{}, &CheckpointMismatchError{Size: size}
	}
	return SignedInclusion{InclusionProof: p, Checkpoint: signed}, nil
}
