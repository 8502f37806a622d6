package auditchain

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// A verifier key that signed none of a log's checkpoints is a question of
// the key, not of the log: "this key did not sign this log" is a verdict of
// its own, distinct from damage, so that a wrong --key is not reported as
// every checkpoint being forged.

// KeyMismatchError reports that the verifier key signed none of the
// signed notes it was checked against (the database's checkpoints, or the
// notes of a checkpoint file): they name another origin, or the same
// origin with another key. Either it is not this log's key, or every
// checkpoint was re-signed with another one.
type KeyMismatchError struct {
	// KeyOrigin and KeyHash are the verifier key's name (the origin it
	// signs for) and its key hash.
	KeyOrigin string
	KeyHash   uint32
	// LogOrigins are the origins the notes give (usually one);
	// LogKeyHashes the key hashes of their signatures.
	LogOrigins   []string
	LogKeyHashes []uint32
	// Notes is how many notes were checked; Source says where they were.
	Notes  int
	Source string
}

func (e *KeyMismatchError) Error() string {
	origins := strings.Join(e.LogOrigins, ", ")
	if origins == "" {
		origins = "none readable"
	}
	hashes := make([]string, len(e.LogKeyHashes))
	for i, h := range e.LogKeyHashes {
		hashes[i] = fmt.Sprintf("%08x", h)
	}
	if slices.Contains(e.LogOrigins, e.KeyOrigin) {
		return fmt.Sprintf("this key (origin %s, key hash %08x) did not sign this log: %s in %s are for origin %s but signed by key hash %s; "+
			"either the key is not the one this log was signed with, or every checkpoint was re-signed with another key: pass the verifier key you kept for this log with --key",
			e.KeyOrigin, e.KeyHash, countNotes(e.Notes), e.Source, origins, strings.Join(hashes, ", "))
	}
	return fmt.Sprintf("this key (origin %s) did not sign this log (origin %s): none of the %s in %s is signed by it; pass the verifier key of %s with --key",
		e.KeyOrigin, origins, countNotes(e.Notes), e.Source, origins)
}

func countNotes(n int) string {
	if n == 1 {
		return "1 signed checkpoint"
	}
	return fmt.Sprintf("%d signed checkpoints", n)
}

// keyMatcher watches notes go by and tells whether the key signed any.
type keyMatcher struct {
	key     note.Verifier
	matched bool
	foreign int // notes not signed by the key (unknown key, wrong origin)
	notes   int
	origins []string
	hashes  []uint32
}

// add checks one note; it returns the opened checkpoint when the key
// signed it.
func (m *keyMatcher) add(msg []byte) (Checkpoint, error) {
	m.notes++
	c, err := OpenCheckpoint(msg, m.key)
	if err == nil {
		m.matched = true
		return c, nil
	}
	var ce *CheckpointError
	if errors.As(err, &ce) && (ce.Problem == CheckpointUnknownKey || ce.Problem == CheckpointWrongOrigin) {
		m.foreign++
		origin, hashes := noteSigners(msg)
		if origin != "" && !slices.Contains(m.origins, origin) {
			m.origins = append(m.origins, origin)
		}
		for _, h := range hashes {
			if !slices.Contains(m.hashes, h) {
				m.hashes = append(m.hashes, h)
			}
		}
	}
	return c, err
}

// mismatch is the KeyMismatchError when notes were seen, the key signed
// none of them, and at least one was signed by another key; else nil.
func (m *keyMatcher) mismatch(source string) *KeyMismatchError {
	if m.matched || m.foreign == 0 {
		return nil
	}
	return &KeyMismatchError{KeyOrigin: m.key.Name(), KeyHash: m.key.KeyHash(),
		LogOrigins: m.origins, LogKeyHashes: m.hashes, Notes: m.notes, Source: source}
}

// noteSigners reads, without verifying anything, a signed note's origin
// (its first line) and the key hashes of its signatures by that name.
func noteSigners(msg []byte) (origin string, hashes []uint32) {
	text, sigs, ok := bytes.Cut(msg, []byte("\n\n"))
	if !ok {
		return "", nil
	}
	origin, _, _ = strings.Cut(string(text), "\n")
	for _, line := range strings.Split(string(sigs), "\n") {
		name, sig, ok := strings.Cut(strings.TrimPrefix(line, "\u2014 "), " ")
		if !ok || name != origin {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && len(raw) >= 4 {
			hashes = append(hashes, binary.BigEndian.Uint32(raw))
		}
	}
	return origin, hashes
}

// NoCheckpointOfSizeError: a checkpoint file holds notes signed by the
// key, but none of the tree size a proof is for.
type NoCheckpointOfSizeError struct {
	Size  int64
	Sizes []int64 // the sizes of the notes the key signed, in file order
}

func (e *NoCheckpointOfSizeError) Error() string {
	sizes := make([]string, len(e.Sizes))
	for i, s := range e.Sizes {
		sizes[i] = fmt.Sprint(s)
	}
	return fmt.Sprintf("no note in it is of tree size %d, the size the proof is for (its notes signed by the key are of sizes %s): make the proof for one of those sizes",
		e.Size, strings.Join(sizes, ", "))
}

// PickCheckpoint returns, of the signed notes of a checkpoint file (as
// SplitNotes gives them), the newest — the last in the file — that is
// signed by key for its origin and is of the given tree size, with its
// position from 1. Notes the key did not sign, or that do not open, are
// passed over. It returns a *KeyMismatchError when the key signed none of
// them, a *NoCheckpointOfSizeError when it signed none of that size.
func PickCheckpoint(notes [][]byte, key note.Verifier, size int64, source string) (Checkpoint, int, error) {
	m := keyMatcher{key: key}
	var best Checkpoint
	at := 0
	var sizes []int64
	var firstErr error
	for i, msg := range notes {
		c, err := m.add(msg)
		if err != nil {
			firstErr = cmp.Or(firstErr, fmt.Errorf("note #%d: %w", i+1, err))
			continue
		}
		sizes = append(sizes, c.Size)
		if c.Size == size {
			best, at = c, i+1
		}
	}
	switch {
	case at > 0:
		return best, at, nil
	case m.matched:
		return Checkpoint{}, 0, &NoCheckpointOfSizeError{Size: size, Sizes: sizes}
	case m.mismatch(source) != nil:
		return Checkpoint{}, 0, m.mismatch(source)
	case firstErr != nil:
		return Checkpoint{}, 0, firstErr
	}
	return Checkpoint{}, 0, errors.New("the file holds no signed note")
}

// keyCheck reads the database's checkpoints until one is signed by the
// verifier key: a *KeyMismatchError when there are some and the key
// signed none of them.
func (v *verifier) keyCheck() error {
	rows, err := v.tx.QueryContext(v.ctx, `SELECT note FROM checkpoints ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	m := keyMatcher{key: v.key}
	for rows.Next() && !m.matched {
		var msg []byte
		if rows.Scan(&msg) == nil {
			m.add(msg)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if e := m.mismatch("the database"); e != nil {
		return e
	}
	return nil
}
