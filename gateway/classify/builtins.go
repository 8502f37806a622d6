package classify

import "strings"

// builtin classifies the shell's builtins (and the programs of the same
// name): false when name is none of them. A builtin that evaluates text
// as code (eval, source, let, trap, mapfile's callbacks) is in the
// destructive set instead; one that assigns a variable by a name it is
// given (read, printf -v, test -v) can have that name evaluate code
// (a[$(…)]), so only plain names are proved.
func (c *classifier) builtin(text, name string, rest []word) bool {
	switch name {
	case "[[", "]]":
		// Read as a POSIX shell reads the line: no such command, it
		// fails (its redirections are classified on their own).
		c.add(text, ReadOnly, name+" is no command in a POSIX shell: it fails")
	case "jobs":
		// jobs -x runs its arguments as a command.
		c.flagsOnly(text, "jobs", rest, "lnprs", "jobs -x runs its arguments as a command")
	case "echo", "true", "false", ":", "times", "help", "dirs", "fg", "bg", "exit", "return",
		"break", "continue", "shift", "pwd", "type", "unalias", "logout", "suspend", "disown":
		// They print, or end the shell or a loop; nothing they are given
		// is evaluated as code.
		c.add(text, ReadOnly, name+" changes nothing")
	case "printf":
		c.printf(text, rest)
	case "test", "[":
		c.test(text, rest)
	case "cd", "pushd", "popd":
		c.cd(text, name, rest)
	case "hash":
		c.hash(text, rest)
	case "read":
		c.read(text, rest)
	case "set":
		c.set(text, rest)
	case "shopt":
		c.flagsOnly(text, "shopt", rest, "pq", "changes how the shell reads later commands")
	case "unset":
		c.names(text, "unset", rest, "vfn", "unsets variables")
	case "umask":
		c.mask(text, rest)
	case "ulimit":
		if len(operands(rest)) > 0 {
			c.add(text, Mutating, "ulimit sets a limit on what later commands may use")
		} else {
			c.flagsOnly(text, "ulimit", rest, "HSabcdefiklmnpqrstuvxPRT", "")
		}
	case "alias":
		c.alias(text, rest)
	case "history":
		if len(rest) == 0 || len(rest) == 1 && rest[0].lit && allDigits(rest[0].v) {
			c.add(text, ReadOnly, "history prints")
		} else {
			c.add(text, Destructive, "history with options reads or writes the history file")
		}
	case "caller", "wait":
		c.flagsOnly(text, name, rest, "nf", "wait -p assigns a variable")
	case "kill":
		c.kill(text, rest)
	case "export", "declare", "typeset", "local", "readonly":
		// As a simple command (behind builtin or command): only printing
		// (-p, or -f/-F for functions) is proved.
		if len(operands(rest)) > 0 && name == "export" || anyContains(rest, "=") {
			c.add(text, Destructive, name+" declares variables, which later commands see")
		} else {
			c.flagsOnly(text, name, rest, "pfF", name+" declares variables, which later commands see")
		}
	default:
		return false
	}
	return true
}

// flagsOnly proves a builtin given only options whose letters are in
// allowed (and operands, names it prints); otherwise it is what why
// says (destructive).
func (c *classifier) flagsOnly(text, name string, rest []word, allowed, why string) {
	for _, a := range rest {
		switch {
		case !a.lit:
			c.add(text, Destructive, name+": "+a.src+" is not a literal")
			return
		case a.v == "--":
			continue
		case strings.HasPrefix(a.v, "-") && strings.Trim(a.v[1:], allowed) != "":
			if why == "" {
				why = name + " " + a.v + " is not an option the classifier reads"
			}
			c.add(text, Destructive, why)
			return
		}
	}
	c.add(text, ReadOnly, name+" prints")
}

// printf prints, unless -v makes it assign a variable whose name can
// evaluate code (printf -v 'a[$(…)]').
func (c *classifier) printf(text string, rest []word) {
	if len(rest) > 0 {
		f := rest[0]
		switch {
		case !f.lit && !f.safe:
			c.add(text, Destructive, "printf: "+f.src+" is not a literal and could be -v")
			return
		case f.lit && strings.HasPrefix(f.v, "-") && f.v != "--" && f.v != "-":
			c.add(text, Destructive, "printf "+f.v+" assigns a variable (-v) or is not an option the classifier reads")
			return
		}
	}
	c.add(text, ReadOnly, "printf prints")
}

// test evaluates a condition; -v and -R take a variable's name, which
// can evaluate code (test -v 'a[$(…)]').
func (c *classifier) test(text string, rest []word) {
	for _, a := range rest {
		switch {
		case !a.lit && !a.safe:
			c.add(text, Destructive, "test: "+a.src+" is not a literal and could be -v")
			return
		case a.lit && (a.v == "-v" || a.v == "-R"):
			c.add(text, Destructive, "test "+a.v+" evaluates a variable's name, which can run commands")
			return
		}
	}
	c.add(text, ReadOnly, "test changes nothing")
}

