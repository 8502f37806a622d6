package auditchain

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Limits on what one entry may hold. They keep a leaf well under SQLite's
// blob limit and bound what a verifier must hold in memory for one row.
const (
	MaxIDLen     = 256     // bytes of an action or run id
	MaxFieldName = 64      // bytes of a field name
	MaxFields    = 256     // fields per entry
	MaxValueLen  = 1 << 20 // bytes of one string or bytes value
	MaxLeafLen   = 4 << 20 // bytes of a whole encoded leaf
	leafVersion1 = 1
)

// Value type tags in a version 1 leaf. Persisted: never renumber.
const (
	tagString byte = 1
	tagInt    byte = 2
	tagBool   byte = 3
	tagBytes  byte = 4
)

// An Entry is one audit record.
//
// Seq and Time are assigned by the log when it appends the entry; values
// set by the caller are ignored by Append.
type Entry struct {
	Seq      int64
	Time     time.Time
	Kind     Kind
	ActionID string
	RunID    string
	// Fields are the kind's facts. Names are unique, 1–64 bytes of
	// [a-z0-9_.]; the leaf stores them sorted by name, so the order given
	// here does not matter. Values are string, int64, bool or []byte
	// (see Str, Int, Bool, Bytes). Strings are stored byte for byte: no
	// Unicode normalisation, invalid UTF-8 kept as it is.
	Fields []Field
}

// A Field is one named value of an entry.
type Field struct {
	Name  string
	Value any // string, int64, bool or []byte
}

// Str returns a string field.
func Str(name, v string) Field { return Field{Name: name, Value: v} }

// Int returns an int64 field.
func Int(name string, v int64) Field { return Field{Name: name, Value: v} }

// Bool returns a bool field.
func Bool(name string, v bool) Field { return Field{Name: name, Value: v} }

// Bytes returns a bytes field (digests, raw identifiers).
func Bytes(name string, v []byte) Field { return Field{Name: name, Value: v} }

// Field returns the value of the named field and whether it exists.
func (e *Entry) Field(name string) (any, bool) {
	for _, f := range e.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

func validFieldName[T string | []byte](s T) bool {
	if len(s) == 0 || len(s) > MaxFieldName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("audit log: %s: %w", fmt.Sprintf(format, args...), ErrInvalidEntry)
}

// normalize checks e against the encoding rules and returns its fields
// sorted by name (a copy; the caller's slice is untouched).
func (e *Entry) normalize() ([]Field, error) {
	if !e.Kind.Valid() {
		return nil, invalid("invalid kind %d", uint8(e.Kind))
	}
	if len(e.ActionID) > MaxIDLen || len(e.RunID) > MaxIDLen {
		return nil, invalid("action or run id longer than %d bytes", MaxIDLen)
	}
	if len(e.Fields) > MaxFields {
		return nil, invalid("%d fields, limit %d", len(e.Fields), MaxFields)
	}
	fs := slices.Clone(e.Fields)
	slices.SortFunc(fs, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range fs {
		if !validFieldName(f.Name) {
			return nil, invalid("field name %q: want 1-%d bytes of [a-z0-9_.]", f.Name, MaxFieldName)
		}
		if i > 0 && fs[i-1].Name == f.Name {
			return nil, invalid("duplicate field %q", f.Name)
		}
		switch v := f.Value.(type) {
		case string:
			if len(v) > MaxValueLen {
				return nil, invalid("field %q longer than %d bytes", f.Name, MaxValueLen)
			}
		case []byte:
			if len(v) > MaxValueLen {
				return nil, invalid("field %q longer than %d bytes", f.Name, MaxValueLen)
			}
		case int64, bool:
		default:
			return nil, invalid("field %q has unsupported type %T", f.Name, f.Value)
		}
	}
	return fs, nil
}

// EncodeLeaf returns the version 1 leaf of e: the exact bytes that are
// stored, chained and hashed. The layout (all integers big-endian) is
//
//	u8   version = 1
//	u64  seq
//	i64  time, Unix nanoseconds
//	u8   len, kind name
//	u16  len, action id
//	u16  len, run id
//	u16  field count
//	per field, sorted by name (strictly increasing bytes):
//	  u8 len, name
//	  u8 tag: 1 string | 2 int64 | 3 bool | 4 bytes
//	  string, bytes: u32 len, value
//	  int64: 8 bytes; bool: 1 byte, 0 or 1
//
// Every variable-length item carries its length, so no two different
// entries share a leaf and DecodeLeaf(EncodeLeaf(e)) == e.
func EncodeLeaf(e Entry) ([]byte, error) {
	fs, err := e.normalize()
	if err != nil {
		return nil, err
	}
	if e.Seq < 0 {
		return nil, invalid("negative seq %d", e.Seq)
	}
	return appendLeaf(nil, e, fs)
}

// appendLeaf encodes e with fields already normalized.
func appendLeaf(b []byte, e Entry, fs []Field) ([]byte, error) {
	b = append(b, leafVersion1)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time.UnixNano()))
	name := kindNames[e.Kind]
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.ActionID)))
	b = append(b, e.ActionID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.RunID)))
	b = append(b, e.RunID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fs)))
	for _, f := range fs {
		b = append(b, byte(len(f.Name)))
		b = append(b, f.Name...)
		switch v := f.Value.(type) {
		case string:
			b = append(b, tagString)
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		case []byte:
			b = append(b, tagBytes)
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		case int64:
			b = append(b, tagInt)
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		case bool:
			b = append(b, tagBool)
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	}
	if len(b) > MaxLeafLen {
		return nil, invalid("leaf of %d bytes exceeds %d", len(b), MaxLeafLen)
	}
	return b, nil
}

