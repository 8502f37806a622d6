package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A secret the engine carries (a run token, a password) never reaches a
// log line, an error or a JSON body, however it is printed — on its own or
// inside a Caller a front end might log.
func TestSecretNeverPrints(t *testing.T) {
	const value = "airlock_run_0123456789abcdef-very-secret"
	s := NewSecret(value)
	if s.Reveal() != value {
		t.Fatalf("Reveal = %q", s.Reveal())
	}
	c := Caller{RunToken: s, RemoteAddr: "192.0.2.1:1234"}
	var shown []string
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		shown = append(shown, fmt.Sprintf(format, s), fmt.Sprintf(format, c), fmt.Sprintf(format, &c))
	}
	shown = append(shown, fmt.Sprint(s), fmt.Sprintln(c))
	for _, v := range []any{s, c, map[string]Secret{"token": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		shown = append(shown, string(b))
	}
	if b, err := s.MarshalText(); err != nil || strings.Contains(string(b), value) {
		t.Errorf("MarshalText = %q, %v", b, err)
	}
	hex := fmt.Sprintf("%x", value)
	for _, got := range shown {
		if strings.Contains(got, value) || strings.Contains(got, hex) || strings.Contains(got, "0123456789abcdef") {
			t.Errorf("the secret shows in %q", got)
		}
	}
	if !strings.Contains(fmt.Sprint(s), "redacted") {
		t.Errorf("fmt.Sprint(secret) = %q, want it marked redacted", fmt.Sprint(s))
	}
	if NewSecret("").IsZero() != true || s.IsZero() {
		t.Error("IsZero")
	}
}
