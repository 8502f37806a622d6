// Package classify reads a command line as a shell reads it and says how
// much it can change: every simple command in it — in pipelines, lists,
// subshells, command and process substitutions, `sh -c` strings, and behind
// wrappers such as sudo, env, xargs and find -exec — and every
// redirection, each classified by its program and arguments, never by the
// first word of the line alone.
//
// The classes, from least to most: read_only, mutating, destructive,
// privileged, forbidden. A command line's class is the highest of its
// parts, with the part and the rule that decided it. What the classifier
// cannot read — a parse error, a program name that is not a literal, an
// unknown program, an interpreter given a program, eval — is at least
// destructive. Classification is a second line behind forced commands
// (airlock-action), not a sandbox: it narrows what a run approval covers,
// and never widens it.
package classify

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// Class is how much a command can change. The order is the order of
// severity.
type Class uint8

// The classes, least to most severe.
const (
	ReadOnly Class = iota + 1
	Mutating
	Destructive
	Privileged
	Forbidden
)

var classNames = map[Class]string{ReadOnly: "read_only", Mutating: "mutating", Destructive: "destructive", Privileged: "privileged", Forbidden: "forbidden"}

func (c Class) String() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// MarshalText writes the class's name.
func (c Class) MarshalText() ([]byte, error) {
	if _, ok := classNames[c]; !ok {
		return nil, fmt.Errorf("classify: invalid class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText reads a class's name.
func (c *Class) UnmarshalText(b []byte) error {
	p, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// ParseClass reads a class's name.
func ParseClass(s string) (Class, error) {
	for c, n := range classNames {
		if n == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("classify: %q is not a class (read_only, mutating, destructive, privileged, forbidden)", s)
}

// Part is one part of a command line that was classified: a simple
// command or a redirection.
type Part struct {
	// Text is the part as written (at most maxPartText bytes).
	Text  string `json:"text"`
	Class Class  `json:"class"`
	// Rule says why, in a few words.
	Rule string `json:"rule"`
}

// Result is a command line's class and the parts that decided it.
type Result struct {
	Class Class `json:"class"`
	// Parts are the parts of the highest class, in the order written.
	Parts []Part `json:"parts"`
}

// Reason says in one line which part decided the class and why.
func (r Result) Reason() string {
	if len(r.Parts) == 0 {
		return r.Class.String()
	}
	var b strings.Builder
	for i, p := range r.Parts {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q: %s", p.Text, p.Rule)
	}
	return r.Class.String() + " because " + b.String()
}

// Limits of the walk.
const (
	maxDepth    = 8   // nested sh -c, sudo, xargs, find -exec
	maxPartText = 200 // what a Part keeps of its text
)

// Classify classifies one command line, as the account's login shell
// (a POSIX shell or bash) would run it.
func Classify(command string) Result {
	return ClassifyHiding(command, nil)
}

// ClassifyHiding is Classify with hide applied to each part's text and
// rule before they are shortened: the parts quote the command, and what
// hide replaces (a credential) must not survive in them, not even its
// first bytes where a part is cut. nil hides nothing.
func ClassifyHiding(command string, hide func(string) string) Result {
	c := &classifier{src: command, hide: hide}
	c.line(command, 0)
	if c.res.Class == 0 {
		// Nothing but assignments, comments or empty: reads nothing,
		// changes nothing.
		c.res.Class = ReadOnly
	}
	return c.res
}

type classifier struct {
	src  string
	res  Result
	hide func(string) string
}

// add records a part of class cl.
func (c *classifier) add(text string, cl Class, rule string) {
	if c.hide != nil {
		text, rule = c.hide(text), c.hide(rule)
	}
	text = clip(text)
	switch {
	case cl > c.res.Class:
		c.res.Class, c.res.Parts = cl, []Part{{text, cl, rule}}
	case cl == c.res.Class:
		c.res.Parts = append(c.res.Parts, Part{text, cl, rule})
	}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxPartText {
		return s
	}
	cut := maxPartText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// line parses and walks one shell program (the command line, or the
// string of an `sh -c`).
func (c *classifier) line(src string, depth int) {
	if depth > maxDepth {
		c.add(src, Destructive, "nested too deep to read")
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
	if err != nil {
		c.add(src, Destructive, "the shell cannot parse it: "+err.Error())
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				c.call(src, n.Args, depth)
			}
		case *syntax.Redirect:
			c.redirect(src, n)
		case *syntax.DeclClause:
			if n.Variant != nil && (n.Variant.Value == "declare" || n.Variant.Value == "typeset") {
				c.add(n.Variant.Value, ReadOnly, "declares variables")
			}
		case *syntax.FuncDecl:
			c.add(nodeText(src, n), Destructive, "defines a function: what it runs is called by a name the classifier cannot follow")
		case *syntax.Comment:
			// A shell starts a comment only at the start of a word; where
			// the parser saw one in the middle of a word (it does, after
			// a quote in a command substitution), the shell reads more
			// of the word than the parser did.
			if at := int(n.Pos().Offset()); at > 0 && at <= len(src) && !strings.ContainsRune(" \t\n;&|()<>", rune(src[at-1])) {
				c.add(nodeText(src, n), Destructive, "a # inside a word, which the shell does not read as a comment")
			}
		case *syntax.ArithmCmd, *syntax.TestClause:
			// Tests and arithmetic change nothing (their words are
			// walked for substitutions).
		}
		return true
	})
}

// nodeText is the source text of n.
func nodeText(src string, n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(src) || s > e {
		return ""
	}
	return src[s:e]
}

// literal returns a word's value after quote removal, and false when it
// is not a literal: it holds a parameter, arithmetic or command expansion,
// a substitution, or a glob or brace expansion whose result the
// classifier cannot know.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if mayExpand(p.Value) {
				return "", false
			}
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false // $'…' escapes
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// mayExpand reports whether an unquoted literal may be a glob or a brace
// expansion, whose result the classifier cannot know: "*", "?", a
// bracket expression, a brace list or sequence. ("[" alone, the test
// command, is none of them.)
func mayExpand(s string) bool {
	if strings.ContainsAny(s, "*?") {
		return true
	}
	if i := strings.IndexByte(s, '['); i >= 0 && strings.IndexByte(s[i+1:], ']') > 0 {
		return true
	}
	if i := strings.IndexByte(s, '{'); i >= 0 {
		if j := strings.IndexByte(s[i:], '}'); j > 0 && (strings.Contains(s[i:i+j], ",") || strings.Contains(s[i:i+j], "..")) {
			return true
		}
	}
	return false
}

// unescape removes the backslashes a shell removes: any outside quotes;
// inside double quotes only before $ ` " \ and a newline.
func unescape(s string, dbl bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (!dbl || strings.IndexByte("$`\"\\\n", s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// redirect classifies a redirection: a write to a path mutates it; to a
// path that grants access or runs things later it is forbidden.
func (c *classifier) redirect(src string, r *syntax.Redirect) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.ClbOut, syntax.RdrAll, syntax.AppAll:
	case syntax.DplOut, syntax.DplIn:
		return // >&2, <&0: duplicates a descriptor
	default:
		return // reads, here-documents
	}
	text := nodeText(src, r)
	if r.Word == nil {
		return
	}
	target, ok := literal(r.Word)
	if !ok {
		c.add(text, Destructive, "writes to a path the classifier cannot read")
		return
	}
	c.write(text, target, "writes to "+target)
}

// write classifies a write to target.
func (c *classifier) write(text, target, rule string) {
	switch {
	case target == "/dev/null" || target == "/dev/stdout" || target == "/dev/stderr" || strings.HasPrefix(target, "/dev/fd/"):
		c.add(text, ReadOnly, "writes to "+target)
	case forbiddenPath(target):
		c.add(text, Forbidden, rule+": a path that grants access or runs programs later")
	case runsProgramsPath(target):
		c.add(text, Destructive, rule+": a file that names programs a later command or login runs")
	default:
		c.add(text, Mutating, rule)
	}
}

// runsProgramsPath reports whether p is a file that makes an ordinary
// later command run programs it names: git's configuration and hooks, a
// shell's start-up files.
func runsProgramsPath(p string) bool {
	clean := path.Clean(p)
	base := path.Base(clean)
	switch {
	case base == ".gitconfig" || strings.HasSuffix(clean, "/.git/config") || clean == ".git/config" ||
		strings.Contains(clean, ".git/hooks/") || strings.HasSuffix(clean, "/.config/git/config"),
		base == ".bashrc" || base == ".bash_profile" || base == ".bash_login" || base == ".profile" ||
			base == ".zshrc" || base == ".zshenv" || base == ".zprofile" || base == ".bash_logout":
		return true
	}
	return false
}

// forbiddenPath reports whether writing p installs access or scheduled
// programs: cron tables, authorized_keys files, sudoers.
func forbiddenPath(p string) bool {
	clean := path.Clean(p)
	base := path.Base(clean)
	switch {
	case strings.HasPrefix(clean, "/etc/cron"), strings.HasPrefix(clean, "/var/spool/cron"),
		strings.HasPrefix(clean, "/etc/sudoers"),
		base == "authorized_keys" || base == "authorized_keys2",
		strings.HasPrefix(clean, "/etc/ssh/sshd_config"),
		clean == "/etc/passwd" || clean == "/etc/shadow" || clean == "/etc/group" || clean == "/etc/gshadow",
		strings.HasPrefix(clean, "/etc/systemd/system") || strings.HasPrefix(clean, "/etc/profile.d") || clean == "/etc/ld.so.preload":
		return true
	}
	return false
}

// Transfer classifies a file transfer: a get reads; a put writes path —
// forbidden where a write grants access or runs programs later, at least
// destructive where it makes later commands run programs or (overwrite)
// replaces a file, mutating otherwise.
func Transfer(direction, path string, overwrite bool) Result {
	text := direction + " " + path
	c := &classifier{}
	switch {
	case direction == "get":
		c.add(text, ReadOnly, "reads a file")
	case forbiddenPath(path):
		c.add(text, Forbidden, "writes "+path+": a path that grants access or runs programs later")
	case runsProgramsPath(path):
		c.add(text, Destructive, "writes "+path+": a file that names programs a later command or login runs")
	case overwrite:
		c.add(text, Destructive, "replaces "+path+" if it exists")
	default:
		c.add(text, Mutating, "creates "+path)
	}
	return c.res
}
