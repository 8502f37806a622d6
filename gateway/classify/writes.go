package classify

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// writeMode is how a program writes a path.
type writeMode uint8

const (
	// writeOpen: the path is opened for writing (a redirection, tee,
	// sort -o); /dev/null and the standard streams take the bytes and
	// change nothing.
	writeOpen writeMode = iota
	// writeReplace: the path is renamed over, linked, removed or made
	// anew (mv, cp, ln): a device node is replaced, not written.
	writeReplace
	// writeInDir: files are made inside the path (cp -t, sort -T).
	writeInDir
	// writeMake: the path is made or its times or contents changed
	// (touch, mkdir): as writeReplace, but making a directory changes
	// nothing it could hold.
	writeMake
	// writeTree: the path and all it holds are changed or removed (chmod,
	// chown, rm -r): a directory that holds a path of the table is as
	// sensitive as that path.
	writeTree
)

// home is how a path in the home directory is written once resolved:
// "~" and the directory a command starts in become this absolute
// stand-in, which the table's "~/" rows match.
const home = "/~"

// harmlessOpen reports whether opening p for writing changes nothing:
// the bytes go to the null device, or to a descriptor the command was
// given. Opening /dev/fd/N or a standard stream opens again what the
// descriptor refers to (and truncates it): harmless only while no
// redirection of the line puts a file on a descriptor (reopened reports
// those; see fdOpen).
func harmlessOpen(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/full":
		return true
	}
	return reopens(p)
}

// reopens reports whether opening p opens again one of the process's
// descriptors.
func reopens(p string) bool {
	switch p {
	case "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(p, dir); ok && allDigits(n) {
			return true
		}
	}
	return false
}

// writeWord classifies a write to the path w names. rule says what
// writes it ("sort -o writes").
func (c *classifier) writeWord(text string, w word, rule string, mode writeMode) {
	if w.lit {
		c.writePath(text, w.v, rule, mode)
		return
	}
	// A path the classifier cannot read: at least destructive, and what
	// its literal start already names when that is more (> /etc/cron.d/$x).
	cl, why := Destructive, rule+" "+w.src+", a path the classifier cannot read"
	if prefix := literalPrefix(w.src); prefix != "" {
		for _, p := range c.resolve(prefix + "\x01") {
			if s, sw := sensitive(p.path); s > cl {
				cl, why = s, rule+" "+w.src+": "+sw
			}
		}
	}
	c.add(text, cl, why)
}

// literalPrefix is the start of a word as written up to its first quote,
// expansion or glob: the part of a path that is known.
func literalPrefix(src string) string {
	i := strings.IndexAny(src, "$`\"'\\*?[{")
	if i < 0 {
		return src
	}
	return src[:i]
}

// writePath classifies a write to p.
func (c *classifier) writePath(text, p, rule string, mode writeMode) {
	if mode == writeOpen && harmlessOpen(p) {
		if reopens(p) {
			c.reopened = append(c.reopened, Part{Text: text, Class: Destructive,
				Rule: rule + " " + p + ", which opens again, for writing, a file the line put on a descriptor"})
		}
		c.add(text, ReadOnly, rule+" "+p+", which keeps nothing")
		return
	}
	if strings.HasPrefix(path.Clean(p), "/dev/") {
		c.add(text, Destructive, rule+" "+p+", a device")
		return
	}
	cl, why := Mutating, ""
	for _, r := range c.resolve(p) {
		if !r.known && cl < Destructive {
			cl, why = Destructive, "a path relative to a directory the classifier cannot place"
		}
		probe := r.path
		if mode == writeInDir {
			probe += "/\x01"
		}
		if s, sw := sensitive(probe); s > cl {
			cl, why = s, sw
		}
		if mode == writeInDir {
			if s, sw := sensitive(r.path); s > cl {
				cl, why = s, sw
			}
		}
		if mode == writeReplace || mode == writeTree {
			if s, sw := sensitiveWithin(r.path); s > cl {
				cl, why = s, sw
			}
		}
	}
	if why != "" {
		rule += " " + p + ": " + why
	} else {
		rule += " " + p
	}
	c.add(text, cl, rule)
}

// resolved is a path as the classifier places it.
type resolved struct {
	path string
	// known: the path is absolute, or relative to a directory the
	// classifier knows.
	known bool
}

// resolve places p: absolute as it is; in the home directory for "~";
// relative against every directory a `cd` earlier in the line may have
// entered (and the one the command starts in, the home directory).
func (c *classifier) resolve(p string) []resolved {
	out := c.place(p)
	// A link the line made earlier (ln -s TARGET NAME) puts what is
	// written through it at its target.
	for _, r := range out {
		for name, target := range c.links {
			if rest, ok := strings.CutPrefix(r.path, name); ok && (rest == "" || rest[0] == '/') {
				for _, t := range c.place(target) {
					out = append(out, resolved{path.Clean(t.path + rest), t.known && r.known})
				}
			}
		}
	}
	return out
}

