package classify

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// word is one word of a simple command as the classifier reads it.
type word struct {
	// v is the word's value after quote removal, when lit.
	v string
	// lit: the word is a literal, its value known.
	lit bool
	// one: the word becomes exactly one argument (a literal, or
	// expansions inside double quotes only).
	one bool
	// safe: no argument the word becomes can start with "-", so it is an
	// operand wherever an operand may stand: it starts with a literal
	// that is not "-", and nothing in it is split into more words (only
	// a glob or a brace list may add words, each starting the same).
	safe bool
	// src is the word as written.
	src string
}

// readWord reads w, a word of src.
func readWord(src string, w *syntax.Word) word {
	out := word{src: nodeText(src, w)}
	out.v, out.lit = literal(w)
	if out.lit {
		out.one, out.safe = true, !strings.HasPrefix(out.v, "-")
		return out
	}
	out.one, out.safe = true, leadsWithLiteral(w)
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if mayExpand(p.Value) {
				out.one = false // a glob or a brace list
			}
		case *syntax.SglQuoted:
		case *syntax.ProcSubst:
			// <(…) becomes one path, /dev/fd/N.
		case *syntax.DblQuoted:
			if p.Dollar || splitsInQuotes(p) {
				out.one, out.safe = false, false
			}
		default:
			// An unquoted expansion is split into words, any of which
			// may start with "-".
			out.one, out.safe = false, false
		}
	}
	return out
}

// leadsWithLiteral reports whether w starts with a literal character
// that cannot begin an option, a glob or a brace list.
func leadsWithLiteral(w *syntax.Word) bool {
	if len(w.Parts) == 0 {
		return false
	}
	var first string
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		first = p.Value
	case *syntax.SglQuoted:
		if p.Dollar {
			return false
		}
		first = p.Value
	case *syntax.ProcSubst:
		return true // /dev/fd/N
	case *syntax.DblQuoted:
		if len(p.Parts) == 0 || p.Dollar {
			return false
		}
		l, ok := p.Parts[0].(*syntax.Lit)
		if !ok {
			return false
		}
		first = l.Value
	default:
		return false
	}
	return first != "" && !strings.ContainsRune("-{*?[\\", rune(first[0]))
}

// splitsInQuotes reports whether a double-quoted string still becomes
// several words: "$@", "${a[@]}", "${!prefix@}".
func splitsInQuotes(q *syntax.DblQuoted) bool {
	for _, p := range q.Parts {
		pe, ok := p.(*syntax.ParamExp)
		if !ok {
			continue
		}
		if pe.Param != nil && pe.Param.Value == "@" {
			return true
		}
		if pe.Index != nil {
			if w, ok := pe.Index.(*syntax.Word); ok && w.Lit() == "@" {
				return true
			}
		}
		if pe.Names != 0 {
			return true
		}
	}
	return false
}

// literal returns a word's value after quote removal, and false when it
// is not a literal: it holds a parameter, arithmetic or command expansion,
// a substitution, $'…' quoting, or a glob or brace expansion whose result
// the classifier cannot know.
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
			if p.Dollar {
				return "", false // $"…" is translated by the target's locale
			}
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
