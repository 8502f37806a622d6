package classify

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// node classifies one node of a parsed line (its children are walked
// after it).
func (c *classifier) node(src string, n syntax.Node, depth int) {
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
	}
}
