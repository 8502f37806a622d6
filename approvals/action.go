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
	// Stdin is what the command gets on its standard input; nil for
	// nothing (an empty input is nothing).
	Stdin *Stdin `json:"stdin,omitempty"`
	// Secret names the gateway-held secret written to the command's
	// standard input instead of Stdin: the digest binds its name, never
	// its value (which reviewers and the store never see). An action
	// with a Secret always asks a call approval of its own: no run
	// approval, grant or Unreviewed covers it.
	Secret string `json:"secret,omitempty"`
	// AgentReason is what the agent says the action is for: its own
	// claim, shown to reviewers as such. Not part of the digest.
	AgentReason string `json:"agent_reason,omitempty"`
	// Shown, when set, is the command as reviewers and records see it,
	// with what looked like credentials replaced (Redactions say where);
	// the digest binds Command, which the store keeps only while the
	// request is pending.
	Shown      string      `json:"shown,omitempty"`
	Redactions []Redaction `json:"redactions,omitempty"`
	// Class is the command's class (read_only … forbidden) and
	// ClassReason the parts that decided it, for reviewers. Escalation,
	// when set, says why no run approval covers this action: it asks a
	// call approval of its own, inside an approved run too.
	Class       string `json:"class,omitempty"`
	ClassReason string `json:"class_reason,omitempty"`
	Escalation  string `json:"escalation,omitempty"`
	// Transfer, when set, makes the action a file transfer instead of a
	// command (Command then says it in words for people): the digest
	// binds its direction, remote path, mode and overwrite, and, through
	// Stdin, the exact bytes of a put.
	Transfer *Transfer `json:"transfer,omitempty"`
	// Unreviewed asks no reviewer: the account's policy lets the action's
	// class through unreviewed (allow_unreviewed). The run must still be
	// one that may act (not denied, ended or expired) and the action
	// within its limits. Ignored with Redactions, Escalation or Secret.
	Unreviewed bool `json:"-"`
}

// Redaction is one part of a command replaced before it was stored: the
// rule that matched, and where (bytes of the original command).
type Redaction struct {
	Rule   string `json:"rule"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

// Stdin describes an action's standard input for reviewers and the
// digest: its size and SHA-256 (which the digest covers) and, when it is
// short printable text, the text itself.
type Stdin struct {
	Size   int64    `json:"size"`
	SHA256 [32]byte `json:"sha256"`
	// Text is the input itself when it is printable UTF-8 of at most
	// MaxStdinText bytes; "" otherwise.
	Text string `json:"text,omitempty"`
}

// MaxStdinText bounds the standard input a request shows as text.
const MaxStdinText = 4 << 10

// Transfer is a file transfer: "put" writes Stdin's bytes to Path on the
// target with Mode, replacing a file there only with Overwrite; "get"
// reads Path.
type Transfer struct {
	Direction string `json:"direction"`
	Path      string `json:"path"`
	Mode      uint32 `json:"mode,omitempty"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

func (a Action) validate() error {
	if a.Target == "" || a.Account == "" || a.Command == "" || a.Timeout <= 0 {
		return ErrBadAction
	}
	if t := a.Transfer; t != nil {
		switch {
		case a.Secret != "", t.Path == "",
			t.Direction == "put" && a.Stdin == nil,
			t.Direction == "get" && (a.Stdin != nil || t.Mode != 0 || t.Overwrite),
			t.Direction != "put" && t.Direction != "get":
			return ErrBadAction
		}
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
		return d, fmt.Errorf("action digest of %d characters, want %d: %w", len(s), 2*len(d), ErrUnknownValue)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return d, fmt.Errorf("action digest is not lower-case hex: %w", ErrUnknownValue)
		}
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("action digest: %w", ErrUnknownValue)
	}
	return d, nil
}

// canonicalDomain separates action digests from every other SHA-256 use.
// Changing the encoding means a new domain string: an action with
// standard input is encoded under canonicalDomainStdin, so that its
// digest can never equal one of an action without (and the digests of
// actions without stdin stay what they were).
const (
	canonicalDomain       = "airlock/action/v1"
	canonicalDomainStdin  = "airlock/action/v2+stdin"
	canonicalDomainSecret = "airlock/action/v3+secret"
	canonicalDomainFile   = "airlock/action/v4+transfer"
)

// CanonicalAction is the byte string a call approval's digest covers:
//
//	field(canonicalDomain) field(runID) field(target) field(account)
//	field(command) int64be(timeout in nanoseconds)
//
// where field(s) is len(s) as a big-endian uint32 followed by the bytes of
// s. An action with standard input is encoded under the domain
// "airlock/action/v2+stdin" and followed by int64be(stdin size) and the
// 32 bytes of its SHA-256. An action with a secret on its standard input
// is encoded under "airlock/action/v3+secret", followed by one byte (1
// when a Stdin follows as in v2, 0 when not), that Stdin, and
// field(secret name). A file transfer is encoded under
// "airlock/action/v4+transfer", followed by the same byte and Stdin (a
// put's bytes), field(direction), field(path), uint32be(mode) and one
// byte (1 to overwrite, 0 not).
// Length prefixes make the encoding injective: no two different actions
// (say target "a b" + account "c" and target "a" + account "b c") share an
// encoding, which plain concatenation with a separator cannot promise.
func CanonicalAction(run RunID, a Action) []byte {
	domain := canonicalDomain
	switch {
	case a.Transfer != nil:
		domain = canonicalDomainFile
	case a.Secret != "":
		domain = canonicalDomainSecret
	case a.Stdin != nil:
		domain = canonicalDomainStdin
	}
	n := 4*8 + len(domain) + len(run) + len(a.Target) + len(a.Account) + len(a.Command) + 8 + 1 + 8 + 32 + len(a.Secret) + 4 + 1
	if t := a.Transfer; t != nil {
		n += len(t.Direction) + len(t.Path)
	}
	b := make([]byte, 0, n)
	field := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	for _, s := range []string{domain, string(run), a.Target, a.Account, a.Command} {
		field(s)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(a.Timeout))
	if a.Secret != "" || a.Transfer != nil {
		if a.Stdin != nil {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	if a.Stdin != nil {
		b = binary.BigEndian.AppendUint64(b, uint64(a.Stdin.Size))
		b = append(b, a.Stdin.SHA256[:]...)
	}
	if a.Secret != "" {
		field(a.Secret)
	}
	if t := a.Transfer; t != nil {
		field(t.Direction)
		field(t.Path)
		b = binary.BigEndian.AppendUint32(b, t.Mode)
		if t.Overwrite {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// DigestOf returns the SHA-256 of CanonicalAction(run, a).
func DigestOf(run RunID, a Action) Digest {
	return sha256.Sum256(CanonicalAction(run, a))
}
