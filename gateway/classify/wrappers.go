package classify

import "strings"

// wrapperModel is a program that runs a command given as its operands,
// after its options and skip operands of its own (timeout's duration).
type wrapperModel struct {
	model
	skip int
}

// wrappers are the programs that run the rest of their arguments as a
// command, by name.
var wrappers = func() map[string]*wrapped {
	out := map[string]*wrapped{}
	for _, m := range []wrapperModel{
		{model: model{names: "env", short: "0iu:C:S:v", posix: true,
			long:    "ignore-environment null unset= chdir= split-string= block-signal? default-signal? ignore-signal? list-signal-handling debug help version",
			effects: "S,split-string:destructive:env_-S_splits_a_string_into_a_command_the_classifier_does_not_read"}},
		{model: model{names: "nice", short: "n:", numeric: true, posix: true, long: "adjustment= help version"}},
		{model: model{names: "nohup", posix: true, long: "help version"}},
		{model: model{names: "timeout", short: "k:s:v", posix: true,
			long: "foreground kill-after= preserve-status signal= verbose help version"}, skip: 1},
		{model: model{names: "stdbuf", short: "i:o:e:", posix: true, long: "input= output= error= help version"}},
		{model: model{names: "setsid", short: "cfwhV", posix: true, long: "ctty fork wait help version"}},
		{model: model{names: "ionice", short: "c:n:p:P:tu:hV", posix: true,
			long:    "class= classdata= pid= pgid= ignore uid= help version",
			effects: "p,pid,P,pgid,u,uid:mutating:ionice_changes_running_processes"}},
		{model: model{names: "time", short: "af:o:pqv", posix: true,
			long: "append format= output= portability quiet verbose help version", effects: "o,output:write"}},
		{model: model{names: "command", short: "pvV", posix: true}},
		{model: model{names: "builtin", posix: true}},
	} {
		g := compile(&m.model)
		for _, n := range strings.Fields(m.names) {
			out[n] = &wrapped{g: g, skip: m.skip}
		}
	}
	return out
}()

// wrapped is a compiled wrapperModel.
type wrapped struct {
	g    *grammar
	skip int
}

// wrapper classifies a program that runs the rest of its arguments as a
// command.
func (c *classifier) wrapper(text, name string, rest []word, depth int) {
	w := wrappers[name]
	opts, ops, ok := c.parse(text, w.g, rest)
	if !ok {
		return
	}
	for _, p := range opts {
		if !c.option(text, w.g, p.o, p.val) {
			return
		}
		if name == "env" && (p.o.short == 'C' || p.o.long == "chdir") {
			c.cwd.enter(p.val)
		}
	}
	if name == "command" && (hasOption(opts, 'v', "") || hasOption(opts, 'V', "")) {
		c.add(text, ReadOnly, "looks a command up")
		return
	}
	switch {
	case name == "setsid":
		// The command runs in a session of its own, out of reach of the
		// signal that cancels the action (and without -w setsid may
		// return at once).
		c.add(text, Mutating, "setsid runs the command out of reach of the action's cancel")
	case name == "timeout" && !hasOption(opts, 0, "foreground"):
		// timeout moves into a process group of its own.
		c.add(text, Mutating, "timeout runs the command in a process group of its own, out of reach of the action's cancel until its own time is up")
	}
	if name == "env" {
		for len(ops) > 0 && !(ops[0].lit && !isAssignment(ops[0].v)) {
			if !ops[0].lit {
				c.add(text, Destructive, "env "+ops[0].src+": an argument the classifier cannot read may be an assignment")
				return
			}
			n, _, _ := strings.Cut(ops[0].v, "=")
			c.environ(text, n)
			ops = ops[1:]
		}
	}
	if len(ops) <= w.skip {
		c.add(text, ReadOnly, name+" with no command")
		return
	}
	for _, o := range ops[:w.skip] {
		if !o.one {
			c.add(text, Destructive, name+": "+o.src+" may expand to more than one argument")
			return
		}
	}
	c.program(text, ops[w.skip:], depth+1)
}