// leafReader consumes a leaf and remembers the first error.
type leafReader struct {
	b   []byte
	err error
}

func (r *leafReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("audit log: leaf: %s: %w", what, ErrMalformedLeaf)
	}
}

func (r *leafReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated " + what)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *leafReader) u8(what string) byte {
	if v := r.take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (r *leafReader) u16(what string) int {
	if v := r.take(2, what); v != nil {
		return int(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *leafReader) u32(what string) int {
	if v := r.take(4, what); v != nil {
		n := binary.BigEndian.Uint32(v)
		if n > MaxValueLen {
			r.fail(what + " too long")
			return 0
		}
		return int(n)
	}
	return 0
}

func (r *leafReader) u64(what string) uint64 {
	if v := r.take(8, what); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// DecodeLeaf parses a version 1 leaf. It accepts exactly the bytes
// EncodeLeaf produces: any other input (unknown version or kind, unsorted
// or duplicate fields, a bool other than 0 or 1, trailing bytes) is an
// error wrapping ErrMalformedLeaf. Time is returned in UTC.
func DecodeLeaf(leaf []byte) (Entry, error) {
	var fields []Field
	h, err := walkLeaf(leaf, func(name []byte, tag byte, val []byte) {
		f := Field{Name: string(name)}
		switch tag {
		case tagString:
			f.Value = string(val)
		case tagBytes:
			f.Value = bytes.Clone(val)
		case tagInt:
			f.Value = int64(binary.BigEndian.Uint64(val))
		case tagBool:
			f.Value = val[0] == 1
		}
		fields = append(fields, f)
	})
	if err != nil {
		return Entry{}, err
	}
	return Entry{
		Seq:      h.seq,
		Time:     time.Unix(0, h.timeNs).UTC(),
		Kind:     h.kind,
		ActionID: string(h.action),
		RunID:    string(h.run),
		Fields:   fields,
	}, nil
}

// leafHeader is the fixed part of a leaf, viewed in place.
type leafHeader struct {
	seq, timeNs int64
	kind        Kind
	action, run []byte
}

// walkLeaf checks a whole leaf without allocating and calls visit (when
// not nil) for each field with its raw value: the payload of a string or
// bytes value, 8 bytes of an int, 1 byte (0 or 1) of a bool.
func walkLeaf(leaf []byte, visit func(name []byte, tag byte, val []byte)) (leafHeader, error) {
	var h leafHeader
	if len(leaf) > MaxLeafLen {
		return h, fmt.Errorf("audit log: leaf of %d bytes: %w", len(leaf), ErrMalformedLeaf)
	}
	r := &leafReader{b: leaf}
	if v := r.u8("version"); r.err == nil && v != leafVersion1 {
		return h, fmt.Errorf("audit log: leaf version %d: %w", v, ErrMalformedLeaf)
	}
	seq := r.u64("seq")
	if seq > math.MaxInt64 {
		r.fail("seq out of range")
	}
	h.seq = int64(seq)
	h.timeNs = int64(r.u64("time"))
	kname := r.take(int(r.u8("kind length")), "kind")
	if r.err == nil {
		h.kind = kindOf(kname)
		if !h.kind.Valid() {
			r.fail(fmt.Sprintf("unknown kind %q", kname))
		}
	}
	h.action = r.take(r.u16("action id length"), "action id")
	h.run = r.take(r.u16("run id length"), "run id")
	if len(h.action) > MaxIDLen || len(h.run) > MaxIDLen {
		r.fail("id too long")
	}
	n := r.u16("field count")
	if n > MaxFields {
		r.fail("too many fields")
	}
	var prev []byte
	for i := 0; i < n && r.err == nil; i++ {
		name := r.take(int(r.u8("field name length")), "field name")
		if r.err != nil {
			break
		}
		if !validFieldName(name) {
			r.fail(fmt.Sprintf("field name %q", name))
			break
		}
		if i > 0 && bytes.Compare(prev, name) >= 0 {
			r.fail("fields not strictly sorted")
			break
		}
		prev = name
		var val []byte
		tag := r.u8("value tag")
		switch tag {
		case tagString, tagBytes:
			val = r.take(r.u32("value length"), "value")
		case tagInt:
			val = r.take(8, "int")
		case tagBool:
			val = r.take(1, "bool")
			if val != nil && val[0] > 1 {
				r.fail("bool not 0 or 1")
			}
		default:
			r.fail(fmt.Sprintf("value tag %d", tag))
		}
		if r.err == nil && visit != nil {
			visit(name, tag, val)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	if r.err != nil {
		return leafHeader{}, r.err
	}
	return h, nil
}

// kindOf returns the kind named b, or the invalid kind.
func kindOf(b []byte) Kind {
	for k := kindInvalid + 1; k < kindEnd; k++ {
		if kindNames[k] == string(b) {
			return k
		}
	}
	return kindInvalid
}
