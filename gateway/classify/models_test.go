package classify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// The option tables are checked against the programs themselves: what
// `PROGRAM --help` lists must be in the table with the same arity, and
// what the table has beyond it must be accounted for here.

// helpName is one option name a help line lists.
type helpName struct {
	short byte
	long  string
	arg   ArgKind
	// explicit: the name itself shows its value (-t SEP, -I[FMT]); a
	// short name without one takes its long names' arity.
	explicit bool
	// literal: the value shown is one of its choices (--check=quiet),
	// not a placeholder.
	literal bool
}

// helpByHand are the modelled programs whose --help is not in a form
// the test reads, with why; their tables were checked by hand against
// their manual pages and sources.
var helpByHand = map[string]string{
	"ps":      "--help prints sections, UNIX (-o), BSD (o) and GNU (--format) forms mixed; the table follows procps 4.0's parser",
	"lsof":    "its help is a usage summary; the table follows lsof 4.95's option rules",
	"which":   "debianutils' which is a script: getopts a, no --help",
	"pidof":   "sysvinit's pidof has no --help: getopt \"qhco:d:sxzn\", no long options",
	"jq":      "jq 1.6 reads its options itself, and --arg, --argjson, --slurpfile and --rawfile take two values",
	"iostat":  "sysstat's usage lines in brackets; its options read from its source (sysstat 12.6)",
	"mpstat":  "sysstat's usage lines in brackets; its options read from its source (sysstat 12.6)",
	"pidstat": "sysstat's usage lines in brackets; its options read from its source (sysstat 12.6)",
	"netstat": "--help lists the socket options in braces on one line; getopt \"A:CFMacdeghilnNoprsStuUvVWw2fx64?Z\"",
}

// helpNotOptions are what a help text shows like an option but is not
// one (a range of fields in cut's list of its syntax), per program.
var helpNotOptions = map[string]map[string]bool{
	"cut":    {"-M": true},
	"numfmt": {"-M": true},
	"diff":   {"--GTYPE-group-format": true, "--LTYPE-line-format": true},
	"rsync":  {"--no-OPTION": true},
}

// helpHidden are options a table has that --help does not list (from
// the manual page or the source), per program, with why.
var helpHidden = map[string]map[string]string{
	"diff": {
		"--old-group-format": "what --GTYPE-group-format stands for", "--new-group-format": "what --GTYPE-group-format stands for",
		"--unchanged-group-format": "what --GTYPE-group-format stands for", "--changed-group-format": "what --GTYPE-group-format stands for",
		"--old-line-format": "what --LTYPE-line-format stands for", "--new-line-format": "what --LTYPE-line-format stands for",
		"--unchanged-line-format": "what --LTYPE-line-format stands for",
	},
	"strings": {"-H": "the source's other name for -h"},
	"hostname": {
		"-h": "its usage line", "-?": "the source's other name for -h", "-V": "its usage line",
		"--help": "its usage line", "--version": "its usage line",
	},
}

// helpArity corrects what a help line says of an option's value where
// the program's getopt string says otherwise.
var helpArity = map[string]map[string]ArgKind{
	// file's getopt string has "P:"; its help forgets the value.
	"file": {"-P": RequiredArg, "--parameter": RequiredArg},
	// util-linux's getopt strings give a short option an optional value
	// where its long one has one (hexdump -Lx: "unsupported color mode").
	"hexdump": {"-L": OptionalArg},
	"dmesg":   {"-L": OptionalArg},
	"findmnt": {"-p": OptionalArg},
	"lsblk":   {"-T": OptionalArg},
	"lscpu":   {"-C": OptionalArg, "-e": OptionalArg, "-p": OptionalArg},
	"lsns":    {"-T": OptionalArg, "--tree": OptionalArg},
	// journalctl: "b::", "n::".
	"journalctl": {"-b": OptionalArg, "-n": OptionalArg},
	// hostname: "aAdfbF:h?iIsVy"; its help forgets -F's value.
	"hostname": {"-F": RequiredArg, "--file": RequiredArg},
	// ss: "N:" (the namespace's name); its help forgets the value.
	"ss": {"-N": RequiredArg, "--net": RequiredArg},
}

