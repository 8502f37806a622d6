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
		return nil, fmt.Errorf("invalid class %d", uint8(c))
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
	return 0, fmt.Errorf("%q is not a class (read_only, mutating, destructive, privileged, forbidden)", s)
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
	if c.fileOnFd {
		for _, p := range c.reopened {
			c.add(p.Text, p.Class, p.Rule)
		}
	}
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
	// cwd is where the line's commands may run.
	cwd cwdSet
	// reopened are writes to /dev/fd/N and the standard streams, harmless
	// unless a redirection of the line puts a file on a descriptor
	// (fileOnFd): then each opens that file again, for writing.
	reopened []Part
	fileOnFd bool
	// links are the symbolic links the line makes (ln -s), placed: name
	// → target as written.
	links map[string]string
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
		for _, p := range c.res.Parts {
			if p.Text == text && p.Rule == rule {
				return // the same part, read again (in the other dialect)
			}
		}
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

// nodeText is the source text of n.
func nodeText(src string, n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(src) || s > e {
		return ""
	}
	return src[s:e]
}

// Transfer classifies a file transfer: a get reads; a put writes path —
// forbidden or destructive where the table of paths says so, at least
// destructive when it replaces a file (overwrite) or when its place is
// not known, mutating otherwise.
func Transfer(direction, path string, overwrite bool) Result {
	text := direction + " " + path
	c := &classifier{}
	switch {
	case direction == "get":
		c.add(text, ReadOnly, "reads a file")
	default:
		if overwrite {
			c.add(text, Destructive, "replaces "+path+" if it exists")
		}
		c.writePath(text, path, "creates", writeReplace)
	}
	return c.res
}
