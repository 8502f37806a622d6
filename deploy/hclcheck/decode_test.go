package hclcheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

type testBody struct {
	Name       string    `hcl:"name,optional"`
	NameRange  hcl.Range `hcl:"name,attr_range"`
	Count      int       `hcl:"count,optional"`
	CountRange hcl.Range `hcl:"count,attr_range"`
	Blocks     []struct {
		Size      int       `hcl:"size,optional"`
		SizeRange hcl.Range `hcl:"size,attr_range"`
	} `hcl:"block,block"`
}

func decodeTest(t *testing.T, src string) (*Collector, *testBody, Decoded) {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCL([]byte(src), "x.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var b testBody
	return &Collector{File: "x.hcl"}, &b, DecodeBody(f.Body, &b)
}

// A value that does not fit is held apart from problems of structure, and
// said once, where a check reads the attribute.
func TestDecodeBodyHoldsValueProblems(t *testing.T) {
	c, b, d := decodeTest(t, "name = \"a\"\ncount = \"many\"\nblock {\n  size = [1]\n}\n")
	if len(d.Structure) != 0 || len(d.Values) != 2 || len(d.Attributes) != 3 {
		t.Fatalf("structure %v, values %v, attributes %d; want 0, 2, 3", d.Structure, d.Values, len(d.Attributes))
	}
	c.Hold(d.Values)
	if !c.Value(b.NameRange) || b.Name != "a" {
		t.Errorf("name: usable %v, %q", c.Value(b.NameRange), b.Name)
	}
	if c.Value(b.Blocks[0].SizeRange) || c.Value(b.Blocks[0].SizeRange) {
		t.Error("a size that is a list is usable")
	}
	c.SayHeld()
	var lines []int
	for _, p := range c.Problems {
		lines = append(lines, p.Line)
	}
	if diff := cmp.Diff([]int{4, 2}, lines); diff != "" {
		t.Errorf("problem lines (-want +got):\n%s", diff)
	}
	if Set(hcl.Range{}) || !Set(b.CountRange) {
		t.Error("Set does not tell a missing attribute from one in the file")
	}
}

func TestDecodeBodyStructure(t *testing.T) {
	_, _, d := decodeTest(t, "nmae = \"a\"\ncount = \"many\"\n")
	if len(d.Structure) != 1 || d.Structure[0].Subject.Start.Line != 1 || len(d.Values) != 1 {
		t.Errorf("structure %v, values %v; want the unknown attribute on line 1 and one value problem", d.Structure, d.Values)
	}
}
