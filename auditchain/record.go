package auditchain

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// Records: an entry's fields as a Go struct, so that each field name is
// spelled once, in a struct tag, for whoever writes the entry and whoever
// reads it back.
//
// A record is a struct whose exported fields carry `audit:"name"` tags:
//
//	type started struct {
//		PID     int64     `audit:"pid"`
//		Host    string    `audit:"host,omitempty"`
//		Expires time.Time `audit:"expires_at,omitempty"`
//		Code    *int64    `audit:"exit_code"`
//		Out     Blob      `audit:"stdout"`
//	}
//
// Field types map to entry values: string and encoding.TextMarshaler
// types (stored as their text) to strings; int, int64 and uint64 to
// int64; bool to bool; []byte and [32]byte to bytes; time.Time to an
// RFC 3339 string in UTC, to the second. A pointer is absent when nil
// and present, zero included, otherwise; a value with ",omitempty" is
// absent when it is its type's zero value; any other value is always
// present. A struct field (other than time.Time) is a group: its own
// tagged fields are stored under "name_" + theirs; with ",omitempty" a
// zero group is absent. A struct (or pointer to struct) field tagged
// `audit:",inline"` is flattened into its parent, unprefixed; a nil one
// is absent. Fields without a tag are not recorded.

// recordField is one tagged field of a record type.
type recordField struct {
	index     []int
	name      string
	omitEmpty bool
	group     *recordPlan // a struct field: its fields, prefixed
	flatten   bool        // an embedded struct: its fields, not prefixed
}

type recordPlan struct {
	fields []recordField
}

var recordPlans sync.Map // reflect.Type → *recordPlan or error

var (
	timeType            = reflect.TypeFor[time.Time]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// planOf returns the plan of a record struct type.
func planOf(t reflect.Type) (*recordPlan, error) {
	if v, ok := recordPlans.Load(t); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.(*recordPlan), nil
	}
	p, err := buildPlan(t)
	if err != nil {
		recordPlans.Store(t, err)
		return nil, err
	}
	recordPlans.Store(t, p)
	return p, nil
}

func buildPlan(t reflect.Type) (*recordPlan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("audit log: a record is a struct, not %s", t)
	}
	p := &recordPlan{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("audit")
		if !tagged {
			continue
		}
		if !sf.IsExported() {
			return nil, fmt.Errorf("audit log: record %s: field %s is tagged but not exported", t, sf.Name)
		}
		if tag == ",inline" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() != reflect.Struct || et == timeType {
				return nil, fmt.Errorf("audit log: record %s: field %s: only a struct can be inline", t, sf.Name)
			}
			sub, err := planOf(et)
			if err != nil {
				return nil, err
			}
			p.fields = append(p.fields, recordField{index: []int{i}, group: sub, flatten: true})
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		f := recordField{index: []int{i}, name: name, omitEmpty: opts == "omitempty"}
		if opts != "" && opts != "omitempty" {
			return nil, fmt.Errorf("audit log: record %s: field %s: unknown tag option %q", t, sf.Name, opts)
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != timeType && !reflect.PointerTo(ft).Implements(textUnmarshalerType) {
			sub, err := planOf(ft)
			if err != nil {
				return nil, err
			}
			f.group = sub
		} else if !supported(ft) {
			return nil, fmt.Errorf("audit log: record %s: field %s has type %s, which a record cannot hold", t, sf.Name, sf.Type)
		} else if !validFieldName(name) {
			return nil, fmt.Errorf("audit log: record %s: field %s: invalid name %q", t, sf.Name, name)
		}
		p.fields = append(p.fields, f)
	}
	return p, nil
}

func supported(t reflect.Type) bool {
	if t == timeType || t.Implements(textMarshalerType) && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8
	case reflect.Array:
		return t.Elem().Kind() == reflect.Uint8
	}
	return false
}

// FieldsOf returns the fields of rec, a record struct (or a pointer to
// one), in the order of its type. It fails for a type a record cannot be
// or a value that cannot be written (a TextMarshaler that fails).
func FieldsOf(rec any) ([]Field, error) {
	v := reflect.Indirect(reflect.ValueOf(rec))
	p, err := planOf(v.Type())
	if err != nil {
		return nil, err
	}
	return p.appendFields(nil, v, "")
}

