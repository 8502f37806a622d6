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
