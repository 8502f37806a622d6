// Package hclcheck collects the problems found in an HCL file, each with
// its file:line, so that a tool can report every one of them at once. The
// gateway's configuration and airlock-action's policy both use it; it knows
// nothing of either.
package hclcheck

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// Problem is one problem at a place in a file.
type Problem struct {
	File    string
	Line    int // 0 when the problem has no place
	Message string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.File + ": " + p.Message
	}
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
}

// Text formats problems for an error message, prefixed with what was
// checked: one problem on one line, several as an indented list.
func Text(prefix string, problems []Problem) string {
	if len(problems) == 1 {
		return prefix + ": " + problems[0].String()
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%s: %d problems:\n  %s", prefix, len(problems), strings.Join(lines, "\n  "))
}

// Collector gathers problems; File names problems that have no place.
type Collector struct {
	File     string
	Problems []Problem

	// held are the problems of attributes' values not said yet, by where
	// each attribute starts; bad the attributes whose value is unusable.
	held map[hcl.Pos]hcl.Diagnostics
	bad  map[hcl.Pos]bool
}

// Hold keeps problems of attributes' values (DecodeBody's Values), by
// where each attribute starts, to say them where the checks read the
// attribute (Value): in the order a check of each attribute by hand
// would have said them.
func (c *Collector) Hold(values map[hcl.Pos]hcl.Diagnostics) {
	if c.held == nil {
		c.held, c.bad = map[hcl.Pos]hcl.Diagnostics{}, map[hcl.Pos]bool{}
	}
	for at, diags := range values {
		c.held[at] = append(c.held[at], diags...)
	}
}

// Value says the held problems of the attribute at r, once, and reports
// whether the attribute is set and its value usable.
func (c *Collector) Value(r hcl.Range) bool {
	if diags, ok := c.held[r.Start]; ok {
		c.Diags(diags)
		delete(c.held, r.Start)
		c.bad[r.Start] = true
	}
	return Set(r) && !c.bad[r.Start]
}

// SayHeld says the problems still held, in the order of the file.
func (c *Collector) SayHeld() {
	var diags hcl.Diagnostics
	for _, d := range c.held {
		diags = append(diags, d...)
	}
	clear(c.held)
	SortDiags(diags)
	c.Diags(diags)
}

// Failed reports whether any problem was found.
func (c *Collector) Failed() bool { return len(c.Problems) > 0 }

// Add records a problem at r (nil: no place).
func (c *Collector) Add(r *hcl.Range, msg string) {
	p := Problem{File: c.File, Message: msg}
	if r != nil && r.Filename != "" {
		p.File, p.Line = r.Filename, r.Start.Line
	}
	c.Problems = append(c.Problems, p)
}

// Errorf records a formatted problem at r.
func (c *Collector) Errorf(r hcl.Range, format string, args ...any) {
	c.Add(&r, fmt.Sprintf(format, args...))
}

// Decode decodes a's expression into v (a pointer to a string, a bool, an
// int, a []string, …) as gohcl does, as a constant: no variables or
// functions. A value that does not fit is recorded as a problem at a's
// line, and Decode reports false.
func (c *Collector) Decode(a *hcl.Attribute, v any) bool {
	diags := gohcl.DecodeExpression(a.Expr, nil, v)
	c.Diags(diags)
	return !diags.HasErrors()
}

// Diags records HCL's error diagnostics (warnings are dropped).
func (c *Collector) Diags(ds hcl.Diagnostics) {
	for _, d := range ds {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		c.Add(d.Subject, msg)
	}
}
