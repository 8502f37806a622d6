package main

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{
		{1, "entry", "1 entry"}, {0, "entry", "0 entries"}, {27, "entry", "27 entries"},
		{1, "checkpoint", "1 checkpoint"}, {3, "checkpoint", "3 checkpoints"},
	} {
		if got := count(c.n, c.noun); got != c.want {
			t.Errorf("count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
