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
}
