package auditchain

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockgw/airlock/deploy/securefile"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// MaxNoteLen bounds a signed checkpoint note; ours are under 300 bytes.
const MaxNoteLen = 64 << 10

// A Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin,
// the tree size and the RFC 6962 root hash of the first Size leaves.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Text returns the checkpoint body: three lines, each ending in a newline.
//
//	<origin>
//	<size in decimal>
//	<root hash in standard base64>
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

func malformedCheckpoint(format string, args ...any) error {
	return fmt.Errorf("audit log: checkpoint: %s: %w", fmt.Sprintf(format, args...), ErrMalformedCheckpoint)
}

// ParseCheckpoint parses a checkpoint body. It is strict where the
// specification lets it be: the size has no sign or leading zeros and the
// hash is canonical base64 of exactly 32 bytes. Extension lines (non-empty
// lines after the hash) are allowed by the specification and ignored.
func ParseCheckpoint(text string) (Checkpoint, error) {
	var c Checkpoint
	if len(text) > MaxNoteLen || !utf8.ValidString(text) {
		return c, malformedCheckpoint("not valid UTF-8 of bounded size")
	}
	if !strings.HasSuffix(text, "\n") {
		return c, malformedCheckpoint("missing final newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return c, malformedCheckpoint("%d lines, want at least 3", len(lines))
	}
	for _, l := range lines[3:] {
		if l == "" {
			return c, malformedCheckpoint("empty extension line")
		}
	}
	if !validOrigin(lines[0]) {
		return c, malformedCheckpoint("invalid origin %q", lines[0])
	}
	c.Origin = lines[0]
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return c, malformedCheckpoint("invalid size %q", lines[1])
	}
	c.Size = n
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize || base64.StdEncoding.EncodeToString(raw) != lines[2] {
		return c, malformedCheckpoint("invalid root hash %q", lines[2])
	}
	copy(c.Root[:], raw)
	return c, nil
}

// validOrigin reports whether s can be both a checkpoint origin line and a
// note key name: non-empty UTF-8 without spaces, '+' or control characters.
func validOrigin(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '+' || r == 0x7f || r == '\u00a0' || r == '\u2014' {
			return false
		}
	}
	return true
}

// A CheckpointProblem classifies why a signed note is not an acceptable
// checkpoint. It maps onto the verifier's damage kinds.
type CheckpointProblem uint8

const (
	CheckpointOK           CheckpointProblem = iota
	CheckpointMalformed                      // not a parseable note or body
	CheckpointBadSignature                   // the verifier key's signature does not verify
	CheckpointUnknownKey                     // not signed by the verifier key
	CheckpointWrongOrigin                    // signed, but for another log
)

// A CheckpointError reports why OpenCheckpoint rejected a note.
type CheckpointError struct {
	Problem CheckpointProblem
	Err     error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("audit log: checkpoint rejected: %v", e.Err)
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// OpenCheckpoint checks a signed checkpoint note against the verifier key
// v and parses its body. The body's origin must equal the key's name. On
// failure it returns a *CheckpointError.
func OpenCheckpoint(msg []byte, v note.Verifier) (Checkpoint, error) {
	if len(msg) > MaxNoteLen {
		return Checkpoint{}, &CheckpointError{CheckpointMalformed, malformedCheckpoint("note of %d bytes", len(msg))}
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var inv *note.InvalidSignatureError
		var unv *note.UnverifiedNoteError
		switch {
		case errors.As(err, &inv):
			return Checkpoint{}, &CheckpointError{CheckpointBadSignature, err}
		case errors.As(err, &unv):
			return Checkpoint{}, &CheckpointError{CheckpointUnknownKey, err}
		default:
			return Checkpoint{}, &CheckpointError{CheckpointMalformed, fmt.Errorf("%w: %w", ErrMalformedCheckpoint, err)}
		}
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, &CheckpointError{CheckpointMalformed, err}
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, &CheckpointError{CheckpointWrongOrigin,
			fmt.Errorf("origin %q, want %q", c.Origin, v.Name())}
	}
	return c, nil
}

// ParseVerifierKey parses a note verifier key ("<name>+<hash>+<keydata>"),
// as written to checkpoint.vkey. Surrounding whitespace is ignored.
func ParseVerifierKey(s string) (note.Verifier, error) {
	v, err := note.NewVerifier(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("audit log: verifier key: %w", err)
	}
	return v, nil
}

// ReadVerifierKey reads a verifier key file.
func ReadVerifierKey(path string) (note.Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: read verifier key: %w", err)
	}
	if len(b) > 4096 {
		return nil, fmt.Errorf("audit log: verifier key %s: file too large", path)
	}
	return ParseVerifierKey(string(b))
}