// helpNames reads the option names of a GNU-formed --help: lines that
// start, indented a little, with "-".
func helpNames(text string) [][]helpName {
	var out [][]helpName
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if len(line)-len(trimmed) > 12 || !strings.HasPrefix(trimmed, "-") {
			continue
		}
		if names := helpLine(strings.Fields(namesPart(trimmed))); len(names) > 0 {
			out = append(out, names)
		}
	}
	// A long name listed on one line with a value and on another
	// without takes an optional one.
	arities := map[string]map[ArgKind]bool{}
	for _, line := range out {
		for _, n := range line {
			if n.long != "" {
				if arities[n.long] == nil {
					arities[n.long] = map[ArgKind]bool{}
				}
				arities[n.long][n.arg] = true
			}
		}
	}
	for _, line := range out {
		for i, n := range line {
			if a := arities[n.long]; a[OptionalArg] || a[NoArg] && len(a) > 1 {
				line[i].arg = OptionalArg
			}
		}
	}
	return out
}

// namesPart is a help line up to its description: the first run of
// two spaces that is not followed by another name (stat's "-c  --format").
func namesPart(line string) string {
	for i := 0; i+2 < len(line); i++ {
		if line[i] == ' ' && line[i+1] == ' ' {
			rest := strings.TrimLeft(line[i:], " ")
			if !strings.HasPrefix(rest, "-") {
				return line[:i]
			}
		}
	}
	return line
}

// helpLine reads the names of one help line, given as fields, up to the
// first that is neither a name nor a value's placeholder.
func helpLine(fields []string) []helpName {
	var names []helpName
	for i := 0; i < len(fields); i++ {
		f := strings.TrimSuffix(fields[i], ",")
		if f == "-" {
			continue // strings' "-a - --all"
		}
		if r := digitRange(fields[i:]); r != nil {
			names, i = append(names, r...), i+2
			continue
		}
		placeholder := i+1 < len(fields) && isPlaceholder(strings.TrimSuffix(fields[i+1], ","))
		var n helpName
		switch {
		case strings.HasPrefix(f, "--") && len(f) > 2:
			n.long = f[2:]
			if name, val, ok := strings.Cut(n.long, "["); ok && strings.HasPrefix(val, "=") {
				n.long, n.arg, n.explicit = name, OptionalArg, true
			} else if name, val, ok := strings.Cut(n.long, "="); ok {
				n.long, n.arg, n.explicit = name, RequiredArg, true
				n.literal = !isPlaceholder(val) && !strings.HasPrefix(val, "{")
			}
		case strings.HasPrefix(f, "-") && len(f) >= 2 && isOptionLetter(f[1]):
			n.short = f[1]
			switch rest := f[2:]; {
			case strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]"):
				n.arg, n.explicit = OptionalArg, true
			case rest != "":
				// -NUM, -COLUMN: a numeric form, not a letter.
				continue
			}
		default:
			return mergeHelp(names)
		}
		if placeholder && !n.explicit {
			n.arg, n.explicit = RequiredArg, true
			i++
		}
		names = append(names, n)
	}
	return mergeHelp(names)
}

