package classify

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

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
		c.node(src, n, depth)
		return true
	})
	// The account's shell, or the sh of an `sh -c`, may be a POSIX shell
	// (dash), which reads some lines otherwise: `[[ x > f ]]` and
	// `((1>2))` write files there, `a &> f` runs a in the background and
	// truncates f. Where the line is POSIX too, it is classified as a
	// POSIX shell reads it as well; the higher class counts.
	if p, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX), syntax.KeepComments(true)).Parse(strings.NewReader(src), ""); err == nil {
		syntax.Walk(p, func(n syntax.Node) bool {
			c.node(src, n, depth)
			return true
		})
	}
}