// cd changes the directory later commands of the line run in.
func (c *classifier) cd(text, name string, rest []word) {
	ops := operands(rest)
	switch {
	case name == "popd":
		c.cwd.unknown = c.cwd.unknown || len(c.cwd.extra) > 0
	case len(ops) == 0:
		// cd alone: the home directory.
	case strings.HasPrefix(ops[0].v, "+") || strings.HasPrefix(ops[0].v, "-") && ops[0].lit && ops[0].v != "-":
		c.cwd.unknown = true // pushd +N: a directory of the stack
	default:
		c.cwd.enter(&ops[0])
	}
	for _, a := range rest {
		if !a.lit && !a.safe {
			c.cwd.unknown = true
		}
	}
	c.add(text, ReadOnly, name+" changes the directory")
}

// hash remembers where commands are; -p names the program a name runs.
func (c *classifier) hash(text string, rest []word) {
	c.flagsOnly(text, "hash", rest, "dlrt", "hash -p makes a name run a program of its choosing")
}

// read assigns the line it reads to the variables it names.
func (c *classifier) read(text string, rest []word) {
	opts := map[string]bool{"-a": true, "-d": true, "-i": true, "-n": true, "-N": true, "-p": true, "-t": true, "-u": true}
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case !a.lit:
			c.add(text, Destructive, "read: "+a.src+" is not a literal")
			return
		case opts[a.v]:
			if a.v == "-a" && i+1 < len(rest) && !plainName(rest[i+1]) {
				c.add(text, Destructive, "read -a "+rest[i+1].src+" is not a plain variable name")
				return
			}
			i++
		case a.v == "-r" || a.v == "-s" || a.v == "-e" || a.v == "-rs" || a.v == "-sr" || a.v == "--":
		case !plainName(a):
			c.add(text, Destructive, "read "+a.src+": not a plain variable name (a[$(…)] runs commands)")
			return
		}
	}
	// The names are plain: the line's value reaches a command only through
	// expansions, and those that evaluate a value (arithmetic, ${!x},
	// ${x@P}, test -v) are rated by themselves.
	c.add(text, ReadOnly, "read assigns the line it reads to plain variables")
}

// plainName reports whether a is a lower-case variable name: no
// subscript that evaluates code, none of the shell's own (PATH, IFS…).
func plainName(a word) bool {
	return a.lit && isName(a.v) && strings.ToLower(a.v) == a.v
}

// names proves a builtin (unset) given only options in flags and plain
// names; it is mutating (it changes the shell's variables).
func (c *classifier) names(text, name string, rest []word, flags, rule string) {
	for _, a := range rest {
		switch {
		case a.lit && strings.HasPrefix(a.v, "-") && strings.Trim(a.v[1:], flags) == "":
		case !plainName(a):
			c.add(text, Destructive, name+" "+a.src+": not a plain variable name")
			return
		}
	}
	c.add(text, Mutating, rule)
}

// setOptions are the names `set -o` may take and change nothing the
// classifier reads.
var setOptions = set(`errexit nounset pipefail xtrace verbose noglob noclobber`)

// set prints the variables, or sets options and positional parameters.
func (c *classifier) set(text string, rest []word) {
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case !a.lit:
			c.add(text, Destructive, "set: "+a.src+" is not a literal")
			return
		case a.v == "--" || !strings.HasPrefix(a.v, "-") && !strings.HasPrefix(a.v, "+"):
			c.add(text, Mutating, "set assigns the positional parameters")
			return
		case strings.HasSuffix(a.v, "o") && strings.Trim(a.v[1:len(a.v)-1], "eufxvC") == "":
			// -o NAME, or a cluster ending in it (-euo pipefail).
			if i+1 < len(rest) && !(rest[i+1].lit && setOptions[rest[i+1].v]) {
				c.add(text, Destructive, "set -o "+rest[i+1].src+" is not an option the classifier reads")
				return
			}
			i++
		case strings.Trim(a.v[1:], "eufxvC") != "":
			c.add(text, Destructive, "set "+a.v+" is not an option the classifier reads")
			return
		}
	}
	c.add(text, ReadOnly, "set prints or sets shell options")
}

// mask prints the file mode mask, or sets it.
func (c *classifier) mask(text string, rest []word) {
	if len(operands(rest)) > 0 {
		c.add(text, Mutating, "umask sets the mode of files made later")
		return
	}
	c.flagsOnly(text, "umask", rest, "pS", "")
}

// alias prints aliases, or defines one: a name that runs a command.
func (c *classifier) alias(text string, rest []word) {
	for _, a := range rest {
		if !a.lit || strings.Contains(a.v, "=") {
			c.add(text, Destructive, "alias defines a name that runs a command")
			return
		}
	}
	c.add(text, ReadOnly, "alias prints")
}

// kill lists signals (-l, -L) or checks that processes exist (-0 and
// process ids, nothing else: bash's kill takes the last signal it is
// given, so -0 -s KILL sends SIGKILL); anything else ends processes.
func (c *classifier) kill(text string, rest []word) {
	if len(rest) > 0 && rest[0].lit && (rest[0].v == "-l" || rest[0].v == "-L") {
		c.add(text, ReadOnly, "lists signals")
		return
	}
	if len(rest) > 1 && rest[0].lit && rest[0].v == "-0" {
		proved := true
		for _, a := range rest[1:] {
			if !a.lit || !(allDigits(a.v) || strings.HasPrefix(a.v, "%") && allDigits(a.v[1:])) {
				proved = false
			}
		}
		if proved {
			c.add(text, ReadOnly, "checks that processes exist")
			return
		}
	}
	c.add(text, Destructive, "ends processes")
}
