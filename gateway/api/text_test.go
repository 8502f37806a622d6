package api

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestCheckText(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		ok   bool
	}{
		{"plain", `{"command":"echo hi"}`, true},
		{"non-ASCII text", `{"command":"echo café ☕"}`, true},
		{"paired surrogate escape", `{"command":"echo \ud83d\ude00"}`, true},
		{"escaped backslash before u", `{"command":"echo \\ud800"}`, true},
		{"escaped quote", `{"command":"say \"\ud800 is not here\\"}`, false},
		{"BMP escape", `{"command":"\u00e9"}`, true},
		{"invalid UTF-8", "{\"command\":\"\xff\"}", false},
		{"truncated UTF-8", "{\"command\":\"\xe2\x82\"}", false},
		{"lone high surrogate", `{"command":"\ud800"}`, false},
		{"lone high surrogate at the end", `{"command":"\ud800`, false},
		{"high then non-surrogate", `{"command":"\ud800\u0041"}`, false},
		{"lone low surrogate", `{"command":"\udc00"}`, false},
		{"reversed pair", `{"command":"\ude00\ud83d"}`, false},
		{"bad hex", `{"command":"\uZZZZ"}`, false},
		{"u escape outside a string is not ours to judge", `{"a":1} \ud800`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckText([]byte(tt.body)); (err == nil) != tt.ok {
				t.Errorf("CheckText(%q) = %v, want ok %v", tt.body, err, tt.ok)
			}
		})
	}
}

// A request JSON cannot carry unaltered is refused before anything is
// sent: the client would otherwise send U+FFFD in its place.
func TestRunActionRefusesNonText(t *testing.T) {
	c := NewLocalClient(filepath.Join(t.TempDir(), "no-gateway.sock"), "token")
	for _, r := range []ActionRequest{
		{Target: "box", Command: "printf '\xff'"},
		{Target: "box\xfe", Command: "true"},
		{Target: "box", Account: "\xc3", Command: "true"},
	} {
		if _, err := c.RunAction(context.Background(), r, Events{}); !errors.Is(err, ErrNotText) {
			t.Errorf("RunAction(%+q) = %v, want ErrNotText (and nothing sent)", []string{r.Target, r.Account, r.Command}, err)
		}
	}
}
