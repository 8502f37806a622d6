package approvals

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Secret holds a password or token. It prints as "[redacted]" through fmt,
// %#v, JSON and text marshalling, so it cannot reach a log or an audit entry
// by accident; Reveal is the one deliberate way out.
type Secret struct{ s string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{s} }

// Reveal returns the secret itself. Call it only to hand the value to its
// owner (the API response that creates a token) or to hash it.
func (s Secret) Reveal() string { return s.s }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.s == "" }

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { f.Write([]byte(redacted)) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// RunID identifies a run: "run_" and 32 lower-case hex digits (128 bits).
type RunID string

// RequestID identifies an approval request: "apr_" and 32 hex digits.
type RequestID string

const (
	runIDPrefix     = "run_"
	requestIDPrefix = "apr_"
	idHexLen        = 32
)

// ParseRunID checks that s is a well-formed run id.
func ParseRunID(s string) (RunID, error) {
	if !validID(s, runIDPrefix) {
		return "", fmt.Errorf("malformed run id: %w", ErrUnknownRun)
	}
	return RunID(s), nil
}

// ParseRequestID checks that s is a well-formed request id.
func ParseRequestID(s string) (RequestID, error) {
	if !validID(s, requestIDPrefix) {
		return "", fmt.Errorf("malformed request id: %w", ErrUnknownRequest)
	}
	return RequestID(s), nil
}

func validID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && len(rest) == idHexLen && isLowerHex(rest)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func newID(prefix string) string {
	var b [idHexLen / 2]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go 1.24+)
	return prefix + hex.EncodeToString(b[:])
}

// Tokens are "PREFIX" + 32 hex digits naming their record + "_" + 43
// base64url characters of secret (256 bits from crypto/rand). Only
// SHA-256(secret) is stored: the secret has full entropy, so a slow hash
// would add nothing. The id lets us find the record without comparing
// secrets in a database index; the comparison itself is constant time.
const (
	runTokenPrefix      = "airlock_run_"
	reviewerTokenPrefix = "airlock_rvw_"
	tokenSecretBytes    = 32
)

var tokenSecretLen = base64.RawURLEncoding.EncodedLen(tokenSecretBytes)

func newToken(prefix, id string) (Secret, [sha256.Size]byte) {
	var b [tokenSecretBytes]byte
	rand.Read(b[:])
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	return Secret{prefix + id + "_" + secret}, sha256.Sum256([]byte(secret))
}

// parseToken splits a token into its record id (hex) and the SHA-256 of its
// secret part, or fails with ErrMalformedToken.
func parseToken(prefix string, t Secret) (id string, hash [sha256.Size]byte, err error) {
	rest, ok := strings.CutPrefix(t.s, prefix)
	if !ok || len(rest) != idHexLen+1+tokenSecretLen || rest[idHexLen] != '_' {
		return "", hash, ErrMalformedToken
	}
	id, secret := rest[:idHexLen], rest[idHexLen+1:]
	if !isLowerHex(id) {
		return "", hash, ErrMalformedToken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != tokenSecretBytes {
		return "", hash, ErrMalformedToken
	}
	return id, sha256.Sum256([]byte(secret)), nil
}

// equalHash compares two hashes in constant time.
func equalHash(a, b []byte) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare(a, b) == 1
}
