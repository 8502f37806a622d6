package oracle

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/airlockgw/airlock/gateway/classify"
)

// line is one command line of the corpus. @HOME@ in it stands for the
// home of the account that runs it.
type line struct {
	// group is the row of the result table: the program the line was
	// generated for, or "tricks".
	group string
	text  string
	// origin says where the line comes from: the option it spells, or
	// the file and line number and comment of a trick.
	origin string
}

// fixtureValues are the values the generated lines give an option or
// operand, by kind: fixture files, a file to make, an empty directory,
// the payload program.
var fixtureValues = map[classify.ValueKind]string{
	classify.ValueText:      "x",
	classify.ValueNumber:    "1",
	classify.ValueReadPath:  "b.txt",
	classify.ValueWritePath: "out.txt",
	classify.ValueWriteDir:  "outdir",
	classify.ValueProgram:   homeMark + "/bin/mark",
	classify.ValueCustom:    "a.txt",
}

// operand is what generated lines read: a fixture file.
const operand = "a.txt"

// operandOf is what p's generated lines end with: the fixture file,
// unless p rates a file operand higher than none (date's operand sets
// the clock): then nothing, so that its options meet the classifier on
// their own.
func operandOf(p classify.ProgramSpec) string {
	name := p.Names[0]
	if classify.Classify(name+" "+operand).Class > classify.Classify(name).Class {
		return ""
	}
	return " " + operand
}

// contexts are what a generated line's option is put behind or before:
// wrappers, an assignment, redirections; each applied to the option's
// plainest spelling.
var contexts = []string{"env %s", "nice %s", "timeout 5 %s", "LC_ALL=C %s", "%s 2>/dev/null", "%s > out.txt"}

// generated spells every option of every modelled program every way a
// shell and getopt_long allow — short, clustered with another flag,
// long, abbreviated, --opt=value, double-quoted, $'…'-quoted — and its
// plainest spelling behind each context: at most budget lines (0: no
// limit), each option at least once. When the budget cuts, each option
// keeps an equal share of its ways, taken in turn from where the last
// option's share ended, so that every way still meets every program.
func generated(specs []classify.ProgramSpec, budget int) []line {
	options := 0
	for _, p := range specs {
		options += len(p.Options)
	}
	share := 1 << 30
	if budget > 0 {
		share = max(1, (budget-len(specs))/max(1, options))
	}
	var out []line
	seen := map[string]bool{}
	add := func(group, text, origin string) {
		if !seen[text] {
			seen[text] = true
			out = append(out, line{group: group, text: text, origin: origin})
		}
	}
	turn := 0
	for _, p := range specs {
		name, op := p.Names[0], operandOf(p)
		add(name, name+op, "no option")
		flag := firstFlag(p)
		for _, o := range p.Options {
			var ways []string
			for _, sp := range spell(p, o, flag) {
				ways = append(ways, name+" "+sp+op)
			}
			if len(ways) == 0 {
				continue
			}
			for _, c := range contexts {
				ways = append(ways, fmt.Sprintf(c, ways[0]))
			}
			for j := 0; j < min(share, len(ways)); j++ {
				add(name, ways[(turn+j)%len(ways)], optionName(o))
			}
			turn += min(share, len(ways))
		}
	}
	return out
}

// spell returns the ways to write option o of p, with its value; the
// first is the plainest (long when it has a long name).
func spell(p classify.ProgramSpec, o classify.OptionSpec, flag string) []string {
	v := fixtureValues[o.Value]
	var out []string
	if o.Long != "" {
		l := "--" + o.Long
		switch o.Arg {
		case classify.NoArg:
			out = append(out, l, `"`+l+`"`, "$'"+l+"'")
		case classify.RequiredArg:
			out = append(out, l+" "+v, l+"="+v, `"`+l+"="+v+`"`, "$'"+l+"="+v+"'")
		case classify.OptionalArg:
			out = append(out, l, l+"="+v, `"`+l+"="+v+`"`, "$'"+l+"='"+v)
		}
		if abbr := abbreviation(p, o.Long); abbr != "" {
			switch o.Arg {
			case classify.NoArg:
				out = append(out, "--"+abbr)
			case classify.RequiredArg:
				out = append(out, "--"+abbr+" "+v, "--"+abbr+"="+v)
			case classify.OptionalArg:
				out = append(out, "--"+abbr+"="+v)
			}
		}
	}
	if o.Short != "" {
		s := "-" + o.Short
		switch o.Arg {
		case classify.NoArg:
			out = append(out, s, `"`+s+`"`, "$'"+s+"'")
		case classify.RequiredArg:
			out = append(out, s+" "+v, s+v, `"`+s+`" `+v, "$'"+s+"' "+v)
		case classify.OptionalArg:
			out = append(out, s, s+v, `"`+s+v+`"`)
		}
		if flag != "" && flag != o.Short {
			c := "-" + flag + o.Short
			switch o.Arg {
			case classify.RequiredArg:
				out = append(out, c+" "+v, c+v)
			case classify.OptionalArg:
				out = append(out, c+v)
			default:
				out = append(out, c)
			}
		}
	}
	return out
}

// firstFlag is the first short option of p that takes no value: what the
// generated lines cluster other short options with (-sn).
func firstFlag(p classify.ProgramSpec) string {
	for _, o := range p.Options {
		if o.Short != "" && o.Arg == classify.NoArg && o.Class == classify.ReadOnly {
			return o.Short
		}
	}
	return ""
}

// abbreviation is the shortest prefix of long that names no other long
// option of p (getopt_long takes it for long), or "" when only long
// itself does.
func abbreviation(p classify.ProgramSpec, long string) string {
	for n := 1; n < len(long); n++ {
		prefix, unique := long[:n], true
		for _, o := range p.Options {
			if o.Long != "" && o.Long != long && strings.HasPrefix(o.Long, prefix) {
				unique = false
				break
			}
		}
		if unique {
			return prefix
		}
	}
	return ""
}

func optionName(o classify.OptionSpec) string {
	switch {
	case o.Long != "" && o.Short != "":
		return "-" + o.Short + "/--" + o.Long
	case o.Long != "":
		return "--" + o.Long
	}
	return "-" + o.Short
}

// tricks reads testdata/tricks.txt: each line a command line, after one
// or more comment lines ("# …") that say what it tries.
func tricks() ([]line, error) {
	f, err := os.Open("testdata/tricks.txt")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	comment := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		t := strings.TrimSpace(sc.Text())
		switch {
		case t == "":
			comment = ""
		case strings.HasPrefix(t, "#"):
			comment = strings.TrimSpace(strings.TrimPrefix(comment+" "+strings.TrimPrefix(t, "#"), " "))
		case comment == "":
			return nil, fmt.Errorf("tricks.txt:%d: %q has no comment before it", n, t)
		default:
			out = append(out, line{group: "tricks", text: t, origin: fmt.Sprintf("tricks.txt:%d: %s", n, comment)})
			comment = ""
		}
	}
	return out, sc.Err()
}
