package classify

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// node classifies one node of a parsed line (its children are walked
// after it).
func (c *classifier) node(src string, n syntax.Node, depth int) {
	switch n := n.(type) {
	case *syntax.Stmt:
		if n.Background {
			c.add(nodeText(src, n), Mutating, "runs a command in the background, where it can outlive the action")
		}
	case *syntax.ProcSubst:
		c.add(nodeText(src, n), Mutating, "a process substitution runs a command the shell does not wait for: it can outlive the action")
	case *syntax.CallExpr:
		c.assigns(src, n.Assigns, len(n.Args) > 0)
		if len(n.Args) > 0 {
			c.call(src, n.Args, depth)
		}
	case *syntax.Redirect:
		c.redirect(src, n)
	case *syntax.DeclClause:
		c.decl(src, n)
	case *syntax.FuncDecl:
		c.add(nodeText(src, n), Destructive, "defines a function: what it runs is called by a name the classifier cannot follow")
	case *syntax.LetClause:
		c.add(nodeText(src, n), Destructive, "let evaluates its words as arithmetic, which can run commands (a[$(…)])")
	case *syntax.ArithmCmd:
		c.arith(nodeText(src, n), n.X)
	case *syntax.ArithmExp:
		c.arith(nodeText(src, n), n.X)
	case *syntax.ParamExp:
		c.param(nodeText(src, n), n)
	case *syntax.ForClause:
		c.loop(nodeText(src, n), n)
	case *syntax.TestClause:
		c.testClause(nodeText(src, n), n.X)
	case *syntax.CoprocClause:
		c.add(nodeText(src, n), Destructive, "coproc runs a command beside the shell and assigns variables")
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

// assigns classifies NAME=value words: before a command they put NAME in
// its environment; alone they set a shell variable — at least mutating,
// destructive for an upper-case name (the shell's own PATH, IFS, PS4,
// BASH_ENV and their kind change what later commands run) and for an
// array element (its subscript is evaluated as arithmetic).
func (c *classifier) assigns(src string, as []*syntax.Assign, prefix bool) {
	for _, a := range as {
		text := nodeText(src, a)
		name := ""
		if a.Name != nil {
			name = a.Name.Value
		}
		switch {
		case a.Index != nil || a.Array != nil && hasIndex(a.Array):
			c.add(text, Destructive, "assigns an array element, whose subscript is evaluated as arithmetic")
		case prefix:
			c.environ(text, name)
		case strings.ToLower(name) != name:
			c.add(text, Destructive, "sets "+name+", a name the shell or the programs it runs may read")
		default:
			c.add(text, Mutating, "sets a shell variable")
		}
	}
}

// hasIndex reports whether an array assignment names an element's index
// ([i]=v), which is evaluated as arithmetic.
func hasIndex(a *syntax.ArrayExpr) bool {
	for _, e := range a.Elems {
		if e.Index != nil {
			return true
		}
	}
	return false
}

// decl classifies declare, local, export, readonly and typeset: at least
// destructive (attributes such as -n, -x or -i change what later words
// mean), unless they only print (-p, -f, -F).
func (c *classifier) decl(src string, d *syntax.DeclClause) {
	text := nodeText(src, d)
	variant := d.Variant.Value
	for _, a := range d.Args {
		if !a.Naked || a.Name != nil || a.Value == nil {
			c.add(text, Destructive, variant+" declares variables, which later commands see")
			return
		}
		flag, ok := literal(a.Value)
		if !ok || !strings.HasPrefix(flag, "-") || strings.Trim(flag[1:], "pfF") != "" {
			c.add(text, Destructive, variant+" declares variables, which later commands see")
			return
		}
	}
	c.add(text, ReadOnly, variant+" prints")
}

// arith classifies an arithmetic expression: numbers change nothing; a
// variable's value is itself evaluated as an expression, which can run
// commands (x='a[$(…)]'; $((x))): destructive, as is an expansion's
// value; an assignment mutates.
func (c *classifier) arith(text string, x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryArithm:
			if assignOps[n.Op] {
				c.add(text, Mutating, "arithmetic assigns a variable")
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				c.add(text, Mutating, "arithmetic assigns a variable")
			}
		case *syntax.Word:
			c.arithWord(text, n)
			return false
		}
		return true
	})
}

