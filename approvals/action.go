package approvals

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// Action is what an agent asks the gateway to do: one command on one
// target account with one timeout. The gateway has already resolved target
// and account from its configuration.
type Action struct {
	Target  string        `json:"target"`
	Account string        `json:"account"`
	Command string        `json:"command"`
	Timeout time.Duration `json:"timeout"`
}

func (a Action) validate() error {
	if a.Target == "" || a.Account == "" || a.Command == "" || a.Timeout <= 0 {
		return ErrBadAction
	}
	return nil
}

// Digest is the SHA-256 of an action's canonical encoding (see
// CanonicalAction). A call approval authorises exactly one digest, once.
type Digest [sha256.Size]byte

// String returns the digest in lower-case hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText encodes the digest as lower-case hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses lower-case hex; see ParseDigest.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// ParseDigest parses 64 lower-case hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*len(d) {
		return d, fmt.Errorf("approvals: digest of %d characters, want %d: %w", len(s), 2*len(d), ErrUnknownValue)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return d, fmt.Errorf("approvals: digest is not lower-case hex: %w", ErrUnknownValue)
		}
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("approvals: digest: %w", ErrUnknownValue)
	}
	return d, nil
}

// canonicalDomain separates action digests from every other SHA-256 use.
// Changing the encoding means a new domain string ("…/v2").
const canonicalDomain = "airlock/action/v1"

// CanonicalAction is the byte string a call approval's digest covers:
//
//	field(canonicalDomain) field(runID) field(target) field(account)
//	field(command) int64be(timeout in nanoseconds)
//
// where field(s) is len(s) as a big-endian uint32 followed by the bytes of s.
// Length prefixes make the encoding injective: no two different actions
// (say target "a b" + account "c" and target "a" + account "b c") share an
// encoding, which plain concatenation with a separator cannot promise.
func CanonicalAction(run RunID, a Action) []byte {
	n := 4*5 + len(canonicalDomain) + len(run) + len(a.Target) + len(a.Account) + len(a.Command) + 8
	b := make([]byte, 0, n)
	for _, s := range []string{canonicalDomain, string(run), a.Target, a.Account, a.Command} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(a.Timeout))
}

// DigestOf returns the SHA-256 of CanonicalAction(run, a).
func DigestOf(run RunID, a Action) Digest {
	return sha256.Sum256(CanonicalAction(run, a))
}
