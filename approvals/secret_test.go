package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestSecretNeverPrints(t *testing.T) {
	const pw = "s3cret-value-xyz"
	s := NewSecret(pw)
	holder := struct {
		Token Secret
		Ptr   *Secret
	}{s, &s}
	var outs []string
	for _, verb := range []string{"%v", "%s", "%q", "%+v", "%#v", "%x", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, holder))
	}
	j, _ := json.Marshal(holder)
	outs = append(outs, string(j), s.String(), s.GoString())
	var buf bytes.Buffer
	hclog.New(&hclog.LoggerOptions{Output: &buf}).Info("login", "password", s)
	hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true}).Info("login", "password", s)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, pw) {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if s.Reveal() != pw {
		t.Errorf("Reveal = %q", s.Reveal())
	}
}

func TestTokenParsing(t *testing.T) {
	tok, hash := newToken(runTokenPrefix, strings.Repeat("ab", 16))
	id, h, err := parseToken(runTokenPrefix, tok)
	if err != nil || id != strings.Repeat("ab", 16) || h != hash {
		t.Fatalf("parseToken(newToken) = %q, %x, %v", id, h, err)
	}
	if len(tok.Reveal()) != len(runTokenPrefix)+idHexLen+1+tokenSecretLen {
		t.Errorf("token length %d", len(tok.Reveal()))
	}
	good := tok.Reveal()
	for _, tc := range []struct{ name, tok string }{
		{"empty", ""},
		{"other prefix", reviewerTokenPrefix + good[len(runTokenPrefix):]},
		{"short", good[:len(good)-1]},
		{"long", good + "A"},
		{"upper-case id", runTokenPrefix + strings.ToUpper(good[len(runTokenPrefix):len(runTokenPrefix)+idHexLen]) + good[len(runTokenPrefix)+idHexLen:]},
		{"bad separator", good[:len(runTokenPrefix)+idHexLen] + "." + good[len(runTokenPrefix)+idHexLen+1:]},
		{"not base64url", good[:len(good)-1] + "+"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseToken(runTokenPrefix, NewSecret(tc.tok)); !errors.Is(err, ErrMalformedToken) {
				t.Errorf("err = %v, want ErrMalformedToken", err)
			}
		})
	}
}

func FuzzParseToken(f *testing.F) {
	tok, _ := newToken(runTokenPrefix, strings.Repeat("0", 32))
	f.Add(tok.Reveal())
	f.Add(runTokenPrefix)
	f.Fuzz(func(t *testing.T, s string) {
		id, _, err := parseToken(runTokenPrefix, NewSecret(s))
		if err != nil {
			return
		}
		if !strings.HasPrefix(s, runTokenPrefix+id+"_") || !validID(runIDPrefix+id, runIDPrefix) {
			t.Errorf("parseToken(%q) accepted id %q", s, id)
		}
	})
}

func FuzzParseIDs(f *testing.F) {
	f.Add("run_0123456789abcdef0123456789abcdef")
	f.Add("apr_0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, s string) {
		if id, err := ParseRunID(s); err == nil && (string(id) != s || !strings.HasPrefix(s, runIDPrefix) || len(s) != 36) {
			t.Errorf("ParseRunID(%q) = %q", s, id)
		}
		if id, err := ParseRequestID(s); err == nil && (string(id) != s || !strings.HasPrefix(s, requestIDPrefix)) {
			t.Errorf("ParseRequestID(%q) = %q", s, id)
		}
	})
}