// hasOption reports whether opts hold the option of that short or long
// name.
func hasOption(opts []parsed, short byte, long string) bool {
	for _, p := range opts {
		if p.o.short == short && short != 0 || p.o.long == long && long != "" {
			return true
		}
	}
	return false
}

// harmlessEnv are the variables whose value in a program's environment
// changes only how it prints: the locale, the time zone, the terminal's
// size.
var harmlessEnv = set(`LANG LANGUAGE TZ COLUMNS LINES NO_COLOR TERM`)

// environ classifies putting the variable name in a program's
// environment (NAME=value before a command, env NAME=value): at least
// mutating, destructive unless the name is one that changes only how a
// program prints — GIT_CONFIG_*, LD_PRELOAD, BASH_ENV, PATH, PAGER and
// their kind make a program that reads run anything.
func (c *classifier) environ(text, name string) {
	if harmlessEnv[name] || strings.HasPrefix(name, "LC_") {
		c.add(text, Mutating, "sets "+name+" in the program's environment")
		return
	}
	c.add(text, Destructive, "puts "+name+" in the program's environment, which can change what it runs or reads")
}

var xargsModel = compile(&model{names: "xargs", short: "0a:d:E:e::I:i::L:l::n:opP:rs:tx", posix: true,
	long:    "null arg-file= delimiter= eof? replace? max-lines= max-args= open-tty max-procs= interactive process-slot-var= no-run-if-empty max-chars= show-limits verbose exit help version",
	effects: "a,arg-file:read process-slot-var:destructive:xargs_--process-slot-var_puts_a_variable_of_any_name_in_the_environment"})

// fromInput stands for the words xargs or find -exec put into a command:
// not literals, and (from xargs) maybe options.
var fromInput = word{src: "(words from the input)"}

// xargs classifies the command xargs runs with words from its input
// added: they are not literals, so only a command that takes any
// operand (after "--") or any argument is proved.
func (c *classifier) xargs(text string, rest []word, depth int) {
	opts, ops, ok := c.parse(text, xargsModel, rest)
	if !ok {
		return
	}
	replace := ""
	for _, p := range opts {
		if !c.option(text, xargsModel, p.o, p.val) {
			return
		}
		switch {
		case p.o.short == 'I' || p.o.short == 'i' || p.o.long == "replace":
			replace = "{}"
			if p.val != nil && p.val.lit && p.val.v != "" {
				replace = p.val.v
			}
		}
	}
	if len(ops) == 0 {
		c.add(text, ReadOnly, "xargs echoes its input")
		return
	}
	args := append([]word(nil), ops...)
	if replace == "" {
		args = append(args, fromInput)
	} else {
		for i, a := range args {
			if i > 0 && (!a.lit || strings.Contains(a.v, replace)) {
				args[i] = word{src: a.src}
			}
		}
	}
	c.program(text, args, depth+1)
}

var watchModel = compile(&model{names: "watch", short: "bcCd::egn:pq:rtwxhv", posix: true,
	long: "beep color no-color differences? errexit chgexit interval= precise equexit= no-rerun no-title no-wrap exec help version"})

// watch runs its operands, joined, with sh -c (or as argv with -x).
func (c *classifier) watch(text string, rest []word, depth int) {
	opts, ops, ok := c.parse(text, watchModel, rest)
	if !ok {
		return
	}
	exec := false
	for _, p := range opts {
		if !c.option(text, watchModel, p.o, p.val) {
			return
		}
		exec = exec || p.o.short == 'x' || p.o.long == "exec"
	}
	switch {
	case len(ops) == 0:
		c.add(text, ReadOnly, "watch with no command")
	case exec:
		c.program(text, ops, depth+1)
	default:
		parts := make([]string, 0, len(ops))
		for _, a := range ops {
			if !a.lit {
				c.add(text, Destructive, "watch runs a command the classifier cannot read")
				return
			}
			parts = append(parts, a.v)
		}
		c.line(strings.Join(parts, " "), depth+1)
	}
}
