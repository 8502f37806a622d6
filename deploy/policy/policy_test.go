package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// contractPolicy is the example of the contract, verbatim.
const contractPolicy = `verb "restart" {
  argv = ["/usr/bin/systemctl", "restart", "{service}"]   # {name} = a parameter, one argv element
  param "service" { enum = ["web", "worker"] }           # or: regex = "…" (full match), int = [min, max], path_under = "/srv/releases"
  timeout = "5m"
}
`

func TestParseContractExample(t *testing.T) {
	p, err := Parse([]byte(contractPolicy), "action.hcl")
	if err != nil {
		t.Fatal(err)
	}
	v := p.Verb("restart")
	if v == nil {
		t.Fatal("verb restart missing")
	}
	want := &Verb{
		Name:    "restart",
		Argv:    []string{"/usr/bin/systemctl", "restart", "{service}"},
		Params:  []*Param{{Name: "service", Kind: Enum, Values: []string{"web", "worker"}}},
		Timeout: 5 * time.Minute,
		Line:    1,
	}
	if diff := cmp.Diff(want, v, cmp.AllowUnexported(Param{}), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".argv"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("verb (-want +got):\n%s", diff)
	}
}

func TestParseProblemsCarryLines(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		wantLine int
	}{
		{"syntax error", "verb \"x\" {\n  argv = [\n", 3},
		{"unknown attribute", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  shell = true\n}\n", 3},
		{"no verbs", "log_file = \"/var/log/a.log\"\n", 1},
		{"no argv", "verb \"x\" {\n}\n", 1},
		{"empty argv", "verb \"x\" {\n  argv = []\n}\n", 2},
		{"argv not a list", "verb \"x\" {\n  argv = \"/bin/true\"\n}\n", 2},
		{"relative argv0", "verb \"x\" {\n  argv = [\"true\"]\n}\n", 2},
		{"param in argv0", "verb \"x\" {\n  argv = [\"/bin/{p}\"]\n  param \"p\" { enum = [\"a\"] }\n}\n", 2},
		{"undeclared param", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n}\n", 2},
		{"unused param", "verb \"x\" {\n  argv = [\"/bin/echo\"]\n  param \"p\" { enum = [\"a\"] }\n}\n", 1},
		{"stray brace", "verb \"x\" {\n  argv = [\"/bin/echo\", \"a}\"]\n}\n", 2},
		{"two types", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    enum = [\"a\"]\n    int = [1, 2]\n  }\n}\n", 3},
		{"no type", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {}\n}\n", 3},
		{"bad regex", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    regex = \"(\"\n  }\n}\n", 4},
		{"inverted int range", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    int = [5, 1]\n  }\n}\n", 4},
		{"relative path_under", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    path_under = \"srv\"\n  }\n}\n", 4},
		{"unclean path_under", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    path_under = \"/srv/../etc\"\n  }\n}\n", 4},
		{"leading_dash on enum", "verb \"x\" {\n  argv = [\"/bin/echo\", \"{p}\"]\n  param \"p\" {\n    enum = [\"a\"]\n    leading_dash = true\n  }\n}\n", 5},
		{"bad timeout", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  timeout = \"soon\"\n}\n", 3},
		{"zero timeout", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  timeout = \"0s\"\n}\n", 3},
		{"bad run_as", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  run_as = \"root; id\"\n}\n", 3},
		{"relative dir", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  dir = \"tmp\"\n}\n", 3},
		{"PATH in env", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  env = [\"PATH\"]\n}\n", 3},
		{"LD_PRELOAD in env", "verb \"x\" {\n  argv = [\"/bin/true\"]\n  env = [\"LD_PRELOAD\"]\n}\n", 3},
		{"duplicate verb", "verb \"x\" {\n  argv = [\"/bin/true\"]\n}\nverb \"x\" {\n  argv = [\"/bin/true\"]\n}\n", 4},
		{"bad verb name", "verb \"-x\" {\n  argv = [\"/bin/true\"]\n}\n", 1},
		{"variable reference", "verb \"x\" {\n  argv = [\"/bin/echo\", var.x]\n}\n", 2},
		{"control character in argv", "verb \"x\" {\n  argv = [\"/bin/echo\", \"a\\nb\"]\n}\n", 2},
		{"relative log_file", "log_file = \"a.log\"\nverb \"x\" {\n  argv = [\"/bin/true\"]\n}\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "action.hcl")
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse: got %v, want *policy.Error", err)
			}
			if len(pe.Problems) == 0 {
				t.Fatal("no problems")
			}
			got := pe.Problems[0]
			if got.File != "action.hcl" || got.Line != tt.wantLine {
				t.Errorf("first problem at %s:%d, want action.hcl:%d (%s)", got.File, got.Line, tt.wantLine, got.Message)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	src := "verb \"a\" {\n  argv = [\"true\"]\n}\nverb \"b\" {\n  argv = [\"/bin/true\"]\n  timeout = \"x\"\n}\n"
	_, err := Parse([]byte(src), "p.hcl")
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %v", err)
	}
	var lines []int
	for _, p := range pe.Problems {
		lines = append(lines, p.Line)
	}
	if diff := cmp.Diff([]int{2, 6}, lines); diff != "" {
		t.Errorf("problem lines (-want +got):\n%s", diff)
	}
}

func TestLoadRefusesHugeFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(f, []byte(strings.Repeat("#", maxPolicyBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *Error
	if _, err := Load(f); !errors.As(err, &pe) {
		t.Fatalf("Load: got %v, want *policy.Error", err)
	}
}

// testPolicy builds the policy used by the match tests, with path_under
// pointing into dir.
func testPolicy(t testing.TB, dir string) *Policy {
	t.Helper()
	src := `
verb "restart" {
  argv = ["/usr/bin/systemctl", "restart", "{service}"]
  param "service" { enum = ["web", "worker"] }
  timeout = "5m"
}
verb "logs" {
  argv    = ["/usr/bin/journalctl", "--unit={unit}", "--lines", "{n}", "--no-pager"]
  param "unit" { regex = "[a-z][a-z0-9-]*" }
  param "n" { int = [1, 1000] }
}
verb "grep" {
  argv = ["/bin/grep", "-e", "{pattern}", "--", "{file}"]
  param "pattern" {
    regex        = "[-a-z ]+"
    leading_dash = true
  }
  param "file" { path_under = "` + dir + `/releases" }
}
verb "deploy" {
  argv   = ["/usr/local/bin/deploy", "{{literal}}", "{version}"]
  param "version" { regex = "v[0-9]+[.][0-9]+" }
  run_as = "app"
  dir    = "/srv/app"
  env    = ["LANG"]
}
verb "uptime" {
  argv = ["/usr/bin/uptime"]
}
`
	p, err := Parse([]byte(src), "action.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// releasesDir makes dir/releases with a file, a subdirectory, a link
// inside, a link escaping to dir/secret, and a dangling link.
func releasesDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"releases/v1", "secret"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{
		{"v1", "releases/current"},
		{"../secret", "releases/escape"},
		{"/nonexistent/target", "releases/dangling"},
	} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "releases/v1/app.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMatch(t *testing.T) {
	dir := releasesDir(t)
	p := testPolicy(t, dir)
	tests := []struct {
		name    string
		command string
		want    *Plan
	}{
		{"enum", "restart web", &Plan{Args: []string{"web"}, Argv: []string{"/usr/bin/systemctl", "restart", "web"}, Timeout: 5 * time.Minute}},
		{"quoted enum", "restart 'worker'", &Plan{Args: []string{"worker"}, Argv: []string{"/usr/bin/systemctl", "restart", "worker"}, Timeout: 5 * time.Minute}},
		{"regex and int, embedded in an element", "logs api-2 50", &Plan{Args: []string{"api-2", "50"}, Argv: []string{"/usr/bin/journalctl", "--unit=api-2", "--lines", "50", "--no-pager"}, Timeout: DefaultTimeout}},
		{"int bounds inclusive", "logs a 1000", &Plan{Args: []string{"a", "1000"}, Argv: []string{"/usr/bin/journalctl", "--unit=a", "--lines", "1000", "--no-pager"}, Timeout: DefaultTimeout}},
		{"a value with spaces stays one element", "grep 'not found' " + dir + "/releases/v1/app.log", &Plan{Args: []string{"not found", dir + "/releases/v1/app.log"}, Argv: []string{"/bin/grep", "-e", "not found", "--", dir + "/releases/v1/app.log"}, Timeout: DefaultTimeout}},
		{"leading dash allowed when asked", "grep -v " + dir + "/releases/v1/app.log", &Plan{Args: []string{"-v", dir + "/releases/v1/app.log"}, Argv: []string{"/bin/grep", "-e", "-v", "--", dir + "/releases/v1/app.log"}, Timeout: DefaultTimeout}},
		{"path through a link that stays inside", "grep x " + dir + "/releases/current/app.log", &Plan{Args: []string{"x", dir + "/releases/current/app.log"}, Argv: []string{"/bin/grep", "-e", "x", "--", dir + "/releases/current/app.log"}, Timeout: DefaultTimeout}},
		{"path that does not exist yet", "grep x " + dir + "/releases/v2/new.log", &Plan{Args: []string{"x", dir + "/releases/v2/new.log"}, Argv: []string{"/bin/grep", "-e", "x", "--", dir + "/releases/v2/new.log"}, Timeout: DefaultTimeout}},
		{"run_as, dir, env, literal braces", "deploy v1.2", &Plan{Args: []string{"v1.2"}, Argv: []string{"/usr/bin/sudo", "-n", "-u", "app", "--", "/usr/local/bin/airlock-action", "--reap", "--", "/usr/local/bin/deploy", "{literal}", "v1.2"}, Dir: "/srv/app", Timeout: DefaultTimeout, Env: []string{"LANG"}}},
		{"no params", "uptime", &Plan{Args: []string{}, Argv: []string{"/usr/bin/uptime"}, Timeout: DefaultTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Match(tt.command)
			if err != nil {
				t.Fatalf("Match(%q): %v", tt.command, err)
			}
			if got.Verb == nil {
				t.Fatal("no verb in plan")
			}
			got.Verb = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Match(%q) (-want +got):\n%s", tt.command, diff)
			}
		})
	}
}

func TestMatchRefuses(t *testing.T) {
	dir := releasesDir(t)
	p := testPolicy(t, dir)
	tests := []struct {
		name    string
		command string
		want    error
	}{
		{"unknown verb", "reboot", ErrUnknownVerb},
		{"verb is case-sensitive", "RESTART web", ErrUnknownVerb},
		{"shell as verb", "sh -c id", ErrUnknownVerb},
		{"absolute program as verb", "/usr/bin/systemctl restart web", ErrUnknownVerb},
		{"missing argument", "restart", ErrArgCount},
		{"extra argument", "restart web worker", ErrArgCount},
		{"extra option", "restart web --force", ErrArgCount},
		{"arguments to a verb without params", "uptime -p", ErrArgCount},
		{"not in enum", "restart nginx", ErrNotInEnum},
		{"enum prefix", "restart we", ErrNotInEnum},
		{"enum with suffix", "restart web2", ErrNotInEnum},
		{"empty enum value", "restart ''", ErrNotInEnum},
		{"regex is anchored at the start", "logs 9api 5", ErrNoMatch},
		{"regex is anchored at the end", "logs api/x 5", ErrNoMatch},
		{"alternation cannot escape the anchors", "deploy v1.2x", ErrNoMatch},
		{"option smuggled through a regex", "logs -help 5", ErrNoMatch},
		{"int below", "logs a 0", ErrOutOfRange},
		{"int above", "logs a 1001", ErrOutOfRange},
		{"int overflow", "logs a 99999999999999999999", ErrOutOfRange},
		{"int with sign", "logs a +5", ErrNotInteger},
		{"int with leading zero", "logs a 05", ErrNotInteger},
		{"negative zero", "logs a -0", ErrNotInteger},
		{"int hex", "logs a 0x10", ErrNotInteger},
		{"int with space", "logs a '5 '", ErrNotInteger},
		{"path traversal", "grep x " + dir + "/releases/../secret/k", ErrPathTraversal},
		{"path traversal at the end", "grep x " + dir + "/releases/..", ErrPathTraversal},
		{"relative path", "grep x releases/v1/app.log", ErrPathNotClean},
		{"double slash", "grep x " + dir + "/releases//v1", ErrPathNotClean},
		{"dot component", "grep x " + dir + "/releases/./v1", ErrPathNotClean},
		{"trailing slash", "grep x " + dir + "/releases/v1/", ErrPathNotClean},
		{"the prefix itself", "grep x " + dir + "/releases", ErrPathOutside},
		{"sibling with the prefix as a string prefix", "grep x " + dir + "/releases-old/x", ErrPathOutside},
		{"outside", "grep x /etc/passwd", ErrPathOutside},
		{"symlink escape", "grep x " + dir + "/releases/escape/k", ErrSymlinkEscape},
		{"symlink escape, the link itself", "grep x " + dir + "/releases/escape", ErrSymlinkEscape},
		{"dangling link", "grep x " + dir + "/releases/dangling", ErrSymlinkEscape},
		{"through a file", "grep x " + dir + "/releases/v1/app.log/x", ErrPathUnchecked},
		{"metacharacter before matching", "restart web; id", ErrMetachar},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Match(tt.command)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Match(%q) = %+v, %v; want error %v", tt.command, got, err, tt.want)
			}
			if got != nil {
				t.Errorf("refused request still has a plan: %+v", got)
			}
		})
	}
}

