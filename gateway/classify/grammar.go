package classify

import (
	"sort"
	"strings"
)

// A program the classifier proves read-only is modelled by its option
// grammar: every option it accepts, whether each takes a value, and what
// the options and operands that do more than read do. An option the model
// does not know, an abbreviation it cannot resolve to exactly one long
// option, or an argument that is not a literal where an option may stand
// makes the command at least destructive: the proof failed.

// ArgKind says whether an option takes a value.
type ArgKind uint8

// The kinds of option value.
const (
	// NoArg: a flag.
	NoArg ArgKind = iota
	// RequiredArg: the rest of the word (-oVALUE, --opt=VALUE) or the
	// next word.
	RequiredArg
	// OptionalArg: only the rest of the word (-iSUFFIX, --color=WHEN).
	OptionalArg
)

// ValueKind says what an option's value, or an operand, is to a program.
type ValueKind uint8

// The kinds of value.
const (
	// ValueText is data: a pattern, a format, a name, a number.
	ValueText ValueKind = iota
	// ValueNumber is a number.
	ValueNumber
	// ValueReadPath is a file the program reads.
	ValueReadPath
	// ValueWritePath is a file the program writes.
	ValueWritePath
	// ValueWriteDir is a directory the program writes files into.
	ValueWriteDir
	// ValueProgram is a program or command line the program runs.
	ValueProgram
	// ValueCustom: the program's own rule decides (its operands mean
	// different things by position or form).
	ValueCustom
)

// OptionSpec is one option of a modelled program, as Programs describes
// it.
type OptionSpec struct {
	// Short is the one-letter name ("o"), or "".
	Short string
	// Long is the long name without "--" ("output"), or "".
	Long string
	Arg  ArgKind
	// Value is what the option's value is (ValueText for a flag).
	Value ValueKind
	// Class is the least class using the option gives the command:
	// read_only for an option that only changes what is read or printed.
	Class Class
	// Rule says why, when Class is above read_only.
	Rule string
}

// ProgramSpec is a program the classifier can prove read-only, with its
// option grammar.
type ProgramSpec struct {
	// Names are the program's names (the first is its own).
	Names   []string
	Options []OptionSpec
	// Operands is what its operands are: ValueReadPath, ValueText,
	// ValueWritePath (tee) or ValueCustom.
	Operands ValueKind
	// Numeric: -NUM is an option (head -5).
	Numeric bool
	// Posix: options end at the first operand.
	Posix bool
}

// model is a program's grammar as the tables write it.
type model struct {
	// names: the program's names, space-separated.
	names string
	// short: the short options as getopt(3) writes them: "c:" takes a
	// value, "c::" an optional, attached one.
	short string
	// long: the long options, space-separated: "name" a flag, "name="
	// takes a value, "name?" an optional one (--name=VALUE only).
	long string
	// effects: what options do beyond reading and printing, entries
	// "KEYS:KIND" space-separated; KEYS are the option's short and long
	// names, comma-separated; KIND is a ValueKind (read, write, writedir,
	// run, number, text) or a class (mutating, destructive, privileged,
	// forbidden), optionally ":rule words joined_by_underscores".
	effects string
	// ops: what the operands are (a ValueKind; ValueCustom with opsFn).
	ops   ValueKind
	opsFn func(c *classifier, text string, ops []word)
	// numeric: -NUM is an option; posix: options end at the first
	// operand.
	numeric, posix bool
	// exact: long options are matched by their whole name only. A table
	// that lists only some of a program's options must be exact: an
	// abbreviation it resolves to one of its options may be, in the
	// program, the whole name of an option the table does not list
	// (kubectl --server is not --server-print). A complete table may
	// resolve abbreviations as getopt_long does: where the program has
	// more options with that prefix, it refuses the abbreviation.
	exact bool
}

// option is one option of a compiled model.
type option struct {
	short byte
	long  string
	arg   ArgKind
	value ValueKind
	class Class
	rule  string
}

// grammar is a compiled model.
type grammar struct {
	name           string
	m              *model
	byShort        map[byte]*option
	byLong         map[string]*option
	longs          []string // sorted, for abbreviations
	opts           []*option
	numeric, posix bool
	exact          bool
}

