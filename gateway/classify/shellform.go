package classify

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// FormKind says which reading of a command line a ShellForm is.
type FormKind uint8

// The readings, in the order ShellForms returns them.
const (
	// RawForm is the command line as sent.
	RawForm FormKind = iota + 1
	// LineForm is the whole line as the shell reads it: each simple
	// command's words after quote removal, joined by one space, the
	// commands joined by "; ".
	LineForm
	// CommandForm is one simple command in that form: a command of the
	// line (of a list, pipeline, subshell or substitution), of a string a
	// shell runs (sh -c, eval, su -c, env -S, a here-document given to a
	// shell), or the command behind a wrapper (sudo, env, timeout, …).
	CommandForm
)

var formKindNames = map[FormKind]string{RawForm: "raw", LineForm: "line", CommandForm: "command"}

func (k FormKind) String() string {
	if n, ok := formKindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("FormKind(%d)", uint8(k))
}

// ShellForm is one reading of a command line, which an account's
// deny_patterns are matched against.
type ShellForm struct {
	Kind FormKind
	Text string
}

// Limits of ShellForms. A line past them is read only in part, and
// ShellForms says so: a pattern that would match what was not read must
// not be evaded by nesting or padding.
const (
	maxFormDepth = 8       // nested strings a shell runs (sh -c in sh -c …)
	maxForms     = 1024    // distinct forms of one line
	maxFormBytes = 1 << 20 // what the forms hold together
)

// ShellForms returns the readings of command that deny patterns are
// matched against: the raw line first, then the line as the shell reads
// it (LineForm), then each simple command on its own (CommandForm), so
// that a pattern anchored with ^ matches where the shell starts a
// command. `"terraform" destroy`, `terra\form destroy`, `ls; terraform
// destroy`, `sh -c 'terraform destroy'` and `env terraform  destroy` all
// have the form "terraform destroy". A word that is not a literal (a
// parameter, command or arithmetic expansion in it) is kept as written;
// assignments before a command are not its words. Each text appears
// once, with the first kind that reads so.
//
// A line the shell cannot parse has its raw form only (the classifier
// rates it at least destructive). complete is false when a bound stopped
// the reading (strings a shell runs nested deeper than maxFormDepth, more
// than maxForms forms or maxFormBytes of them): the forms are then a
// part, and a caller matching deny patterns refuses the line.
func ShellForms(command string) (forms []ShellForm, complete bool) {
	r := &formReader{seen: map[string]bool{command: true}, size: len(command), complete: true}
	r.forms = []ShellForm{{RawForm, command}}
	f, err := formParse(command)
	if err != nil {
		return r.forms, true
	}
	cmds := formCommands(command, f)
	// The line is built within the bound: nested substitutions repeat
	// their text in each command that holds them.
	var line strings.Builder
	for i, c := range cmds {
		if line.Len() > maxFormBytes {
			r.complete = false
			break
		}
		if i > 0 {
			line.WriteString("; ")
		}
		line.WriteString(formJoin(c.words))
	}
	r.add(LineForm, line.String())
	for _, c := range cmds {
		r.command(c, 0)
	}
	return r.forms, r.complete
}

// formReader gathers the forms of one line within the limits.
type formReader struct {
	forms    []ShellForm
	seen     map[string]bool
	size     int
	complete bool
}

// add records a form; once one does not fit, the reader is incomplete
// and adds nothing more.
func (r *formReader) add(k FormKind, text string) {
	if !r.complete || text == "" || r.seen[text] {
		return
	}
	if len(r.forms) >= maxForms || r.size+len(text) > maxFormBytes {
		r.complete = false
		return
	}
	r.seen[text] = true
	r.size += len(text)
	r.forms = append(r.forms, ShellForm{k, text})
}

// command adds the forms of one simple command: the command itself, the
// command behind each wrapper, and the commands of the strings it gives
// a shell to run.
func (r *formReader) command(c formCommand, depth int) {
	words := c.words
	for len(words) > 0 && r.complete {
		r.add(CommandForm, formJoin(words))
		for _, p := range formPrograms(words, c.stdin) {
			r.program(p, depth+1)
		}
		rest, split, ok := formBehindWrapper(words)
		switch {
		case split != "":
			// env -S splits its string into words before the others:
			// the command it runs is read from that line.
			r.program(strings.TrimSpace(split+" "+formJoin(rest)), depth+1)
			return
		case !ok:
			return
		}
		words = rest
	}
}

