package main

import (
	"strings"
	"testing"
)

// helpCalls is every way of asking a verb or sub-verb for help.
func helpCalls() [][]string {
	calls := [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "approvals"}}
	for _, name := range sortedKeys(commands) {
		calls = append(calls, []string{name, "--help"}, []string{name, "-h"})
		g := commands[name].group
		if g == nil {
			continue
		}
		calls = append(calls, []string{name, "help"})
		for _, verb := range sortedKeys(g.verbs) {
			calls = append(calls, []string{name, verb, "--help"}, []string{name, verb, "-h"})
		}
	}
	return calls
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range helpCalls() {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
			}
			if stderr != "" {
				t.Errorf("stderr not empty:\n%s", stderr)
			}
			want := "usage: airlock"
			if len(args) == 3 {
				want = "usage: airlock " + args[0] + " " + args[1]
			}
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		})
	}
}

// A group's help lists every sub-verb.
func TestGroupHelpListsVerbs(t *testing.T) {
	for _, name := range sortedKeys(commands) {
		g := commands[name].group
		if g == nil {
			continue
		}
		_, stdout, _ := runCLI(t, name, "help")
		for _, verb := range sortedKeys(g.verbs) {
			if !strings.Contains(stdout, "\n  "+verb+" ") && !strings.Contains(stdout, "\n  "+verb+"\n") {
				t.Errorf("airlock %s help does not list %q:\n%s", name, verb, stdout)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no arguments", nil},
		{"unknown command", []string{"frobnicate"}},
		{"group without a verb", []string{"approvals"}},
		{"unknown verb", []string{"hosts", "frobnicate"}},
		{"unknown flag", []string{"serve", "--frobnicate"}},
		{"serve with an argument", []string{"serve", "airlock.hcl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if stderr == "" {
				t.Error("nothing on stderr")
			}
		})
	}
}