// compile builds a model's grammar; it panics on a malformed table (the
// tables are the package's own, checked by its tests).
func compile(m *model) *grammar {
	names := strings.Fields(m.names)
	g := &grammar{name: names[0], m: m, byShort: map[byte]*option{}, byLong: map[string]*option{}, numeric: m.numeric, posix: m.posix, exact: m.exact}
	for i := 0; i < len(m.short); i++ {
		o := &option{short: m.short[i]}
		if i+1 < len(m.short) && m.short[i+1] == ':' {
			o.arg, i = RequiredArg, i+1
			if i+1 < len(m.short) && m.short[i+1] == ':' {
				o.arg, i = OptionalArg, i+1
			}
		}
		if g.byShort[o.short] != nil {
			panic("classify: " + g.name + ": short option -" + string(o.short) + " twice")
		}
		g.byShort[o.short] = o
		g.opts = append(g.opts, o)
	}
	for _, l := range strings.Fields(m.long) {
		o := &option{long: l}
		switch {
		case strings.HasSuffix(l, "="):
			o.long, o.arg = strings.TrimSuffix(l, "="), RequiredArg
		case strings.HasSuffix(l, "?"):
			o.long, o.arg = strings.TrimSuffix(l, "?"), OptionalArg
		}
		if g.byLong[o.long] != nil {
			panic("classify: " + g.name + ": long option --" + o.long + " twice")
		}
		g.byLong[o.long] = o
		g.longs = append(g.longs, o.long)
		g.opts = append(g.opts, o)
	}
	sort.Strings(g.longs)
	for _, e := range strings.Fields(m.effects) {
		g.effect(e)
	}
	return g
}

// effectKinds are the KIND words of a model's effects.
var effectKinds = map[string]ValueKind{"text": ValueText, "number": ValueNumber, "read": ValueReadPath,
	"write": ValueWritePath, "writedir": ValueWriteDir, "run": ValueProgram}

// effect applies one "KEYS:KIND[:rule]" entry of a model's effects.
func (g *grammar) effect(e string) {
	parts := strings.SplitN(e, ":", 3)
	if len(parts) < 2 {
		panic("classify: " + g.name + ": effect " + e + " has no kind")
	}
	rule := ""
	if len(parts) == 3 {
		rule = strings.ReplaceAll(parts[2], "_", " ")
	}
	for _, key := range strings.Split(parts[0], ",") {
		var o *option
		if len(key) == 1 {
			o = g.byShort[key[0]]
		} else {
			o = g.byLong[key]
		}
		if o == nil {
			panic("classify: " + g.name + ": effect on unknown option " + key)
		}
		if v, ok := effectKinds[parts[1]]; ok {
			if o.arg == NoArg {
				panic("classify: " + g.name + ": effect " + parts[1] + " on flag " + key)
			}
			o.value = v
		} else {
			cl, err := ParseClass(parts[1])
			if err != nil {
				panic("classify: " + g.name + ": effect " + e + ": " + err.Error())
			}
			o.class = cl
		}
		o.rule = rule
	}
}

// lookLong finds a long option by its name or an abbreviation of it
// that names exactly one; "" when none or several.
func (g *grammar) lookLong(name string) (*option, string) {
	if o := g.byLong[name]; o != nil {
		return o, ""
	}
	if g.exact {
		return nil, "--" + name + " is not an option of " + g.name + " the classifier knows"
	}
	i := sort.SearchStrings(g.longs, name)
	var found []string
	for ; i < len(g.longs) && strings.HasPrefix(g.longs[i], name); i++ {
		found = append(found, g.longs[i])
	}
	switch len(found) {
	case 0:
		return nil, "--" + name + " is not an option " + g.name + " is known to take"
	case 1:
		return g.byLong[found[0]], ""
	}
	return nil, "--" + name + " abbreviates more than one option of " + g.name + " (--" + strings.Join(found, ", --") + ")"
}

// parsed is one option of a command line, with its value (nil when it
// has none).
type parsed struct {
	o   *option
	val *word
}

// check classifies a modelled program's arguments: each option by what
// it does, then the operands.
func (c *classifier) check(text string, g *grammar, rest []word) {
	opts, ops, ok := c.parse(text, g, rest)
	if !ok {
		return
	}
	for _, p := range opts {
		if !c.option(text, g, p.o, p.val) {
			return
		}
	}
	c.operands(text, g, ops)
	c.add(text, ReadOnly, g.name+" reads")
}