// program adds the commands of a string a shell runs.
func (r *formReader) program(src string, depth int) {
	if depth > maxFormDepth {
		r.complete = false
		return
	}
	f, err := formParse(src)
	if err != nil {
		// The shell will not run it either; the string as written is
		// what a pattern can still see.
		r.add(CommandForm, src)
		return
	}
	for _, c := range formCommands(src, f) {
		r.command(c, depth)
	}
}

func formParse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// formCommand is a simple command as the shell reads it, with the
// here-documents and here-strings given to it (its standard input).
type formCommand struct {
	words []formWord
	stdin []string
}

// formWord is a word after quote removal, or as written when it is not
// a literal.
type formWord struct {
	text string
	lit  bool
}

// formCommands lists the simple commands of a parsed program in the
// order the shell meets them, those of substitutions, subshells,
// pipelines and function bodies included.
func formCommands(src string, f *syntax.File) []formCommand {
	var cmds []formCommand
	syntax.Walk(f, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var c formCommand
		for _, w := range call.Args {
			c.words = append(c.words, formRead(src, w, formUnquoted))
		}
		for _, rd := range st.Redirs {
			switch {
			case rd.Op == syntax.WordHdoc:
				c.stdin = append(c.stdin, formRead(src, rd.Word, formUnquoted).text)
			case (rd.Op == syntax.Hdoc || rd.Op == syntax.DashHdoc) && rd.Hdoc != nil:
				mode := formHeredoc
				if formQuoted(src, rd.Word) {
					mode = formVerbatim
				}
				c.stdin = append(c.stdin, formRead(src, rd.Hdoc, mode).text)
			}
		}
		cmds = append(cmds, c)
		return true
	})
	return cmds
}

// formQuoted reports whether a here-document's delimiter is quoted, in
// part or whole, which leaves the body as it is.
func formQuoted(src string, delim *syntax.Word) bool {
	if delim == nil || len(delim.Parts) != 1 {
		return true
	}
	_, lit := delim.Parts[0].(*syntax.Lit)
	return !lit || strings.Contains(formSource(src, delim), `\`)
}

// formQuoting is where a word's literal text stands, which decides the
// backslashes the shell removes.
type formQuoting uint8

// Where literal text stands.
const (
	formUnquoted formQuoting = iota // before any character
	formDouble                      // in double quotes: before $ ` " \ and a newline
	formHeredoc                     // in a here-document: before $ ` \ and a newline
	formVerbatim                    // in a here-document with a quoted delimiter: none
)

// formRead reads a word as the shell does after quote removal, or as
// written when it holds an expansion.
func formRead(src string, w *syntax.Word, mode formQuoting) formWord {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(formUnescape(p.Value, mode))
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				// $'…': ANSI-C escapes; a NUL ends the string.
				v, _, _ = expand.Format(nil, v, nil)
				v, _, _ = strings.Cut(v, "\x00")
			}
			b.WriteString(v)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return formWord{text: formSource(src, w)}
				}
				b.WriteString(formUnescape(l.Value, formDouble))
			}
		default:
			return formWord{text: formSource(src, w)}
		}
	}
	return formWord{text: b.String(), lit: true}
}