func (p *recordPlan) appendFields(out []Field, v reflect.Value, prefix string) ([]Field, error) {
	for _, f := range p.fields {
		fv := v.FieldByIndex(f.index)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		} else if f.omitEmpty && fv.IsZero() {
			continue
		}
		name := prefix + f.name
		if f.group != nil {
			sub := name + "_"
			if f.flatten {
				sub = prefix
			}
			var err error
			if out, err = f.group.appendFields(out, fv, sub); err != nil {
				return nil, err
			}
			continue
		}
		val, err := encodeValue(fv)
		if err != nil {
			return nil, fmt.Errorf("audit log: field %s: %w", name, err)
		}
		out = append(out, Field{Name: name, Value: val})
	}
	return out, nil
}

func encodeValue(v reflect.Value) (any, error) {
	t := v.Type()
	switch {
	case t == timeType:
		return v.Interface().(time.Time).UTC().Format(time.RFC3339), nil
	case t.Implements(textMarshalerType):
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		return string(b), err
	}
	switch t.Kind() {
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int64:
		return v.Int(), nil
	case reflect.Uint64:
		return int64(v.Uint()), nil
	case reflect.Slice:
		return append([]byte{}, v.Bytes()...), nil
	case reflect.Array:
		b := make([]byte, v.Len())
		reflect.Copy(reflect.ValueOf(b), v)
		return b, nil
	}
	return nil, fmt.Errorf("unsupported type %s", t)
}

// Decode sets the tagged fields of rec, a pointer to a record struct, from
// e's fields of the same names. Fields the entry lacks are left as they
// are (pointers nil); a value of the wrong type, or text its type does not
// accept, is an error naming the field.
func (e *Entry) Decode(rec any) error {
	v := reflect.ValueOf(rec)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("audit log: Decode needs a pointer to a record, not %T", rec)
	}
	v = v.Elem()
	p, err := planOf(v.Type())
	if err != nil {
		return err
	}
	byName := make(map[string]any, len(e.Fields))
	for _, f := range e.Fields {
		byName[f.Name] = f.Value
	}
	return p.decode(v, byName, "")
}

func (p *recordPlan) decode(v reflect.Value, byName map[string]any, prefix string) error {
	for _, f := range p.fields {
		name := prefix + f.name
		fv := v.FieldByIndex(f.index)
		if f.group != nil {
			sub := name + "_"
			if f.flatten {
				sub = prefix
			}
			if !f.group.present(byName, sub) {
				continue
			}
			if fv.Kind() == reflect.Pointer {
				fv.Set(reflect.New(fv.Type().Elem()))
				fv = fv.Elem()
			}
			if err := f.group.decode(fv, byName, sub); err != nil {
				return err
			}
			continue
		}
		val, ok := byName[name]
		if !ok {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			fv.Set(reflect.New(fv.Type().Elem()))
			fv = fv.Elem()
		}
		if err := decodeValue(fv, val); err != nil {
			return fmt.Errorf("audit log: field %s: %w", name, err)
		}
	}
	return nil
}

// present reports whether byName holds any of the plan's fields under
// prefix.
func (p *recordPlan) present(byName map[string]any, prefix string) bool {
	for _, f := range p.fields {
		switch {
		case f.group == nil:
			if _, ok := byName[prefix+f.name]; ok {
				return true
			}
		case f.flatten:
			if f.group.present(byName, prefix) {
				return true
			}
		default:
			if f.group.present(byName, prefix+f.name+"_") {
				return true
			}
		}
	}
	return false
}

func decodeValue(v reflect.Value, val any) error {
	t := v.Type()
	wrong := func() error { return fmt.Errorf("holds %T, want a value for %s", val, t) }
	switch {
	case t == timeType:
		s, ok := val.(string)
		if !ok {
			return wrong()
		}
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(tm))
		return nil
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		s, ok := val.(string)
		if !ok {
			return wrong()
		}
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return wrong()
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return wrong()
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := val.(int64)
		if !ok {
			return wrong()
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, ok := val.(int64)
		if !ok {
			return wrong()
		}
		v.SetUint(uint64(n))
	case reflect.Slice:
		b, ok := val.([]byte)
		if !ok {
			return wrong()
		}
		v.SetBytes(append([]byte{}, b...))
	case reflect.Array:
		b, ok := val.([]byte)
		if !ok || len(b) != v.Len() {
			return wrong()
		}
		reflect.Copy(v, reflect.ValueOf(b))
	default:
		return wrong()
	}
	return nil
}