func TestMatchErrorsNameTheParam(t *testing.T) {
	p := testPolicy(t, t.TempDir())
	_, err := p.Match("logs api 0")
	var ae *ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want *ArgError", err)
	}
	if diff := cmp.Diff(ArgError{Verb: "logs", Param: "n", Value: "0", Err: ErrOutOfRange}, *ae, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzMatch checks, for any request against a fixed policy, that Match
// never panics and that an accepted request yields exactly the verb's argv
// shape: the fixed program, one element per template element, literal
// elements unchanged, and every argument valid for its param.
func FuzzMatch(f *testing.F) {
	dir := releasesDir(f)
	p := testPolicy(f, dir)
	for _, s := range []string{
		"restart web", "restart 'web'", "restart web; id", "logs api 10", "logs -x 1", "logs a 1001",
		"grep x " + dir + "/releases/v1/app.log", "grep x " + dir + "/releases/../secret",
		"grep x " + dir + "/releases/escape/k", "deploy v1.2", "deploy 'v1.2 --x'", "uptime", "uptime x",
		"reboot", "", "restart\nweb", "restart \xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		plan, err := p.Match(command)
		if err != nil {
			if plan != nil {
				t.Fatalf("refused %q with a plan", command)
			}
			return
		}
		// Judged as text (the gateway's MatchText), what the target
		// accepts is accepted too: the text check is part of the full one.
		if tp, err := p.MatchText(command); err != nil || !slices.Equal(tp.Argv, plan.Argv) {
			t.Fatalf("MatchText(%q) = %v, %v; Match accepted it as %q", command, tp, err, plan.Argv)
		}
		v := plan.Verb
		argv := plan.Argv
		if v.RunAs != "" {
			want := SudoPrefix(v.RunAs, DefaultReaper)
			if diff := cmp.Diff(want, argv[:len(want)]); diff != "" {
				t.Fatalf("sudo prefix (-want +got):\n%s", diff)
			}
			argv = argv[len(want):]
		}
		if len(argv) != len(v.Argv) || argv[0] != v.Argv[0] {
			t.Fatalf("argv %q does not have the shape of %q", argv, v.Argv)
		}
		for i, el := range v.argv {
			if len(el) == 1 && el[0].param == "" && argv[i] != el[0].text {
				t.Fatalf("literal argv[%d] = %q, want %q", i, argv[i], el[0].text)
			}
		}
		if len(plan.Args) != len(v.Params) {
			t.Fatalf("%d args for %d params", len(plan.Args), len(v.Params))
		}
		for i, prm := range v.Params {
			if err := prm.check(plan.Args[i], true); err != nil {
				t.Fatalf("accepted arg %q for %s: %v", plan.Args[i], prm.Name, err)
			}
			if prm.Kind == Regex && !prm.LeadingDash && strings.HasPrefix(plan.Args[i], "-") {
				t.Fatalf("accepted option-like %q", plan.Args[i])
			}
			if prm.Kind == PathUnder && (strings.Contains(plan.Args[i], "..") && strings.Contains("/"+plan.Args[i]+"/", "/../")) {
				t.Fatalf("accepted traversal %q", plan.Args[i])
			}
		}
	})
}

