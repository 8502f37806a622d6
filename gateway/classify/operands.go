package classify

import (
	"path"
	"strings"
)

// The rules for operands that are not all files read (a model's opsFn).

// opsEachOpened: every operand is a file opened for writing (tee).
func opsEachOpened(c *classifier, text string, ops []word) {
	for _, o := range ops {
		c.writeWord(text, o, "writes", writeOpen)
	}
}

// opsEachChanged: every operand is a path made, changed or removed
// (touch, mkdir, chmod's files, and its mode too: with --reference
// there is none, so no operand is taken for a mode).
func opsEachChanged(c *classifier, text string, ops []word) {
	if len(ops) == 0 {
		c.add(text, ReadOnly, "nothing to change")
	}
	for _, o := range ops {
		c.writeWord(text, o, "changes", writeMake)
	}
}

// opsEachTree: every operand is changed with all it holds (chmod, chown,
// chgrp, whose -R reaches inside, and whose change of a directory decides
// who may write in it).
func opsEachTree(c *classifier, text string, ops []word) {
	for _, o := range ops {
		c.writeWord(text, o, "changes", writeTree)
	}
}

// opsCopy: the last operand is written (cp, install, ln); when there are
// several, it may be a directory that receives each source by its name.
func opsCopy(c *classifier, text string, ops []word) { copyOps(c, text, ops, false) }

// opsMove: as opsCopy, and each source is removed from where it was (mv).
func opsMove(c *classifier, text string, ops []word) { copyOps(c, text, ops, true) }

func copyOps(c *classifier, text string, ops []word, move bool) {
	if len(ops) == 0 {
		c.add(text, ReadOnly, "nothing to copy")
		return
	}
	for _, o := range ops {
		if !o.one {
			c.add(text, Destructive, "the operand "+o.src+" may expand to more than one, so the destination cannot be known")
			return
		}
	}
	dest, srcs := ops[len(ops)-1], ops[:len(ops)-1]
	c.writeWord(text, dest, "writes", writeReplace)
	for _, s := range srcs {
		if move {
			c.writeWord(text, s, "moves away", writeReplace)
		}
		if dest.lit && s.lit {
			c.writePath(text, path.Join(dest.v, path.Base(s.v)), "writes", writeReplace)
		} else if dest.lit {
			c.writeWord(text, word{src: dest.v + "/" + s.src}, "writes", writeReplace)
		}
	}
}

// opsUniq: [INPUT [OUTPUT]]: the second operand is written.
func opsUniq(c *classifier, text string, ops []word) {
	for i, o := range ops {
		switch {
		case !o.one:
			c.add(text, Destructive, "the operand "+o.src+" may expand to more than one, and a second operand is written")
			return
		case i == 1:
			c.writeWord(text, o, "writes", writeOpen)
		}
	}
}

// opsDate: "+FORMAT" prints; any other operand sets the clock.
func opsDate(c *classifier, text string, ops []word) {
	for _, o := range ops {
		if !o.lit || !strings.HasPrefix(o.v, "+") {
			c.add(text, Privileged, "date "+o.src+" sets the clock")
		}
	}
}

// opsHostname: an operand sets the host name.
func opsHostname(c *classifier, text string, ops []word) {
	if len(ops) > 0 {
		c.add(text, Privileged, "hostname "+ops[0].src+" sets the host name")
	}
}
