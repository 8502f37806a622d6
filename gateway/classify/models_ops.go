package classify

import (
	"path"
	"strings"
)

// More rules for operands that are not all files read (a model's opsFn).

// opsLink: as opsCopy, and a lone operand is a link made in the working
// directory under the target's last name (ln -s /x/y makes ./y).
//
// The links it makes are remembered: a later write of the line through
// one is placed at its target too (ln -s .ssh s; echo k >> s/rc).
func opsLink(c *classifier, text string, ops []word) {
	switch {
	case len(ops) == 1 && !ops[0].lit:
		c.add(text, Destructive, "ln "+ops[0].src+": a link named after a target the classifier cannot read")
		return
	case len(ops) == 1:
		c.writePath(text, path.Base(ops[0].v), "makes a link", writeReplace)
		c.remember(path.Base(ops[0].v), ops[0].v)
		return
	}
	opsCopy(c, text, ops)
	if len(ops) == 0 {
		return
	}
	dest := ops[len(ops)-1]
	for _, target := range ops[:len(ops)-1] {
		switch {
		case !target.lit || !dest.lit:
			// Writes through the link go where the classifier cannot
			// place them.
			c.cwd.unknown = true
		case len(ops) == 2:
			c.remember(dest.v, target.v)
			c.remember(path.Join(dest.v, path.Base(target.v)), target.v)
		default:
			c.remember(path.Join(dest.v, path.Base(target.v)), target.v)
		}
	}
}

// remember records a link the line makes: name, as written, points to
// target (relative to the link's directory).
func (c *classifier) remember(name, target string) {
	if c.links == nil {
		c.links = map[string]string{}
	}
	for _, r := range c.place(name) {
		t := target
		if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "~") {
			t = path.Join(path.Dir(r.path), t)
		}
		if len(c.links) < maxDirs {
			c.links[r.path] = t
		}
	}
}

// opsInstall: install copies as opsCopy does, or with -d makes every
// operand a directory; every operand is taken to be written, and the
// copies' destinations too.
func opsInstall(c *classifier, text string, ops []word) {
	for _, o := range ops[:max(len(ops)-1, 0)] {
		c.writeWord(text, o, "may make", writeReplace)
	}
	opsCopy(c, text, ops)
}

// opsSplit: [INPUT [PREFIX]]: split writes PREFIXaa, PREFIXab, … ("x"
// when there is no PREFIX). Which names the files get depends on the
// options and the input's size, and any name that starts with PREFIX
// may be one of them: a PREFIX given makes the command destructive.
func opsSplit(c *classifier, text string, ops []word) {
	for _, o := range ops {
		if !o.one {
			c.add(text, Destructive, "split "+o.src+": the operand may expand to more than one, and the second names the files written")
			return
		}
	}
	if len(ops) < 2 {
		c.writePath(text, "xaa", "writes", writeReplace)
		return
	}
	c.writeWord(text, ops[1], "writes files named from", writeReplace)
	c.add(text, Destructive, "split writes files whose names start with "+ops[1].src+", which ones the classifier cannot know")
}

// opsCsplit: INPUT PATTERN...: csplit writes xx00, xx01, … in the working
// directory (-f PREFIX is the option's effect).
func opsCsplit(c *classifier, text string, ops []word) {
	c.writePath(text, "xx00", "writes", writeReplace)
}

// opsRsync: SRC... DEST as opsCopy; an operand that names another host
// (HOST:PATH, HOST::MODULE, rsync://HOST/…) makes rsync run a remote
// shell or reach a daemon, where what it writes is not on this machine's
// table of paths.
func opsRsync(c *classifier, text string, ops []word) {
	for _, o := range ops {
		switch {
		case !o.lit:
			c.add(text, Destructive, "rsync "+o.src+": an operand the classifier cannot read may name another host")
			return
		case remoteOperand(o.v):
			c.add(text, Destructive, "rsync "+o.src+" reaches another host")
			return
		}
	}
	opsCopy(c, text, ops)
}

// remoteOperand: rsync's rule, a ':' before any '/' (or rsync://).
func remoteOperand(s string) bool {
	if strings.HasPrefix(s, "rsync://") {
		return true
	}
	colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
	return colon >= 0 && (slash < 0 || colon < slash)
}
