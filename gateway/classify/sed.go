package classify

import "strings"

var sedModel = compile(&model{names: "sed", short: "ne:f:i::l:Ersuz",
	long:    "quiet silent debug expression= file= follow-symlinks in-place? line-length= posix regexp-extended separate sandbox unbuffered null-data help version",
	effects: "f,file:read"})

// sed prints unless it edits in place (-i: its files are written) or its
// script writes files or runs commands (w, W, e, s///w, s///e) or cannot
// be read (-f, or a word that is not a literal).
func (c *classifier) sed(text string, rest []word) {
	opts, ops, ok := c.parse(text, sedModel, rest)
	if !ok {
		return
	}
	var scripts []word
	inPlace := false
	for _, p := range opts {
		switch {
		case p.o.short == 'e' || p.o.long == "expression":
			if p.val != nil {
				scripts = append(scripts, *p.val)
			}
		case p.o.short == 'f' || p.o.long == "file":
			c.add(text, Destructive, "a sed program from a file the classifier cannot read")
			return
		case p.o.short == 'i' || p.o.long == "in-place":
			inPlace = true
		}
	}
	if len(scripts) == 0 && len(ops) > 0 {
		scripts, ops = ops[:1], ops[1:]
	}
	for _, s := range scripts {
		if !s.lit {
			c.add(text, Destructive, "a sed program the classifier cannot read")
			return
		}
		if why := sedUnsafe(s.v); why != "" {
			c.add(text, Destructive, "the sed program "+why)
			return
		}
	}
	if inPlace {
		for _, o := range ops {
			c.writeWord(text, o, "sed -i rewrites", writeReplace)
		}
		c.add(text, Mutating, "sed -i rewrites files")
		return
	}
	c.add(text, ReadOnly, "sed prints")
}

// sedUnsafe reads a sed script and says what in it is not proved to only
// print ("" when all is): commands that write (w, W), run (e) or that
// the reader does not know; s/// with the w or e flag.
func sedUnsafe(script string) string {
	r := &sedReader{s: script}
	for {
		r.skip(" \t\n;")
		if r.done() {
			return ""
		}
		if r.peek() == '#' {
			r.line()
			continue
		}
		if !r.address() {
			return "has an address the classifier cannot read"
		}
		r.skip(" \t")
		if r.peek() == '!' {
			r.i++
			r.skip(" \t")
		}
		if r.done() {
			return "ends without a command"
		}
		cmd := r.s[r.i]
		r.i++
		switch {
		case strings.IndexByte("pPdDqQ=lnNgGhHxzF{}", cmd) >= 0:
			r.skip("0123456789 \t") // q5, l 80
		case cmd == ':' || cmd == 'b' || cmd == 't' || cmd == 'T':
			r.label()
		case cmd == 'r' || cmd == 'R':
			r.line() // reads a file into the output
		case cmd == 's':
			if why := r.substitute(); why != "" {
				return why
			}
		case cmd == 'y':
			if !r.delimited(2) {
				return "has a y command the classifier cannot read"
			}
		default:
			return "has the command " + string(cmd) + ", which writes files, runs commands or is not one the classifier knows"
		}
	}
}

// sedReader walks a sed script.
type sedReader struct {
	s string
	i int
}

func (r *sedReader) done() bool { return r.i >= len(r.s) }
func (r *sedReader) peek() byte {
	if r.done() {
		return 0
	}
	return r.s[r.i]
}
func (r *sedReader) skip(chars string) {
	for !r.done() && strings.IndexByte(chars, r.s[r.i]) >= 0 {
		r.i++
	}
}

// line skips to the end of the line.
func (r *sedReader) line() {
	for !r.done() && r.s[r.i] != '\n' {
		r.i++
	}
}

// label skips a label. GNU sed ends one at a newline, a semicolon or
// blank space: what follows a blank is read as the next command.
func (r *sedReader) label() {
	r.skip(" \t")
	for !r.done() && strings.IndexByte("\n; \t", r.s[r.i]) < 0 {
		r.i++
	}
}

// address skips an address or a range of two (numbers, $, /re/, \cREc,
// first~step, +N, ~N); false when one cannot be read.
func (r *sedReader) address() bool {
	for n := 0; n < 2; n++ {
		switch c := r.peek(); {
		case c >= '0' && c <= '9':
			r.skip("0123456789~")
		case c == '$':
			r.i++
		case c == '/':
			if !r.delimited(1) {
				return false
			}
			r.skip("IM")
		case c == '\\':
			r.i++
			if !r.delimited(1) {
				return false
			}
			r.skip("IM")
		case (c == '+' || c == '~') && n == 1:
			r.i++
			r.skip("0123456789")
		default:
			return true // no address, or the end of a range's second
		}
		if r.peek() != ',' {
			return true
		}
		r.i++
	}
	return true
}

// delimited skips n parts ended by the delimiter at r.i (the character
// that starts them), honouring backslash escapes.
func (r *sedReader) delimited(n int) bool {
	if r.done() || r.s[r.i] == '\n' || r.s[r.i] == '\\' {
		return false
	}
	delim := r.s[r.i]
	r.i++
	for part := 0; part < n; part++ {
		for {
			if r.done() {
				return false
			}
			c := r.s[r.i]
			r.i++
			if c == '\\' {
				r.i++
				continue
			}
			if c == delim {
				break
			}
		}
	}
	return true
}

// substitute reads s/RE/REPLACEMENT/FLAGS: the w and e flags write a
// file or run the pattern space as a command.
func (r *sedReader) substitute() string {
	if !r.delimited(2) {
		return "has an s command the classifier cannot read"
	}
	for !r.done() {
		c := r.s[r.i]
		switch {
		case c == 'g' || c == 'p' || c == 'i' || c == 'I' || c == 'm' || c == 'M' || c >= '0' && c <= '9':
			r.i++
		case c == 'w' || c == 'e':
			return "has s///" + string(c) + ", which writes a file or runs a command"
		default:
			return ""
		}
	}
	return ""
}