// place places p without following links.
func (c *classifier) place(p string) []resolved {
	switch {
	case strings.HasPrefix(p, "/"):
		return []resolved{{path.Clean(p), true}}
	case p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~") && !strings.HasPrefix(p, "~+") && !strings.HasPrefix(p, "~-") && !(len(p) > 1 && p[1] >= '0' && p[1] <= '9'):
		// ~ or ~user: a home directory.
		rest := ""
		if i := strings.IndexByte(p, '/'); i >= 0 {
			rest = p[i:]
		}
		return []resolved{placeInHome(home + rest)}
	case strings.HasPrefix(p, "~"):
		// ~+ is the working directory, ~- the previous one, ~N, ~+N and
		// ~-N the directory stack: any directory the line entered, and
		// not known.
		rest := "."
		if i := strings.IndexByte(p, '/'); i >= 0 {
			rest = p[i+1:]
		}
		out := c.place(rest)
		return append(out, resolved{path.Clean(rest), false})
	}
	var out []resolved
	for _, d := range c.cwd.dirs() {
		out = append(out, placeInHome(path.Join(d, p)))
	}
	if c.cwd.unknown {
		out = append(out, resolved{path.Clean(p), false})
	}
	return out
}

// placeInHome cleans p; a path that climbs out of the home directory
// ("~/../x") is not known: the home may be anywhere.
func placeInHome(p string) resolved {
	clean := path.Clean(p)
	if strings.HasPrefix(p, home) && clean != home && !strings.HasPrefix(clean, home+"/") {
		return resolved{clean, false}
	}
	return resolved{clean, true}
}

// cwdSet is where a command of the line may run: the home directory, and
// every directory a cd, pushd or env -C earlier in the line may have
// entered (conditions and subshells are not followed: any of them).
type cwdSet struct {
	extra   []string
	unknown bool
}

// maxDirs bounds the directories followed.
const maxDirs = 16

func (s *cwdSet) dirs() []string { return append([]string{home}, s.extra...) }

// enter records a change of directory to w (nil: the home directory).
func (s *cwdSet) enter(w *word) {
	if w == nil {
		return
	}
	if !w.lit || w.v == "-" || len(s.extra) >= maxDirs {
		s.unknown = true
		return
	}
	if !strings.HasPrefix(w.v, "/") && !strings.HasPrefix(w.v, ".") && !strings.HasPrefix(w.v, "~") {
		// cd NAME looks in $CDPATH first, which the target may set.
		s.unknown = true
	}
	for _, r := range (&classifier{cwd: *s}).place(w.v) {
		if !r.known {
			s.unknown = true
			continue
		}
		s.extra = append(s.extra, r.path)
	}
}

// redirect classifies a redirection: reading a file reads; writing one
// is at least destructive (it may replace what was there), more for the
// paths of the table; a descriptor duplicated or closed changes nothing.
func (c *classifier) redirect(src string, r *syntax.Redirect) {
	text := nodeText(src, r)
	if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
		c.add(text, Destructive, "assigns a descriptor to a variable ("+r.N.Value+")")
	}
	var w word
	if r.Word != nil {
		w = readWord(src, r.Word)
	}
	if w.lit && (strings.HasPrefix(w.v, "/dev/tcp/") || strings.HasPrefix(w.v, "/dev/udp/")) {
		c.add(text, Destructive, "opens a network connection ("+w.v+")")
		return
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		c.heredoc(src, text, r)
		return
	case syntax.WordHdoc:
		return // reads
	case syntax.RdrIn:
		c.fileOnFd = true
		if w.lit && strings.HasPrefix(path.Clean(w.v), "/dev/") && !harmlessOpen(path.Clean(w.v)) && w.v != "/dev/urandom" && w.v != "/dev/random" {
			c.add(text, Destructive, "opens the device "+w.v+": opening some devices acts (a terminal, a watchdog)")
		} else if !w.lit && !w.safe {
			c.add(text, Destructive, "reads a path the classifier cannot read")
		}
		return
	case syntax.DplIn, syntax.DplOut:
		if w.lit && (w.v == "-" || allDigits(strings.TrimSuffix(w.v, "-"))) {
			return // duplicates, moves or closes a descriptor
		}
		if r.Op == syntax.DplIn {
			c.add(text, Destructive, "a redirection the classifier cannot read")
			return
		}
	case syntax.RdrOut, syntax.AppOut, syntax.ClbOut, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut:
		if !(w.lit && harmlessOpen(w.v)) {
			c.fileOnFd = true
		}
	default:
		c.add(text, Destructive, "a redirection the classifier does not know")
		return
	}
	if w.lit && harmlessOpen(w.v) {
		c.writePath(text, w.v, "writes to", writeOpen)
		return
	}
	c.add(text, Destructive, "writes a file, replacing or adding to what it holds")
	c.writeWord(text, w, "writes", writeOpen)
}

// heredoc classifies a here-document: its body is read by the command
// (its expansions are walked with the rest of the line). A line of the
// body that ends in a backslash is joined to the next by bash before it
// looks for the end word, which the parser does not do: where the
// document ends is not known.
func (c *classifier) heredoc(src, text string, r *syntax.Redirect) {
	if r.Hdoc == nil {
		return
	}
	if body := nodeText(src, r.Hdoc); strings.Contains(body, "\\\n") || strings.Contains(body, "\\\r\n") {
		c.add(text, Destructive, "a here-document with a line ending in a backslash: where the shell ends it is not known")
	}
}
