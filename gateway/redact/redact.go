// Package redact finds credentials in command lines before they are stored:
// private key blocks, cloud and forge tokens, JWTs, password and token
// assignments, URLs with a password, and patterns an operator configures.
// Each match is replaced by "[redacted:RULE]" in the text that is stored
// and shown; where it was is kept (rule, byte offset, length), and a keyed
// hash of the original (HMAC-SHA256 with a gateway key) lets whoever holds
// the original prove that it is the command that ran, without the log
// ever holding it.
package redact

import (
	"crypto/hmac"
	"crypto/sha256"
	"regexp"
	"slices"
	"strings"

	"github.com/airlockgw/airlock/approvals"
)

// Rule is one detector: text matching Pattern is a credential; when Group
// is set, only that submatch is (the value of an assignment, not its
// name).
type Rule struct {
	Name    string
	Pattern *regexp.Regexp
	Group   int
	// Spaces lets a match hold spaces and tabs (an operator's pattern of
	// a header, "X-Api-Key: …"); shell operators, quotes, expansions and
	// line ends never.
	Spaces bool
}

// The built-in detectors, in the order they are tried.
var builtins = []Rule{
	// A whole block, END line included, whose body is base64 lines and
	// PEM header lines only: nothing else is ever hidden as a "key".
	{Name: "private-key", Pattern: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----\r?\n(?:[A-Za-z-]{1,40}: [A-Za-z0-9,-]{1,200}\r?\n|\r?\n)*(?:[A-Za-z0-9+/=]{1,100}\r?\n)+-----END[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----`)},
	{Name: "aws-access-key", Pattern: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[0-9A-Z]{16}\b`)},
	{Name: "github-token", Pattern: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`)},
	{Name: "gitlab-token", Pattern: regexp.MustCompile(`\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,255}`)},
	{Name: "slack-token", Pattern: regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,255}`)},
	{Name: "jwt", Pattern: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`)},
	{Name: "bearer-token", Group: 1, Pattern: regexp.MustCompile(`(?i)\bBearer\s+([A-Za-z0-9._~+/=-]{16,1000})`)},
	// A literal value given to a name that says it is a secret: bare, or
	// quoted (JSON's escaped quotes too). What the value may hold is
	// checked by inert: an expansion ($VAR, $(cat)) is no literal.
	{Name: "assignment", Group: 1, Pattern: regexp.MustCompile(`(?i)(?:passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key|auth)(?:\\?["'])?\s*[:=]\s*(\\?"[^"\\\n]{4,1000}\\?"|'[^'\n]{4,1000}'|[^\s"'$;&|<>(){}\x60\\]{4,1000})`)},
	// The password of a URL's userinfo, up to the last "@" before the
	// host (a user name may hold one).
	{Name: "url-password", Group: 1, Pattern: regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^/\s:'"]{0,256}:([^/\s'"]{1,256})@`)},
}

// inert reports whether hiding s can hide nothing of a command's
// structure: a value in single quotes holds no quote or line end; one in
// double quotes no quote, expansion, escape or line end; a bare one no
// space, quote, expansion, escape or shell operator. A span that is not
// inert is left as it is, visible: an agent must not be able to hide a
// command from reviewers and the log by dressing it as a credential.
func inert(s string, spaces bool) bool {
	if spaces {
		s = strings.NewReplacer(" ", "", "\t", "").Replace(s)
	}
	switch {
	case len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'':
		return !strings.ContainsAny(s[1:len(s)-1], "'\r\n")
	case len(s) >= 2 && strings.HasSuffix(s, `"`) && (s[0] == '"' || strings.HasPrefix(s, `\"`)):
		body := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, `\`), `"`), `"`), `\`)
		return !strings.ContainsAny(body, "\"$`\\\r\n")
	}
	return !strings.ContainsAny(s, " \t\r\n\"'$`\\;&|<>(){}*?[]!#~")
}

// Redactor applies the built-in detectors and configured rules.
type Redactor struct {
	rules []Rule
}

// New returns a Redactor with the built-in detectors and extra.
func New(extra []Rule) *Redactor {
	return &Redactor{rules: append(slices.Clone(builtins), extra...)}
}

// Result is a text with its credentials replaced.
type Result struct {
	// Text is the text to store and show.
	Text string
	// Spans say what was replaced, in the original, by offset; none when
	// Text is the original.
	Spans []approvals.Redaction
}

// Found reports whether anything was replaced.
func (r Result) Found() bool { return len(r.Spans) > 0 }

// Redact finds every credential in s and replaces it by "[redacted:RULE]".
// Where matches overlap, the earliest (then the longest) wins.
func (x *Redactor) Redact(s string) Result {
	var spans []approvals.Redaction
	for _, r := range x.rules {
		for _, m := range r.Pattern.FindAllStringSubmatchIndex(s, -1) {
			lo, hi := m[0], m[1]
			if r.Group > 0 && 2*r.Group+1 < len(m) {
				lo, hi = m[2*r.Group], m[2*r.Group+1]
			}
			if lo < 0 || hi <= lo || r.Name != "private-key" && !inert(s[lo:hi], r.Spaces) {
				continue
			}
			spans = append(spans, approvals.Redaction{Rule: r.Name, Offset: lo, Length: hi - lo})
		}
	}
	if len(spans) == 0 {
		return Result{Text: s}
	}
	slices.SortFunc(spans, func(a, b approvals.Redaction) int {
		if a.Offset != b.Offset {
			return a.Offset - b.Offset
		}
		return b.Length - a.Length
	})
	var kept []approvals.Redaction
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.Offset < at {
			// Overlapping the one replaced last: it covers this one's end
			// too (the text between was checked as part of this one).
			if end := sp.Offset + sp.Length; end > at {
				last := &kept[len(kept)-1]
				last.Length, at = end-last.Offset, end
			}
			continue
		}
		b.WriteString(s[at:sp.Offset])
		b.WriteString("[redacted:" + sp.Rule + "]")
		at = sp.Offset + sp.Length
		kept = append(kept, sp)
	}
	b.WriteString(s[at:])
	return Result{Text: b.String(), Spans: kept}
}

// macDomain separates command MACs from every other use of the key.
const macDomain = "airlock/command-hmac/v1\x00"

// MAC is the keyed hash of an original command recorded beside its
// redacted text: HMAC-SHA256(key, "airlock/command-hmac/v1" NUL command).
func MAC(key []byte, command string) [32]byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(macDomain))
	h.Write([]byte(command))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// CheckMAC reports whether command is the original that mac was made of.
func CheckMAC(key []byte, command string, mac []byte) bool {
	want := MAC(key, command)
	return hmac.Equal(want[:], mac)
}