// formUnescape removes the backslashes the shell removes where a literal
// stands (mode).
func formUnescape(s string, mode formQuoting) string {
	if mode == formVerbatim || !strings.Contains(s, `\`) {
		return s
	}
	special := "$`\\\n" // in a here-document
	if mode == formDouble {
		special = "$`\"\\\n"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (mode == formUnquoted || strings.IndexByte(special, s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue // a line continuation
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// formSource is the text of w as written in src.
func formSource(src string, w *syntax.Word) string {
	s, e := int(w.Pos().Offset()), int(w.End().Offset())
	if s < 0 || e > len(src) || s > e {
		var b strings.Builder
		syntax.NewPrinter().Print(&b, w)
		return b.String()
	}
	return src[s:e]
}

func formJoin(words []formWord) string {
	texts := make([]string, len(words))
	for i, w := range words {
		texts[i] = w.text
	}
	return strings.Join(texts, " ")
}

// formProgram is the program a command's first word names, without its
// directory; "" when the word is not a literal.
func formProgram(w formWord) string {
	if !w.lit {
		return ""
	}
	return path.Base(w.text)
}

// formShells are the shells whose -c string, or standard input, is a
// program.
var formShells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true}

// formPrograms returns the strings a command gives a shell to run: the
// string of sh -c, su -c or flock -c, eval's arguments, or what a shell
// reading its standard input is given in here-documents and here-strings.
func formPrograms(words []formWord, stdin []string) []string {
	name, args := formProgram(words[0]), words[1:]
	switch {
	case name == "eval":
		return []string{formJoin(args)}
	case name == "su" || name == "runuser" || name == "flock":
		for i, a := range args {
			if v, ok := strings.CutPrefix(a.text, "--command="); ok {
				return []string{v}
			}
			if (a.text == "-c" || a.text == "--command") && i+1 < len(args) {
				return []string{args[i+1].text}
			}
		}
	case formShells[name]:
		return formShellPrograms(args, stdin)
	}
	return nil
}

// formShellPrograms reads a shell's arguments: the string after -c
// (which may come after other options, or in a cluster such as -ec),
// else its standard input when it names no script file (or reads its
// program from it, -s).
func formShellPrograms(args []formWord, stdin []string) []string {
	command, fromStdin := false, false
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i].text
		switch {
		case a == "--" || a == "-":
			i++
			break options
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++ // and its value
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && (a[0] == '-' || a[0] == '+') && args[i].lit:
			command = command || a[0] == '-' && strings.ContainsRune(a[1:], 'c')
			fromStdin = fromStdin || a[0] == '-' && strings.ContainsRune(a[1:], 's')
		default:
			break options
		}
	}
	switch {
	case command && i < len(args):
		return []string{args[i].text}
	case command:
		return nil
	case fromStdin || i >= len(args):
		return stdin
	}
	return nil // a script file
}

// formWrapper is a program that runs the rest of its arguments as a
// command: its options that take a value, and how many operands come
// before the command (timeout's duration, chroot's directory).
type formWrapper struct {
	valued   string
	operands int
	assigns  bool // NAME=VALUE words may come before the command
}

// formWrappers are the wrappers whose command has forms of its own.
var formWrappers = map[string]formWrapper{
	"env":     {valued: "-u --unset -C --chdir -S --split-string", assigns: true},
	"sudo":    {valued: "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role -t --type -U --other-user -T --command-timeout -a", assigns: true},
	"doas":    {valued: "-u -C"},
	"command": {},
	"builtin": {},
	"exec":    {valued: "-a"},
	"nice":    {valued: "-n --adjustment"},
	"nohup":   {},
	"setsid":  {},
	"busybox": {},
	"time":    {valued: "-f --format -o --output"},
	"timeout": {valued: "-s --signal -k --kill-after", operands: 1},
	"stdbuf":  {valued: "-i -o -e --input --output --error"},
	"ionice":  {valued: "-c --class -n --classdata -p --pid -P --pgid -u --uid"},
	"chrt":    {operands: 1},
	"taskset": {operands: 1},
	"flock":   {valued: "-w --timeout -E --conflict-exit-code", operands: 1},
	"chroot":  {valued: "--userspec --groups", operands: 1},
	"xargs":   {valued: "-a --arg-file -d --delimiter -E --eof -I --replace -L --max-lines -n --max-args -P --max-procs -s --max-chars --process-slot-var"},
}

// formBehindWrapper returns the command a wrapper runs, and the string
// of env -S; ok is false when words is not a wrapper with a command.
func formBehindWrapper(words []formWord) (rest []formWord, split string, ok bool) {
	w, found := formWrappers[formProgram(words[0])]
	if !found {
		return nil, "", false
	}
	valued := strings.Fields(w.valued)
	i := 1
	for ; i < len(words); i++ {
		a := words[i].text
		if a == "--" {
			i++
			break
		}
		if name, _, isAssign := strings.Cut(a, "="); w.assigns && words[i].lit && isAssign && syntax.ValidName(name) {
			continue
		}
		if len(a) < 2 || a[0] != '-' || !words[i].lit {
			break
		}
		opt, val, hasVal := a, "", false
		if strings.HasPrefix(a, "--") {
			opt, val, hasVal = strings.Cut(a, "=")
		} else {
			// A cluster: the first option that takes a value takes the
			// rest of the word, or the next word.
			opt = ""
			for j := 1; j < len(a); j++ {
				if o := "-" + a[j:j+1]; slices.Contains(valued, o) {
					opt, val, hasVal = o, a[j+1:], j+1 < len(a)
					break
				}
			}
		}
		if !slices.Contains(valued, opt) {
			continue
		}
		if !hasVal && i+1 < len(words) {
			i++
			val = words[i].text
		}
		if opt == "-S" || opt == "--split-string" {
			split = val
		}
	}
	i += w.operands
	if i >= len(words) {
		return nil, split, false
	}
	return words[i:], split, true
}