func TestVerbClassAndMatchText(t *testing.T) {
	p, err := Parse([]byte(`
verb "status" {
  argv  = ["/usr/bin/systemctl", "status", "web"]
  class = "read_only"
}
verb "fetch" {
  argv = ["/usr/bin/cat", "{file}"]
  param "file" { path_under = "/nonexistent-on-this-host/logs" }
}
`), "action.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Verb("status").Class; c != "read_only" {
		t.Errorf("class %q", c)
	}
	// The prefix does not exist here: Match refuses, MatchText judges the
	// path as text.
	if _, err := p.Match("fetch /nonexistent-on-this-host/logs/app.log"); !errors.Is(err, ErrPathOutside) {
		t.Errorf("Match: %v", err)
	}
	if _, err := p.MatchText("fetch /nonexistent-on-this-host/logs/app.log"); err != nil {
		t.Errorf("MatchText: %v", err)
	}
	for _, bad := range []string{"fetch /nonexistent-on-this-host/logs/../../etc/passwd", "fetch /etc/passwd", "fetch /nonexistent-on-this-host/logs//x"} {
		if _, err := p.MatchText(bad); err == nil {
			t.Errorf("MatchText(%q) accepted", bad)
		}
	}
	_, err = Parse([]byte(`verb "x" {
  argv  = ["/bin/true"]
  class = "harmless"
}`), "bad.hcl")
	if err == nil || !strings.Contains(err.Error(), `class "harmless" is not one of read_only`) {
		t.Errorf("an unknown class: %v", err)
	}
}