// assignOps are the arithmetic operators that assign.
var assignOps = map[syntax.BinAritOperator]bool{syntax.Assgn: true, syntax.AddAssgn: true, syntax.SubAssgn: true,
	syntax.MulAssgn: true, syntax.QuoAssgn: true, syntax.RemAssgn: true, syntax.AndAssgn: true, syntax.OrAssgn: true,
	syntax.XorAssgn: true, syntax.ShlAssgn: true, syntax.ShrAssgn: true, syntax.AndBoolAssgn: true,
	syntax.OrBoolAssgn: true, syntax.XorBoolAssgn: true, syntax.PowAssgn: true}

// arithWord classifies one operand of an arithmetic expression.
func (c *classifier) arithWord(text string, w *syntax.Word) {
	if l := w.Lit(); l != "" && l[0] >= '0' && l[0] <= '9' {
		return // a number
	}
	if len(w.Parts) == 1 {
		if pe, ok := w.Parts[0].(*syntax.ParamExp); ok && (pe.Length || pe.Param != nil && strings.Contains("?#$!", pe.Param.Value) && pe.Exp == nil && pe.Index == nil) {
			return // ${#x}, $? $# $$ $!: numbers the shell makes
		}
	}
	c.add(text, Destructive, "arithmetic evaluates a variable's or an expansion's value as an expression, which can run commands (a[$(…)])")
}

// param classifies a parameter expansion: ${x:=v} assigns; ${!x}
// evaluates x's value as a name and ${x@P} as a prompt, either of which
// can run commands; an index or a slice is arithmetic.
func (c *classifier) param(text string, pe *syntax.ParamExp) {
	switch {
	case pe.Excl && pe.Names == 0 && !(pe.Index != nil && isAllIndex(pe.Index)):
		c.add(text, Destructive, "${!…} evaluates a variable's value as a name, which can run commands")
	case pe.Exp != nil && (pe.Exp.Op == syntax.AssignUnset || pe.Exp.Op == syntax.AssignUnsetOrNull):
		c.add(text, Mutating, "assigns a variable")
		if pe.Param != nil && strings.ToLower(pe.Param.Value) != pe.Param.Value {
			c.add(text, Destructive, "sets "+pe.Param.Value+", a name the shell or the programs it runs may read")
		}
	case pe.Exp != nil && pe.Exp.Op == syntax.OtherParamOps && pe.Exp.Word != nil && pe.Exp.Word.Lit() != "Q" && pe.Exp.Word.Lit() != "a" && pe.Exp.Word.Lit() != "A":
		c.add(text, Destructive, "${…@"+pe.Exp.Word.Lit()+"} expands the value again, which can run commands")
	}
	if pe.Index != nil && !isAllIndex(pe.Index) {
		c.arith(text, pe.Index)
	}
	if pe.Slice != nil {
		c.arith(text, pe.Slice.Offset)
		c.arith(text, pe.Slice.Length)
	}
}

// isAllIndex reports whether an index is [@] or [*].
func isAllIndex(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	return ok && (w.Lit() == "@" || w.Lit() == "*")
}

// loop classifies a for or select loop's variable (as an assignment) and
// a C-style loop's arithmetic.
func (c *classifier) loop(text string, f *syntax.ForClause) {
	switch l := f.Loop.(type) {
	case *syntax.WordIter:
		if l.Name != nil && strings.ToLower(l.Name.Value) != l.Name.Value {
			c.add(text, Destructive, "the loop sets "+l.Name.Value+", a name the shell or the programs it runs may read")
		}
	case *syntax.CStyleLoop:
		c.arith(text, l.Init)
		c.arith(text, l.Cond)
		c.arith(text, l.Post)
	}
}

// testClause classifies [[ … ]]: -v and -R evaluate a name; the
// arithmetic comparisons (-eq and their kind) evaluate both sides as
// arithmetic.
func (c *classifier) testClause(text string, x syntax.TestExpr) {
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				c.add(text, Destructive, "[[ -v ]] evaluates a variable's name, which can run commands")
			}
		case *syntax.BinaryTest:
			if n.Op >= syntax.TsEql && n.Op <= syntax.TsGtr {
				for _, side := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := side.(*syntax.Word); ok {
						c.arithWord(text, w)
					} else {
						c.add(text, Destructive, "[[ ]] evaluates an operand as arithmetic")
					}
				}
			}
		}
		return true
	})
}