// digitRange reads "-1 .. -9" (or "-0 ... -9"), digits as options.
func digitRange(fields []string) []helpName {
	if len(fields) < 3 || len(fields[0]) != 2 || len(fields[2]) != 2 || fields[0][0] != '-' || fields[2][0] != '-' ||
		strings.Trim(fields[1], ".") != "" || !isDigit(fields[0][1]) || !isDigit(fields[2][1]) {
		return nil
	}
	var out []helpName
	for d := fields[0][1]; d <= fields[2][1]; d++ {
		out = append(out, helpName{short: d, explicit: true})
	}
	return out
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isOptionLetter(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '?'
}

// isPlaceholder: a help line's name for a value (FILE, <list>, [N]).
func isPlaceholder(f string) bool {
	switch {
	case strings.HasPrefix(f, "<") || strings.HasPrefix(f, "[") || strings.HasPrefix(f, "{"):
		return true
	case strings.HasPrefix(f, "-"):
		return false
	}
	upper := false
	for _, r := range f {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case strings.ContainsRune("_-.:,", r) || r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return upper
}

// mergeHelp settles one line's arities: a long name listed both with and
// without a value (--check, --check=quiet) takes an optional one; a
// short name without a value of its own takes a value when a long name
// of its line requires one (GNU: "mandatory arguments to long options
// are mandatory for short options too").
func mergeHelp(names []helpName) []helpName {
	var out []helpName
	seen := map[string]int{}
	for _, n := range names {
		if n.long != "" {
			if j, ok := seen[n.long]; ok {
				if out[j].arg != n.arg {
					out[j].arg = OptionalArg
				}
				continue
			}
			seen[n.long] = len(out)
		}
		out = append(out, n)
	}
	required := false
	for _, n := range out {
		required = required || n.long != "" && n.arg == RequiredArg && !n.literal
	}
	for i := range out {
		if out[i].short != 0 && !out[i].explicit && required {
			out[i].arg = RequiredArg
		}
	}
	return out
}

// runHelp runs PROGRAM --help in the C locale.
func runHelp(t *testing.T, prog string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "--help")
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PAGER=cat", "SYSTEMD_PAGER=cat")
	out, _ := cmd.CombinedOutput() // some exit 1 or 2 after printing
	return string(out)
}

func optName(o *option) string {
	if o.long != "" {
		return "--" + o.long
	}
	return "-" + string(o.short)
}

var argNames = map[ArgKind]string{NoArg: "no value", RequiredArg: "a value", OptionalArg: "an optional value"}

// checkHelp compares g with what help lists; it returns the problems.
func checkHelp(prog string, g *grammar, help string) []string {
	var problems []string
	listed := map[*option]bool{}
	for _, line := range helpNames(help) {
		var first *option
		for _, n := range line {
			o, key := g.byShort[n.short], "-"+string(n.short)
			if n.long != "" {
				o, key = g.byLong[n.long], "--"+n.long
			}
			if helpNotOptions[prog][key] {
				continue
			}
			want := n.arg
			if a, ok := helpArity[prog][key]; ok {
				want = a
			}
			switch {
			case o == nil:
				problems = append(problems, fmt.Sprintf("%s lists %s, the table does not have it", prog, key))
				continue
			case o.arg != want:
				problems = append(problems, fmt.Sprintf("%s %s takes %s, the table gives it %s", prog, key, argNames[want], argNames[o.arg]))
			}
			listed[o] = true
			if first == nil {
				first = o
			} else if o.class != first.class || o.value != first.value {
				problems = append(problems, fmt.Sprintf("%s %s and %s are one option, the table gives them different effects", prog, optName(first), key))
			}
		}
	}
	keys := map[string]bool{}
	for _, o := range g.opts {
		key := optName(o)
		keys[key] = true
		switch why := helpHidden[prog][key]; {
		case !listed[o] && why == "":
			problems = append(problems, fmt.Sprintf("%s: the table has %s, --help does not list it and helpHidden does not say why", prog, key))
		case listed[o] && why != "":
			problems = append(problems, fmt.Sprintf("%s: helpHidden has %s, which --help lists", prog, key))
		}
	}
	for key := range helpHidden[prog] {
		if !keys[key] {
			problems = append(problems, fmt.Sprintf("%s: helpHidden has %s, which the table does not", prog, key))
		}
	}
	return problems
}

// TestGrammarsMatchHelp checks every modelled program found on this
// machine against its --help.
func TestGrammarsMatchHelp(t *testing.T) {
	var names []string
	for n := range grammars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g := grammars[n]
		if why, ok := helpByHand[n]; ok && why != "" {
			t.Logf("%s: checked by hand: %s", n, why)
			continue
		}
		p, err := exec.LookPath(n)
		if err != nil {
			// Targets differ from this machine: a table of a program
			// not here is checked where it is.
			t.Logf("%s is not installed here: its table is not checked against its --help", n)
			continue
		}
		help := runHelp(t, p)
		if len(helpNames(help)) == 0 {
			t.Errorf("%s --help lists no option the test can read:\n%s", n, help)
			continue
		}
		for _, pr := range checkHelp(n, g, help) {
			t.Error(pr)
		}
	}
	for _, m := range []map[string]bool{keys(helpByHand), keys(helpHidden), keys(helpArity), keys(helpNotOptions)} {
		for prog := range m {
			if grammars[prog] == nil {
				t.Errorf("the test's allowances name %s, which is not modelled", prog)
			}
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// TestGrammarHelpParser checks the reading of help lines on the forms
// the programs use.
func TestGrammarHelpParser(t *testing.T) {
	for _, tc := range []struct{ help, want string }{
		{"  -k, --key=KEYDEF   sort via a key", "-k= --key="},
		{"  -c, --check, --check=diagnose-first  check", "-c --check?"},
		{"      --color[=WHEN]  colorize", "--color?"},
		{"  -t SEP   use SEP", "-t="},
		{"  -n, --lines=[-]NUM   print", "-n= --lines="},
		{"  -I[FMT], --iso-8601[=FMT]  output", "-I? --iso-8601?"},
		{"  -F, --classify[=WHEN]  append", "-F --classify?"},
		{"  -c  --format=FORMAT   use", "-c= --format="},
		{" -o, --output <list>  output columns", "-o= --output="},
		{"     --since <time>   display", "--since="},
		{"   -f, --family=FAMILY display sockets", "-f= --family="},
		{"  -i, --ignore-initial=SKIP1:SKIP2  skip", "-i= --ignore-initial="},
		{"   -1 .. -9            set block size", "-1 -2 -3 -4 -5 -6 -7 -8 -9"},
		{"  -a - --all    Scan", "-a --all"},
		{"  -U {d|s|i|x|e|h}   Specify", "-U="},
		{"  -NUM   same as --context=NUM", ""},
		{"  -M    from first to M'th", "-M"},
		{"                    -h \"\" prints a blank line", ""},
		{"  -S BYTES, --strings[=BYTES]  output", "-S= --strings?"},
	} {
		var got []string
		for _, line := range helpNames(tc.help) {
			for _, n := range line {
				name := "-" + string(n.short)
				if n.long != "" {
					name = "--" + n.long
				}
				got = append(got, name+map[ArgKind]string{NoArg: "", RequiredArg: "=", OptionalArg: "?"}[n.arg])
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: %q, want %q", tc.help, strings.Join(got, " "), tc.want)
		}
	}
}

// TestGrammarTablesCompile compiles every table and checks that a
// program's names are its own.
func TestGrammarTablesCompile(t *testing.T) {
	for _, table := range [][]model{coreutilsModels, systemModels, writerModels, otherModels} {
		for i := range table {
			m := &table[i]
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("the table of %q does not compile: %v", m.names, r)
					}
				}()
				g := compile(m)
				if m.ops == ValueCustom && m.opsFn == nil {
					t.Errorf("%s: custom operands without an opsFn", g.name)
				}
				if m.opsFn != nil && m.ops != ValueCustom {
					t.Errorf("%s: an opsFn the operands' kind does not use", g.name)
				}
			}()
		}
	}
}

// TestGrammarEffectsOnUnknown checks that compile rejects an effect on
// an option the table does not have, and a value kind on a flag.
func TestGrammarEffectsOnUnknown(t *testing.T) {
	for _, m := range []model{
		{names: "x", short: "a", effects: "b:write"},
		{names: "x", long: "out", effects: "output:write"},
		{names: "x", short: "a", effects: "a:write"},
		{names: "x", short: "a:", effects: "a:sideways"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("compile accepted %+v", m)
				}
			}()
			compile(&m)
		}()
	}
}