func TestTransferBlock(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "in"), 0o755)
	os.Symlink("/etc", filepath.Join(dir, "in", "out"))
	p, err := Parse([]byte(`transfer {
  put_under = ["`+dir+`/in"]
  get_under = ["/var/log/app"]
  max_size  = "1MiB"
}`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if p.Transfer.MaxSize != 1<<20 {
		t.Errorf("max_size %d", p.Transfer.MaxSize)
	}
	sum := strings.Repeat("ab", 32)
	tr, err := p.MatchTransfer("put "+dir+"/in/a.yml 0640 12 "+sum+" overwrite", true)
	if err != nil || !tr.Put || tr.Mode != 0o640 || tr.Size != 12 || !tr.Overwrite || tr.Path != dir+"/in/a.yml" {
		t.Fatalf("put: %+v %v", tr, err)
	}
	if tr, err := p.MatchTransfer("get /var/log/app/error.log", false); err != nil || tr.Put {
		t.Fatalf("get as text: %+v %v", tr, err)
	}
	for _, bad := range []string{
		"put " + dir + "/in/a 0640 12 " + sum + " force", // not overwrite
		"put " + dir + "/in/a 4755 12 " + sum,            // setuid
		"put " + dir + "/in/a 0640 2000000 " + sum,       // over max_size
		"put " + dir + "/in/a 0640 12 abc",               // not a digest
		"put " + dir + "/in/out/passwd 0640 12 " + sum,   // a link leading out
		"put " + dir + "/a 0640 12 " + sum,               // outside put_under
		"put " + dir + "/in/../a 0640 12 " + sum,         // traversal
		"get /var/log/app",                               // the prefix itself
		"get /var/log/app/a /var/log/app/b",              // two paths
		"get " + dir + "/in/a",                           // outside get_under
	} {
		if tr, err := p.MatchTransfer(bad, true); err == nil {
			t.Errorf("%q accepted: %+v", bad, tr)
		}
	}
	if tr, err := p.MatchTransfer("restart web", true); tr != nil || err != nil {
		t.Errorf("another verb: %+v %v", tr, err)
	}
	noBlock, _ := Parse([]byte(`verb "x" { argv = ["/bin/true"] }`), "n.hcl")
	if _, err := noBlock.MatchTransfer("get /x/y", true); !errors.Is(err, ErrNoTransfer) {
		t.Errorf("without a transfer block: %v", err)
	}
	if _, err := Parse([]byte(`transfer {}`), "e.hcl"); err == nil {
		t.Error("an empty transfer block was accepted")
	}
	if _, err := Parse([]byte("transfer {\n  get_under = [\"/x\"]\n}\nverb \"get\" { argv = [\"/bin/true\"] }"), "d.hcl"); err == nil {
		t.Error("a verb named like a built-in was accepted")
	}
}
