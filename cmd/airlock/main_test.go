package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// TestMain removes the binaries built for the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	gatewaytest.RemoveBinaries()
	pgtest.StopShared()
	os.Exit(code)
}

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

// A configuration file that does not exist is reported with which file
// was looked for and how to name another.
func TestMissingConfigHint(t *testing.T) {
	fp := "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	loaders := [][]string{
		{"serve"},
		{"config", "check"},
		{"reviewer", "add", "alice"},
		{"ca", "init"},
		{"ca", "public-key"},
		{"deploy", "authorized-keys", "--target", "box", "--account", "agent"},
		{"hosts", "pin", "box", "--fingerprint", fp},
	}
	// These look for a configuration only when one is named.
	named := [][]string{
		{"token", "rotate"},
		{"run", "true"},
		{"audit", "verify"},
		{"approvals", "list", "--reviewer", "alice"},
	}
	tests := []struct {
		name  string
		env   string // $AIRLOCK_CONFIG
		flag  bool   // pass --config
		verbs [][]string
		want  []string
	}{
		{"default", "", false, loaders, []string{"./airlock.hcl", "--config FILE", "$AIRLOCK_CONFIG"}},
		{"$AIRLOCK_CONFIG", "nowhere.hcl", false, append(loaders, named[2:]...), []string{"$AIRLOCK_CONFIG names no file"}},
		{"--config", "", true, append(loaders, named...), []string{"--config names no file"}},
	}
	for _, tt := range tests {
		for _, verb := range tt.verbs {
			t.Run(tt.name+"/"+strings.Join(verb, " "), func(t *testing.T) {
				t.Chdir(t.TempDir())
				for _, k := range []string{"AIRLOCK_URL", "AIRLOCK_SOCKET", "AIRLOCK_STATE_DIR"} {
					t.Setenv(k, "")
				}
				t.Setenv("AIRLOCK_CONFIG", tt.env)
				args := verb
				if tt.flag {
					args = withConfigFlag(verb, "nowhere.hcl")
				}
				code, _, stderr := runCLI(t, args...)
				if code == 0 {
					t.Fatalf("exit 0 without a configuration")
				}
				for _, w := range tt.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("stderr lacks %q:\n%s", w, stderr)
					}
				}
			})
		}
	}
}

// withConfigFlag inserts --config file after a verb's name (its sub-verb's,
// in a group), or after a leading positional argument it takes.
func withConfigFlag(verb []string, file string) []string {
	n := 1
	if commands[verb[0]].group != nil {
		n = 2
	}
	if n < len(verb) && !strings.HasPrefix(verb[n], "-") && verb[0] != "run" {
		n++
	}
	return append(append(append([]string{}, verb[:n]...), "--config", file), verb[n:]...)
}

// Each reviewer sub-verb's help lists its own flags and its arguments.
func TestReviewerVerbHelp(t *testing.T) {
	tests := []struct {
		verb       []string
		usage      string
		has, lacks []string
	}{
		{[]string{"approvals", "list"}, "usage: airlock approvals list [flags]\n", []string{"-json", "-url", "-reviewer", "-config"}, []string{"-ttl", "-max-actions", "-reason"}},
		{[]string{"approvals", "approve"}, "usage: airlock approvals approve [flags] ID\n", []string{"-ttl", "-max-actions", "-reason", "-url"}, []string{"-json"}},
		{[]string{"approvals", "deny"}, "usage: airlock approvals deny [flags] ID\n", []string{"-reason", "-url"}, []string{"-ttl", "-max-actions", "-json"}},
		{[]string{"runs", "list"}, "usage: airlock runs list [flags]\n", []string{"-json", "-url"}, []string{"-reason"}},
		{[]string{"runs", "end"}, "usage: airlock runs end [flags] ID\n", []string{"-reason", "-url"}, []string{"-json"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.verb, " "), func(t *testing.T) {
			_, stdout, _ := runCLI(t, append(tt.verb, "--help")...)
			if !strings.HasPrefix(stdout, tt.usage) {
				t.Errorf("help does not start with %q:\n%s", tt.usage, stdout)
			}
			for _, f := range tt.has {
				if !strings.Contains(stdout, "  "+f+" ") && !strings.Contains(stdout, "  "+f+"\n") {
					t.Errorf("help lacks %s:\n%s", f, stdout)
				}
			}
			for _, f := range tt.lacks {
				if strings.Contains(stdout, "  "+f+" ") || strings.Contains(stdout, "  "+f+"\n") {
					t.Errorf("help lists %s, which this verb does not take:\n%s", f, stdout)
				}
			}
		})
	}
}

// No flag's help gives its default twice, even when the default comes
// from the environment.
func TestHelpDefaultsOnce(t *testing.T) {
	t.Setenv("AIRLOCK_REVIEWER", "alice")
	t.Setenv("AIRLOCK_URL", "http://127.0.0.1:1")
	t.Setenv("AIRLOCK_STATE_DIR", t.TempDir())
	for _, args := range helpCalls() {
		_, stdout, _ := runCLI(t, args...)
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("airlock %s: %q", strings.Join(args, " "), line)
			}
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args   []string
		pos    []string
		reason string
	}{
		{[]string{"ID"}, []string{"ID"}, ""},
		{[]string{"ID", "--reason", "r"}, []string{"ID"}, "r"},
		{[]string{"--reason", "r", "ID"}, []string{"ID"}, "r"},
		{[]string{"--ttl", "1h", "ID", "--reason", "r"}, []string{"ID"}, "r"},
		{[]string{"A", "B", "--reason", "r"}, []string{"A", "B"}, "r"},
		{[]string{"--reason", "r", "--", "A", "--reason", "s"}, []string{"A", "--reason", "s"}, "r"},
	}
	for _, tt := range tests {
		fs := newFlagSet("test", "test", io.Discard)
		reason := fs.String("reason", "", "")
		fs.Duration("ttl", 0, "")
		pos, _, ok := parseArgs(fs, tt.args, io.Discard)
		if !ok || !slices.Equal(pos, tt.pos) || *reason != tt.reason {
			t.Errorf("parseArgs(%q) = %q, reason %q, %v; want %q, reason %q", tt.args, pos, *reason, ok, tt.pos, tt.reason)
		}
	}
}

// The help of the reviewer and account groups names every flag their
// verbs take: a reviewer reading "airlock approvals --help" learns of
// --grant as of --ttl.
func TestGroupHelpNamesVerbFlags(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for _, name := range []string{"approvals", "runs", "reviewer"} {
		_, groupHelp, _ := runCLI(t, name, "--help")
		for verb := range commands[name].group.verbs {
			_, verbHelp, _ := runCLI(t, name, verb, "--help")
			for _, m := range flagLine.FindAllStringSubmatch(verbHelp, -1) {
				if !strings.Contains(groupHelp, "--"+m[1]) {
					t.Errorf("airlock %s --help does not name --%s, a flag of %s", name, m[1], verb)
				}
			}
		}
	}
}