// verdict classifies one simple command by its program's grammar.
func verdict(t *testing.T, line string) Result {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		t.Fatalf("%q is not a simple command", line)
	}
	var words []word
	for _, a := range call.Args {
		words = append(words, readWord(line, a))
	}
	g := grammars[words[0].v]
	if g == nil {
		t.Fatalf("%q: %s is not modelled", line, words[0].v)
	}
	c := &classifier{src: line}
	c.check(line, g, words[1:])
	return c.res
}

// TestGrammarVerdicts classifies a few commands of each modelled program
// by its grammar alone.
func TestGrammarVerdicts(t *testing.T) {
	for _, tc := range verdictCases {
		got := verdict(t, tc.line)
		if got.Class != tc.want {
			t.Errorf("%q: %v, want %v (%s)", tc.line, got.Class, tc.want, got.Reason())
		}
	}
}

var (
	ro  = ReadOnly
	mut = Mutating
	des = Destructive
	pri = Privileged
	frb = Forbidden
)

var verdictCases = []struct {
	line string
	want Class
}{
	// coreutils' readers.
	{"cat -A f", ro}, {"cat -x f", des},
	{"head -5 f", ro}, {"head -n 5 f", ro}, {"head -c5 f", ro},
	{"tail -f /var/log/syslog", ro}, {"tail --pid=1 -F f", ro}, {"tail -n+2 f", ro},
	{"wc -l f", ro}, {"wc --files0-from=list", ro},
	{"sort -u f", ro}, {"sort -o /tmp/x f", mut}, {"sort -ro /tmp/x f", mut}, {"sort -k1,1n -t: f", ro},
	{"sort --out=/etc/passwd f", frb}, {"sort -T /tmp f", mut}, {"sort --compress-program=gzip f", des},
	{"sort -c f", ro}, {"sort --check=quiet f", ro}, {"sort -cu f", ro},
	{"uniq -c f", ro}, {"uniq f /tmp/out", mut},
	{"cut -d, -f1 f", ro}, {"tr -d a-z", ro}, {"nl -ba f", ro}, {"paste -sd, f", ro},
	{"join -t: -1 1 -2 3 a b", ro}, {"comm -12 a b", ro}, {"cmp -l a b", ro},
	{"od -Ax -tx1 f", ro}, {"od -w16 f", ro}, {"fold -w80 f", ro}, {"fmt -72 f", ro}, {"expand -4 f", ro},
	{"shuf -n1 f", ro}, {"shuf -o /tmp/x f", mut}, {"shuf -eo /tmp/x a b", mut},
	{"pr -2 -h title f", ro}, {"ptx f", ro}, {"ptx -G in out", des}, {"numfmt --to=iec 1024", ro},
	{"md5sum f", ro}, {"sha256sum -c sums", ro}, {"b2sum -l 256 f", ro}, {"cksum -a sha1 f", ro}, {"base64 -d f", ro},
	{"ls -la /", ro}, {"ls --color=auto", ro}, {"ls --sort=time -r", ro}, {"dir -l", ro}, {"ls --dired", ro},
	{"stat -c %s f", ro}, {"df -h", ro}, {"du -sh --exclude=x .", ro}, {"realpath --relative-to=/ f", ro},
	{"id -un", ro}, {"who am i", ro}, {"uname -a", ro}, {"nproc --all", ro}, {"printenv HOME", ro},
	{"seq -w 1 10", ro}, {"seq -1 1", ro}, {"sleep 1", ro}, {"expr 1 + 2", ro}, {"factor 12", ro},
	{"date", ro}, {"date +%s", ro}, {"date -u -d @0", ro}, {"date -Iseconds", ro}, {"date -s now", pri}, {"date 0101", pri},
	{"date -I seconds", pri}, {"uptime -p", ro},
	// grep and the rest.
	{"grep -rn foo /etc", ro}, {"grep -e -o f", ro}, {"grep -5 x f", ro}, {"grep -f pats f", ro}, {"egrep 'a|b' f", ro},
	{"grep --color=always x f", ro}, {"grep --output=x f", des},
	{"diff -u a b", ro}, {"diff -U3 a b", ro}, {"diff --old-line-format=%L a b", ro}, {"diff3 -m a b c", ro},
	{"diff3 --diff-program=x a b c", des},
	{"file -b f", ro}, {"file -P bytes=10 f", ro}, {"file -C -m magic", des}, {"file -p f", mut},
	{"strings -n 8 f", ro}, {"strings -8 f", ro}, {"column -t -s, f", ro}, {"hexdump -C f", ro}, {"hexdump -Lalways f", ro},
	{"zcat f.gz", ro}, {"bzcat -k f.bz2", ro}, {"xzcat -T2 f.xz", ro},
	{"jq -r .a f", ro}, {"jq --arg x y . f", ro}, {"jq -L lib -f prog.jq f", ro},
	// The system.
	{"lsblk -o NAME,SIZE", ro}, {"lsblk -T", ro}, {"lscpu -e", ro}, {"findmnt -F /etc/fstab", ro}, {"namei -l /etc", ro},
	{"free -h", ro}, {"ps aux", ro}, {"ps -ef", ro}, {"ps -o pid,cmd -p 1", ro}, {"ps --sort=-pcpu", ro}, {"ps -X", des},
	{"pgrep -f sshd", ro}, {"pidof sshd", ro}, {"vmstat 1 5", ro}, {"w -h", ro}, {"last -5", ro}, {"lastb -f /var/log/btmp.1", ro},
	{"getent passwd root", ro}, {"whereis -b ls", ro}, {"locale -a", ro}, {"which -a ls", ro}, {"lsns -t net", ro},
	{"lslocks -p 1", ro},
	{"journalctl -u ssh -n 50", ro}, {"journalctl -b -1", ro}, {"journalctl --since=today -o json", ro},
	{"journalctl --vacuum-size=1G", des}, {"journalctl --rotate", pri}, {"journalctl --flush", pri},
	{"journalctl --cursor-file=/tmp/c", mut}, {"journalctl --setup-keys", pri},
	{"dmesg -T", ro}, {"dmesg -C", pri}, {"dmesg -c", pri}, {"dmesg -n 1", pri}, {"dmesg --clear", pri}, {"dmesg -TC", pri},
	{"ss -tlnp", ro}, {"ss -K dst 1.2.3.4", des}, {"ss -D /tmp/x", mut}, {"ss -tD /tmp/x", mut}, {"ss -N ns1 -t", ro},
	{"netstat -tulpn", ro}, {"netstat --inet -n", ro},
	{"lsof -i :22", ro}, {"lsof -Fpcn", ro}, {"lsof +D /tmp", ro}, {"lsof -p 1", ro},
	{"hostname", ro}, {"hostname -f", ro}, {"hostname new", pri}, {"hostname -F /etc/hostname", pri}, {"hostname -b", pri},
	{"lastlog -u root", ro}, {"lastlog -C -u x", pri}, {"lastlog -Su x", pri},
	// The writers.
	{"cp a b", mut}, {"cp a ~/.ssh/authorized_keys", frb}, {"cp -t /etc/cron.d a", frb}, {"cp --parents a/b /tmp", des},
	{"ln -s /tmp/x", mut}, {"ln -s /tmp/authorized_keys", frb}, {"ln -sf a /etc/cron.d/x", frb},
	{"install -d /etc/sudoers.d/x /tmp/y", frb}, {"install -m 755 a /tmp/b", mut}, {"install --strip-program=x a /tmp/b", des},
	{"mkdir -p /tmp/a", mut}, {"chmod 600 f", mut}, {"chmod --reference=a b", mut}, {"chown root /etc/passwd", frb},
	{"split -l 10 f", mut}, {"split -l 10 f part_", des}, {"split --filter=gzip f", des},
	{"csplit f /x/", mut}, {"csplit -f /etc/cron.d/x f /x/", frb}, {"csplit -f part f /x/", des},
	{"iostat -xz 1 3", ro}, {"iostat -p ALL", ro}, {"mpstat -P ALL 1", ro}, {"pidstat -dru 1", ro},
	{"pidstat -e sh -c x", des}, {"pidstat -U -e x", des},
	{"rsync -av src/ /tmp/dst/", mut}, {"rsync -a src ~/.ssh/authorized_keys", frb}, {"rsync -a --delete src/ dst/", des},
	{"rsync -e 'ssh -p 2' src host:dst", des}, {"rsync -a host:src dst", des}, {"rsync -a src rsync://h/m", des},
	{"rsync -a --log-file=/etc/cron.d/x a b", frb}, {"rsync -n -a a b", mut}, {"rsync --no-perms a b", des},
	{"rsync -M--remove-source-files a b", des},
	{"rsync -a ./a:b /tmp/c", mut}, {"rsync -a --exclude-from=list a b", mut},
	{"truncate -s 0 f", des}, {"tee -a /tmp/x", mut}, {"touch f", mut}, {"mv a b", mut}, {"mv -t /etc/cron.d a", frb},
}
