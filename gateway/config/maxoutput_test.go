package config

import (
	"errors"
	"strings"
	"testing"
)

// TestMaxOutput: an account's max_output is a size from the in-memory cap
// (8 MiB) to 4 GiB, 64 MiB when unset; anything else is refused at its
// line with the bounds.
func TestMaxOutput(t *testing.T) {
	for _, tt := range []struct {
		name string
		line string
		want int64
	}{
		{"default", "", DefaultMaxOutput},
		{"with a unit", `max_output = "256MiB"`, 256 << 20},
		{"the in-memory cap: nothing spills", `max_output = "8MiB"`, 8 << 20},
		{"bytes", `max_output = 16777216`, 16 << 20},
		{"the largest", `max_output = "4GiB"`, 4 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(readOnlyAccount("    "+tt.line)), "airlock.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Targets["t"].Accounts["a"].MaxOutput; got != tt.want {
				t.Errorf("MaxOutput = %d, want %d", got, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, line string }{
		{"under the in-memory cap", `max_output = "1MiB"`},
		{"over 4 GiB", `max_output = "5GiB"`},
		{"not a size", `max_output = "lots"`},
		{"a fraction", `max_output = 1.5`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(readOnlyAccount("    "+tt.line)), "airlock.hcl")
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("err = %v, want one problem", err)
			}
			p := ce.Problems[0]
			if p.Line != 7 || !strings.Contains(p.Message, "max_output") {
				t.Errorf("problem = line %d %q, want line 7 naming max_output", p.Line, p.Message)
			}
		})
	}
}
