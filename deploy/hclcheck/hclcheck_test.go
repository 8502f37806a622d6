package hclcheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

func TestCollector(t *testing.T) {
	c := &Collector{File: "x.hcl"}
	_, diags := hclparse.NewParser().ParseHCL([]byte("a = \n"), "x.hcl")
	c.Diags(diags)
	c.Errorf(hcl.Range{Filename: "x.hcl", Start: hcl.Pos{Line: 7}}, "bad %s", "thing")
	c.Add(nil, "no place")
	var lines []int
	for _, p := range c.Problems {
		lines = append(lines, p.Line)
	}
	if diff := cmp.Diff([]int{1, 7, 0}, lines); diff != "" || !c.Failed() {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if got := Text("config", c.Problems[1:2]); got != "config: x.hcl:7: bad thing" {
		t.Errorf("Text = %q", got)
	}
}
