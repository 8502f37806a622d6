package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want options
	}{
		{"plain", []string{"build-box", "uptime"}, options{target: "build-box", command: "uptime"}},
		{"args joined with single spaces", []string{"build-box", "ls", "-la", "/srv"}, options{target: "build-box", command: "ls -la /srv"}},
		{"account@target", []string{"deploy@build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"-l account", []string{"-l", "deploy", "build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"-laccount", []string{"-ldeploy", "build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"flags", []string{"--json", "--timeout", "30s", "--socket=/run/a.sock", "t", "true"}, options{json: true, timeout: 30 * time.Second, socket: "/run/a.sock", target: "t", command: "true"}},
		{"timeout in seconds", []string{"--timeout=90", "t", "true"}, options{timeout: 90 * time.Second, target: "t", command: "true"}},
		{"-- before the command", []string{"t", "--", "ls", "-l"}, options{target: "t", command: "ls -l"}},
		{"-- before the target", []string{"--", "t", "echo", "--json"}, options{target: "t", command: "echo --json"}},
		{"flags after the target belong to the command", []string{"t", "grep", "-A", "3", "x"}, options{target: "t", command: "grep -A 3 x"}},
		{"-T is a no-op", []string{"-T", "t", "true"}, options{target: "t", command: "true"}},
		{"-n and a reason", []string{"-n", "--reason", "check the disk", "t", "df"}, options{noStdin: true, reason: "check the disk", target: "t", command: "df"}},
		{"a secret", []string{"--secret=db", "t", "psql"}, options{secret: "db", target: "t", command: "psql"}},
		{"--accept-truncation", []string{"--accept-truncation", "t", "seq 9"}, options{acceptCut: true, target: "t", command: "seq 9"}},
		{"a put", []string{"--put", "conf.yml", "deploy@web:/srv/app/conf.yml", "--mode", "0640"}, options{put: true, local: "conf.yml", account: "deploy", target: "web", remote: "/srv/app/conf.yml", mode: "0640"}},
		{"--action", []string{"--json", "--action", "act_1"}, options{json: true, action: "act_1"}},
		{"--action=", []string{"--accept-truncation", "--action=act_1"}, options{acceptCut: true, action: "act_1"}},
		{"-l and the same account@", []string{"-l", "deploy", "deploy@t", "id"}, options{account: "deploy", target: "t", command: "id"}},
		{"a lone - is the target", []string{"-", "true"}, options{target: "-", command: "true"}},
		{"a get", []string{"--overwrite", "--get", "web:/var/log/app.log", "app.log"}, options{get: true, overwrite: true, local: "app.log", target: "web", remote: "/var/log/app.log"}},

		// As ssh reads them: flags after the target, until the command
		// begins or a "--".
		{"-l after the target, then --", []string{"t", "-l", "ops", "--", "id"}, options{account: "ops", target: "t", command: "id"}},
		{"-l after the target", []string{"t", "-l", "ops", "id", "-u"}, options{account: "ops", target: "t", command: "id -u"}},
		{"-lACCOUNT after the target", []string{"t", "-lops", "id"}, options{account: "ops", target: "t", command: "id"}},
		{"flags on both sides", []string{"-n", "t", "--timeout", "5m", "-T", "--json", "id"}, options{noStdin: true, timeout: 5 * time.Minute, json: true, target: "t", command: "id"}},
		{"a cluster", []string{"-nTlops", "t", "id"}, options{noStdin: true, account: "ops", target: "t", command: "id"}},
		{"a cluster after the target, its -l value next", []string{"t", "-nl", "ops", "id"}, options{noStdin: true, account: "ops", target: "t", command: "id"}},
		{"-x and -a are what every action is", []string{"-x", "t", "-a", "true"}, options{target: "t", command: "true"}},
		{"the same account twice", []string{"ops@t", "-l", "ops", "id"}, options{account: "ops", target: "t", command: "id"}},
		{"-- after the target sends a command that begins with -", []string{"t", "--", "-x"}, options{target: "t", command: "-x"}},
		{"-- on both sides", []string{"--", "t", "--", "-x", "y"}, options{target: "t", command: "-x y"}},
		{"flags after the command are the command's", []string{"t", "ls", "-l", "ops"}, options{target: "t", command: "ls -l ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRefuses: every command line parse refuses, with the kind of
// its message (and the flag at fault, where there is one).
func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		kind usageKind
		flag string
	}{
		// ssh's flags that would open a hole.
		{"-A agent forwarding", []string{"-A", "t", "true"}, refusedFlag, "-A"},
		{"-L port forwarding", []string{"-L", "8080:localhost:80", "t", "true"}, refusedFlag, "-L"},
		{"-L with its value attached", []string{"-L8080:localhost:80", "t", "true"}, refusedFlag, "-L"},
		{"-R port forwarding", []string{"-R", "9000:localhost:22", "t", "true"}, refusedFlag, "-R"},
		{"-D dynamic forwarding", []string{"-D", "1080", "t", "true"}, refusedFlag, "-D"},
		{"-X X11", []string{"-X", "t", "true"}, refusedFlag, "-X"},
		{"-Y X11", []string{"-Y", "t", "true"}, refusedFlag, "-Y"},
		{"-W stdio forwarding", []string{"-W", "h:22", "t", "true"}, refusedFlag, "-W"},
		{"-J jump host", []string{"-J", "jump", "t", "true"}, refusedFlag, "-J"},
		{"-M shared connection", []string{"-M", "t", "true"}, refusedFlag, "-M"},
		{"-S control socket", []string{"-S", "/tmp/ctl", "t", "true"}, refusedFlag, "-S"},
		{"-o option", []string{"-o", "ProxyCommand=nc", "t", "true"}, refusedFlag, "-o"},
		{"-F config file", []string{"-F", "/dev/null", "t", "true"}, refusedFlag, "-F"},
		{"-i identity", []string{"-i", "key", "t", "true"}, refusedFlag, "-i"},
		{"-p port", []string{"-p", "2222", "t", "true"}, refusedFlag, "-p"},
		{"-t terminal", []string{"-t", "t", "true"}, refusedFlag, "-t"},
		{"-tt terminal", []string{"-tt", "t", "true"}, refusedFlag, "-t"},
		{"-N no command", []string{"-N", "t"}, refusedFlag, "-N"},
		{"-f background", []string{"-f", "t", "true"}, refusedFlag, "-f"},

		{"unknown flag", []string{"--bogus", "t", "true"}, unknownFlag, "--bogus"},
		{"unknown short flag", []string{"-z", "t", "true"}, unknownFlag, "-z"},
		{"unknown flag in a cluster", []string{"-nz", "t", "true"}, unknownFlag, "-z"},

		// ssh's other flags, which airlock-ssh cannot honour.
		{"-q quiet", []string{"-q", "t", "true"}, refusedFlag, "-q"},
		{"-v verbose", []string{"-v", "t", "true"}, refusedFlag, "-v"},
		{"-4 address family in a cluster", []string{"-n4", "t", "true"}, refusedFlag, "-4"},

		// After the target, as before it.
		{"-A after the target", []string{"t", "-A", "true"}, refusedFlag, "-A"},
		{"-p after the target", []string{"t", "-p", "22", "true"}, refusedFlag, "-p"},
		{"-q after the target", []string{"t", "-q", "true"}, refusedFlag, "-q"},
		{"an unknown flag after the target is not the command", []string{"t", "-rf", "/tmp/x"}, unknownFlag, "-r"},
		{"an unknown long flag after the target", []string{"t", "--force", "x"}, unknownFlag, "--force"},
		{"-l without a value after the target", []string{"t", "-l"}, missingValue, "-l"},
		{"no command after flags after the target", []string{"t", "-l", "ops"}, missingOperand, ""},
		{"no command after flags and --", []string{"t", "-n", "--"}, missingOperand, ""},
		{"another account after the target", []string{"a@t", "-l", "b", "id"}, badCombination, "-l"},
		{"another -l after the target", []string{"-l", "a", "t", "-l", "b", "id"}, badCombination, "-l"},
		{"--put after the target", []string{"t", "--put", "a", "t:/x"}, badCombination, "--put"},
		{"--action= after the target", []string{"t", "--action=act_1"}, badCombination, "--action"},
		{"--mode after the target", []string{"t", "--mode", "0644", "id"}, badCombination, "--mode"},
		{"a flag after -- before the target", []string{"--", "t", "-l", "ops", "id"}, badCombination, "-l"},
		{"a lone - as the command", []string{"t", "-"}, badCombination, "-"},

		{"-l without a value", []string{"-l"}, missingValue, "-l"},
		{"--timeout without a value", []string{"--timeout"}, missingValue, "--timeout"},
		{"--socket without a value", []string{"--socket"}, missingValue, "--socket"},
		{"--put without its paths", []string{"--put", "a"}, missingValue, "--put"},

		{"--timeout 0s", []string{"--timeout", "0s", "t", "true"}, badValue, "--timeout"},
		{"--timeout soon", []string{"--timeout", "soon", "t", "true"}, badValue, "--timeout"},
		{"--timeout under a second", []string{"--timeout=500ms", "t", "true"}, badValue, "--timeout"},
		{"--reason too long", []string{"--reason", strings.Repeat("x", 501), "t", "true"}, badValue, "--reason"},
		{"--secret empty", []string{"--secret=", "t", "true"}, badValue, "--secret"},
		{"--put without a remote path", []string{"--put", "a", "web", "x"}, badValue, "--put"},
		{"--get without a local path", []string{"--get", "web:/x", ""}, badValue, "--get"},

		{"account given twice", []string{"-l", "a", "b@t", "true"}, badCombination, "-l"},
		{"account given twice to a put", []string{"-l", "root", "--put", "a", "deploy@web:/x"}, badCombination, "-l"},
		{"a put with a command", []string{"--put", "a", "web:/x", "ls"}, badCombination, ""},
		{"two transfers", []string{"--put", "a", "web:/x", "--get", "web:/y", "b"}, badCombination, "--get"},
		{"--mode without a put", []string{"--mode", "0644", "web", "ls"}, badCombination, "--mode"},
		{"--overwrite without a transfer", []string{"--overwrite", "web", "ls"}, badCombination, "--overwrite"},
		{"--secret with a transfer", []string{"--secret", "s", "--put", "a", "web:/x"}, badCombination, "--secret"},
		{"--action with a target", []string{"--action", "act_1", "t", "true"}, badCombination, "--action"},

		{"nothing", []string{}, missingOperand, ""},
		{"no command", []string{"t"}, missingOperand, ""},
		{"no command after --", []string{"t", "--"}, missingOperand, ""},
		{"empty target", []string{"@", "true"}, missingOperand, ""},
		{"empty transfer target", []string{"--get", "deploy@:/x", "b"}, missingOperand, ""},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parse(%q) = %v, want a usage error", tt.args, err)
			}
			if got, want := [2]any{ue.kind, ue.flag}, [2]any{tt.kind, tt.flag}; got != want {
				t.Errorf("parse(%q): kind, flag = %v, want %v (%v)", tt.args, got, want, err)
			}
			if why := refusal(tt.flag); tt.kind == refusedFlag && (why == "" || !strings.Contains(err.Error(), why)) {
				t.Errorf("parse(%q) = %v, want the reason %q", tt.args, err, why)
			}
		})
		if tt.kind == refusedFlag {
			seen[tt.flag] = true
		}
	}
	for flag := range refused {
		if !seen[flag] {
			t.Errorf("refused flag %s has no case here", flag)
		}
	}
}

// TestParseHelpAndVersion: --help and --version stop the parse at once.
func TestParseHelpAndVersion(t *testing.T) {
	for args, want := range map[string]error{"-h": errHelp, "--help": errHelp, "--version": errVersion} {
		if _, err := parse([]string{args, "-A"}); !errors.Is(err, want) {
			t.Errorf("parse(%q) = %v, want %v", args, err, want)
		}
	}
}

// FuzzParse: parse never panics, and what it accepts names a target or an
// earlier action. The arguments are joined with NUL.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"deploy@t\x00ls\x00-la", "-l\x00root\x00t\x00--\x00id", "--put\x00a\x00web:/x", "--action=act_1", "-L8080\x00t", "--timeout=5m\x00t\x00true", "t\x00-nlops\x00--\x00-x", "--\x00t\x00-l\x00x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		o, err := parse(strings.Split(joined, "\x00"))
		if err == nil && o.target == "" && o.action == "" {
			t.Errorf("parse(%q) accepted %+v: no target and no action", joined, o)
		}
		// A command that begins with - is one a "--" right before it
		// asked for.
		if args := strings.Split(joined, "\x00"); err == nil && strings.HasPrefix(o.command, "-") && !slices.Contains(args, "--") {
			t.Errorf("parse(%q) sent %q as the command without a --", joined, o.command)
		}
	})
}