// SplitNotes splits a checkpoint file into its signed notes. The file
// format is what the log appends: each note (text, blank line, signature
// lines) followed by one blank line.
func SplitNotes(data []byte) ([][]byte, error) {
	// A note is its text lines, a blank line, and signature lines ("— "
	// and the signature); the next note begins at the first line after
	// them that is not one, with or without blank lines between (as a
	// witness that appends notes with cat writes them).
	lines := bytes.SplitAfter(data, []byte("\n"))
	blank := func(l []byte) bool { return len(bytes.TrimRight(l, "\n")) == 0 }
	var notes [][]byte
	for i := 0; ; {
		for i < len(lines) && blank(lines[i]) {
			i++
		}
		if i == len(lines) {
			return notes, nil
		}
		start, n := i, len(notes)+1
		for i < len(lines) && !blank(lines[i]) {
			i++
		}
		if i == len(lines) {
			return notes, malformedCheckpoint("note %d has no signature block", n)
		}
		i++ // the blank line
		sigs := i
		for i < len(lines) && bytes.HasPrefix(lines[i], []byte("\u2014 ")) {
			i++
		}
		if i == sigs {
			return notes, malformedCheckpoint("note %d has no signature after its blank line", n)
		}
		note := bytes.Join(lines[start:i], nil)
		if len(note) > MaxNoteLen {
			return notes, malformedCheckpoint("note %d is longer than %d bytes", n, MaxNoteLen)
		}
		notes = append(notes, note)
	}
}

// signingKey is the checkpoint signer loaded from its file. The private
// key string never leaves this type; String and GoString hide it.
type signingKey struct {
	signer note.Signer
	vkey   string
}

func (signingKey) String() string   { return "[redacted]" }
func (signingKey) GoString() string { return "[redacted]" }

// loadOrCreateKey loads the signing key at path, generating it (with the
// given name) on first use. The verifier key is (re)written to vkeyPath.
func loadOrCreateKey(path, vkeyPath, name string) (*signingKey, bool, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("audit log: create key directory: %w", err)
	}
	if err := securefile.CheckDir(dir); err != nil {
		return nil, false, err
	}
	created := false
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := createKey(path, name); err != nil {
			return nil, false, err
		}
		created = true
		if fi, err = os.Lstat(path); err != nil {
			return nil, false, fmt.Errorf("audit log: stat key: %w", err)
		}
	case err != nil:
		return nil, false, fmt.Errorf("audit log: stat key: %w", err)
	}
	if err := securefile.CheckSecret(path, fi, -1); err != nil {
		return nil, false, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("audit log: read key %s: %w", path, err)
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(raw)))
	if err != nil {
		// The parse error could quote key material: do not wrap it.
		return nil, false, fmt.Errorf("audit log: key %s is not a note signer key", path)
	}
	if signer.Name() != name {
		return nil, false, fmt.Errorf("audit log: key %s is named %q, want the log origin %q", path, signer.Name(), name)
	}
	vkey, err := verifierKeyOf(string(raw))
	if err != nil {
		return nil, false, fmt.Errorf("audit log: key %s: derive verifier key", path)
	}
	if vkeyPath != "" {
		if err := securefile.WriteFile(vkeyPath, []byte(vkey+"\n"), securefile.WriteOptions{Mode: 0o644, UID: -1, GID: -1}); err != nil {
			return nil, false, err
		}
	}
	return &signingKey{signer: signer, vkey: vkey}, created, nil
}

// verifierKeyOf derives "<name>+<hash>+<keydata>" from a signer key
// "PRIVATE+KEY+<name>+<hash>+<keydata>" by rebuilding the Ed25519 public key.
func verifierKeyOf(skey string) (string, error) {
	parts := strings.SplitN(strings.TrimSpace(skey), "+", 5)
	if len(parts) != 5 {
		return "", errors.New("bad signer key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 33 || raw[0] != 1 {
		return "", errors.New("bad signer key")
	}
	pub := ed25519PublicFromSeed(raw[1:])
	return note.NewEd25519VerifierKey(parts[2], pub)
}

func createKey(path, name string) error {
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return fmt.Errorf("audit log: generate checkpoint key: %w", err)
	}
	// Linked into place, never renamed: a key that appeared meanwhile is
	// never replaced.
	if err := securefile.WriteFile(path, []byte(skey+"\n"), securefile.WriteOptions{Mode: 0o600, UID: -1, GID: -1, NoReplace: true}); err != nil {
		return fmt.Errorf("audit log: install key: %w", err)
	}
	return nil
}

func ed25519PublicFromSeed(seed []byte) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// CheckInclusion checks offline that p puts its entry in the tree this
// checkpoint signed: p is for the checkpoint's size and, from the entry's
// leaf hash and the audit path, gives the checkpoint's root.
func (c Checkpoint) CheckInclusion(p InclusionProof) error {
	if p.Size != c.Size {
		return fmt.Errorf("audit log: the proof is for a tree of %d entries, the checkpoint for %d: %w", p.Size, c.Size, errBadProof)
	}
	p.Root = c.Root
	return p.Check()
}

// CheckConsistency checks offline that p shows the tree of p.Old entries
// with root p.OldRoot to be a prefix of the tree this checkpoint signed.
func (c Checkpoint) CheckConsistency(p ConsistencyProof) error {
	if p.New != c.Size {
		return fmt.Errorf("audit log: the proof is for a tree of %d entries, the checkpoint for %d: %w", p.New, c.Size, errBadProof)
	}
	p.NewRoot = c.Root
	return p.Check()
}
