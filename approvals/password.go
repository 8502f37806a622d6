package approvals

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are argon2id parameters (RFC 9106).
type Argon2Params struct {
	Time      uint32 // passes
	MemoryKiB uint32
	Threads   uint8
}

// DefaultArgon2 is the OWASP Password Storage Cheat Sheet's argon2id
// configuration (m=19 MiB, t=2, p=1), tens of milliseconds per
// verification. RFC 9106's 64 MiB option was the first choice, but every
// verification (and the decoy for unknown names) then holds 64 MiB, and
// the garbage collector doubles it: a gateway's memory would be set by its
// login rate, not its actions. Verifying still costs its memory for that
// time, so Accounts lets at most maxConcurrentVerify run at once. Stored
// hashes carry their parameters, so older hashes keep verifying.
var DefaultArgon2 = Argon2Params{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}

const (
	argonSaltLen = 16 // RFC 9106 §3.1: 128 bits
	argonKeyLen  = 32

	// MinPasswordLen and maxPasswordLen bound reviewer passwords (bytes).
	MinPasswordLen = 12
	maxPasswordLen = 1024

	maxConcurrentVerify = 2
)

// passwords hashes new reviewer passwords and verifies presented ones
// with argon2id, letting at most maxConcurrentVerify verifications hold
// their memory at once.
type passwords struct {
	params Argon2Params
	dummy  string // a hash to verify unknown names against
	sem    chan struct{}
}

// newPasswords hashes with p; the zero value means DefaultArgon2.
func newPasswords(p Argon2Params) *passwords {
	if p == (Argon2Params{}) {
		p = DefaultArgon2
	}
	return &passwords{params: p, sem: make(chan struct{}, maxConcurrentVerify),
		dummy: hashPassword([]byte("airlock dummy password"), p)}
}

// hash returns the PHC string a new password is stored as.
func (pw *passwords) hash(p Secret) string { return hashPassword([]byte(p.s), pw.params) }

// acquire waits for a place among the verifications running at once;
// release gives it back.
func (pw *passwords) acquire(ctx context.Context) (release func(), err error) {
	select {
	case pw.sem <- struct{}{}:
		return func() { <-pw.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// verify reports whether p matches the stored hash phc. What is not a
// password hash — "" for an unknown name, an SSO account's marker, a
// damaged row — is verified against a decoy hash and never matches, so
// that every refusal costs what a wrong password costs and timing does
// not tell which names exist or sign on elsewhere.
func (pw *passwords) verify(p Secret, phc string) bool {
	against, real := pw.against(phc)
	ok := verifyPassword([]byte(p.s), against)
	return ok && real
}

// against is the hash verify computes for phc: phc itself when it is a
// password hash, else the decoy (real false).
func (pw *passwords) against(phc string) (hash string, real bool) {
	if _, _, _, err := parsePHC(phc); err != nil {
		return pw.dummy, false
	}
	return phc, true
}

func checkPassword(p Secret) error {
	if len(p.s) < MinPasswordLen {
		return ErrWeakPassword
	}
	if len(p.s) > maxPasswordLen {
		return fmt.Errorf("password longer than %d bytes: %w", maxPasswordLen, ErrWeakPassword)
	}
	return nil
}

// hashPassword returns the PHC string
// $argon2id$v=19$m=MEM,t=TIME,p=THREADS$SALT$HASH (unpadded base64).
func hashPassword(pw []byte, p Argon2Params) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	key := argon2.IDKey(pw, salt, p.Time, p.MemoryKiB, p.Threads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verifyPassword recomputes the hash with the stored parameters and salt
// and compares in constant time.
func verifyPassword(pw []byte, phc string) bool {
	p, salt, key, err := parsePHC(phc)
	if err != nil {
		return false
	}
	got := argon2.IDKey(pw, salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}

// Bounds a stored hash must respect, so a damaged or hostile row cannot
// make verification allocate without limit.
const (
	maxArgonMemoryKiB = 4 << 20 // 4 GiB
	maxArgonTime      = 64
)

var errBadPHC = errors.New("malformed password hash")

// parsePHC parses what hashPassword writes, and nothing else.
func parsePHC(s string) (Argon2Params, []byte, []byte, error) {
	var p Argon2Params
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errBadPHC
	}
	var m, t, th uint64
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return p, nil, nil, errBadPHC
	}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		want := [...]string{"m", "t", "p"}[i]
		if !ok || k != want || v == "" || v[0] == '0' || v[0] == '+' {
			return p, nil, nil, errBadPHC
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p, nil, nil, errBadPHC
		}
		switch i {
		case 0:
			m = n
		case 1:
			t = n
		case 2:
			th = n
		}
	}
	if m > maxArgonMemoryKiB || t > maxArgonTime || th > 255 || th == 0 || m < 8*th {
		return p, nil, nil, errBadPHC
	}
	b64 := base64.RawStdEncoding.Strict()
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, errBadPHC
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errBadPHC
	}
	return Argon2Params{Time: uint32(t), MemoryKiB: uint32(m), Threads: uint8(th)}, salt, key, nil
}