// parse reads rest by g's grammar: the options with their values, and
// the operands (for a posix grammar, every word from the first operand
// on). false when the proof failed: a part says why.
func (c *classifier) parse(text string, g *grammar, rest []word) (opts []parsed, ops []word, ok bool) {
	dashdash := false
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		switch {
		case dashdash:
			ops = append(ops, w)
			continue
		case g.posix && len(ops) > 0:
			return opts, append(ops, rest[i:]...), true
		case !w.lit:
			if w.safe {
				ops = append(ops, w)
				continue
			}
			c.add(text, Destructive, g.name+": the argument "+w.src+" is not a literal and could be an option")
			return nil, nil, false
		case w.v == "--":
			dashdash = true
			continue
		case w.v == "-" || !strings.HasPrefix(w.v, "-") || g.numeric && allDigits(w.v[1:]):
			if strings.HasPrefix(w.v, "-") && w.v != "-" {
				continue // -NUM
			}
			ops = append(ops, w)
			continue
		}
		got, next, ok := c.parseOption(text, g, rest, i)
		if !ok {
			return nil, nil, false
		}
		opts, i = append(opts, got...), next
	}
	return opts, ops, true
}

// parseOption reads the option word rest[i] (a cluster of short options,
// or a long one) and its value; next is the index of the last word it
// used.
func (c *classifier) parseOption(text string, g *grammar, rest []word, i int) (got []parsed, next int, ok bool) {
	v := rest[i].v
	if long, isLong := strings.CutPrefix(v, "--"); isLong {
		name, val, hasVal := strings.Cut(long, "=")
		o, problem := g.lookLong(name)
		switch {
		case o == nil:
			c.add(text, Destructive, problem)
			return nil, i, false
		case o.arg == NoArg && hasVal:
			c.add(text, Destructive, "--"+o.long+" of "+g.name+" takes no value")
			return nil, i, false
		case hasVal:
			return []parsed{{o, &word{v: val, lit: true, one: true, src: val}}}, i, true
		case o.arg == RequiredArg && i+1 < len(rest):
			return []parsed{{o, &rest[i+1]}}, i + 1, true
		}
		return []parsed{{o, nil}}, i, true
	}
	for j := 1; j < len(v); j++ {
		o := g.byShort[v[j]]
		switch {
		case o == nil:
			c.add(text, Destructive, "-"+v[j:j+1]+" is not an option "+g.name+" is known to take")
			return nil, i, false
		case o.arg == NoArg:
			got = append(got, parsed{o, nil})
			continue
		case j+1 < len(v):
			val := v[j+1:]
			return append(got, parsed{o, &word{v: val, lit: true, one: true, src: val}}), i, true
		case o.arg == RequiredArg && i+1 < len(rest):
			return append(got, parsed{o, &rest[i+1]}), i + 1, true
		}
		return append(got, parsed{o, nil}), i, true
	}
	return got, i, true
}

// option classifies one option of g with its value (nil when it has
// none); false when the command is not proved.
func (c *classifier) option(text string, g *grammar, o *option, val *word) bool {
	name := "-" + string(o.short)
	if o.long != "" {
		name = "--" + o.long
	}
	if o.class > ReadOnly {
		rule := o.rule
		if rule == "" {
			rule = g.name + " " + name + " does more than read"
		}
		c.add(text, o.class, rule)
	}
	if val == nil {
		return true
	}
	switch o.value {
	case ValueWritePath:
		c.writeWord(text, *val, g.name+" "+name+" writes", writeOpen)
	case ValueWriteDir:
		c.writeWord(text, *val, g.name+" "+name+" writes files in", writeInDir)
	case ValueProgram:
		c.add(text, Destructive, g.name+" "+name+" runs a program")
	default:
		if !val.one {
			c.add(text, Destructive, g.name+" "+name+": the value "+val.src+" may expand to more than one argument")
			return false
		}
	}
	return true
}

// operands classifies a modelled program's operands.
func (c *classifier) operands(text string, g *grammar, ops []word) {
	switch g.m.ops {
	case ValueCustom:
		g.m.opsFn(c, text, ops)
	case ValueWritePath:
		for _, o := range ops {
			c.writeWord(text, o, g.name+" writes", writeOpen)
		}
	case ValueProgram:
		if len(ops) > 0 {
			c.add(text, Destructive, g.name+" runs a program")
		}
	}
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// spec describes a compiled grammar for Programs.
func (g *grammar) spec() ProgramSpec {
	p := ProgramSpec{Names: strings.Fields(g.m.names), Operands: g.m.ops, Numeric: g.numeric, Posix: g.posix}
	for _, o := range g.opts {
		s := OptionSpec{Long: o.long, Arg: o.arg, Value: o.value, Class: max(o.class, ReadOnly), Rule: o.rule}
		if o.short != 0 {
			s.Short = string(o.short)
		}
		switch {
		case o.value == ValueProgram:
			s.Class = max(s.Class, Destructive)
		case o.value == ValueWritePath || o.value == ValueWriteDir:
			s.Class = max(s.Class, Mutating)
		}
		p.Options = append(p.Options, s)
	}
	return p
}
