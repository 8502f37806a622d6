package hclcheck

import (
	"cmp"
	"reflect"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// Attribute is a typed attribute that gohcl decoded and that is in the
// file: a field of a struct with gohcl tags beside a field that has the
// same name and the attr_range kind.
type Attribute struct {
	Name  string
	Value reflect.Value // the field, settable
	Range hcl.Range
}

// Set reports whether the attribute whose attr_range is r is in the file
// (gohcl leaves the range of a missing one zero).
func Set(r hcl.Range) bool { return r.Start.Line > 0 }

// Decoded is what DecodeBody found.
type Decoded struct {
	// Structure are the problems of structure (an unknown attribute or
	// block, a block too many), in the order of the file.
	Structure hcl.Diagnostics
	// Values are the problems of typed attributes' values (a value that
	// does not fit the field), by where each attribute starts.
	Values map[hcl.Pos]hcl.Diagnostics
	// Attributes are the typed attributes in the file.
	Attributes []Attribute
}

// DecodeBody decodes body into v, a pointer to a struct with gohcl tags,
// as gohcl.DecodeBody does, as constants (no variables or functions), and
// sorts the problems it finds: those of a typed attribute's value apart,
// so that a caller can go on with the attribute's zero value and say them
// where it reads the attribute, as it did when it decoded each by hand.
func DecodeBody(body hcl.Body, v any) Decoded {
	diags := gohcl.DecodeBody(body, nil, v)
	d := Decoded{Values: map[hcl.Pos]hcl.Diagnostics{}, Attributes: attributes(reflect.ValueOf(v).Elem(), nil)}
	SortDiags(diags)
	for _, diag := range diags {
		if diag.Severity != hcl.DiagError {
			continue
		}
		i := slices.IndexFunc(d.Attributes, func(a Attribute) bool { return inside(diag.Subject, a.Range) })
		if i < 0 {
			d.Structure = append(d.Structure, diag)
			continue
		}
		at := d.Attributes[i].Range.Start
		d.Values[at] = append(d.Values[at], diag)
	}
	return d
}

// SortDiags puts diags in the order of the file (gohcl decodes a
// struct's attributes and blocks in no set order); those with no place
// first.
func SortDiags(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		return cmp.Compare(offset(a), offset(b))
	})
}

func offset(d *hcl.Diagnostic) int {
	if d.Subject == nil {
		return -1
	}
	return d.Subject.Start.Byte
}

// inside reports whether the place d is in r (a value's problem may be at
// its very end, as an empty string's is).
func inside(d *hcl.Range, r hcl.Range) bool {
	return d != nil && d.Filename == r.Filename && d.Start.Byte >= r.Start.Byte && d.Start.Byte <= r.End.Byte
}

// attributes appends the typed attributes set in v, a struct with gohcl
// tags, and in its blocks.
func attributes(v reflect.Value, out []Attribute) []Attribute {
	t := v.Type()
	fields := map[string]int{}
	for i := range t.NumField() {
		name, kind, _ := strings.Cut(t.Field(i).Tag.Get("hcl"), ",")
		switch f := v.Field(i); kind {
		case "", "attr", "optional":
			fields[name] = i
		case "block":
			out = blockAttributes(f, out)
		}
	}
	for i := range t.NumField() {
		name, kind, _ := strings.Cut(t.Field(i).Tag.Get("hcl"), ",")
		if r, ok := v.Field(i).Interface().(hcl.Range); ok && kind == "attr_range" && Set(r) {
			out = append(out, Attribute{Name: name, Value: v.Field(fields[name]), Range: r})
		}
	}
	return out
}

// blockAttributes appends the typed attributes of a block field: a
// struct, a pointer to one, or a slice of either.
func blockAttributes(f reflect.Value, out []Attribute) []Attribute {
	switch f.Kind() {
	case reflect.Pointer:
		if !f.IsNil() {
			out = attributes(f.Elem(), out)
		}
	case reflect.Struct:
		out = attributes(f, out)
	case reflect.Slice:
		for j := range f.Len() {
			out = blockAttributes(f.Index(j), out)
		}
	}
	return out
}
