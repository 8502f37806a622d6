package auditchain

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MarshalJSON renders a record as one line of the export (JSON Lines):
//
//	{"seq":0,"time":"…","kind":"action.requested","action_id":"…","run_id":"…",
//	 "fields":{"name":value,…},"leaf":"<base64>","leaf_hash":"<base64>","chain_hash":"<base64>"}
//
// The line is ASCII: every character outside it is a \uXXXX escape, so
// that bidi controls and look-alikes never reach a terminal raw; a JSON
// parser reads the same strings. Field values: strings as JSON strings
// (invalid UTF-8 is replaced by U+FFFD, so such a string does not
// round-trip), int64 as numbers, bools,
// bytes as hex strings. Fields appear sorted by name, as in the leaf. The
// JSON is for people and tools; leaf holds the exact bytes that are hashed,
// from which everything else can be re-derived and checked.
func (r Record) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(nil)
}

// AppendJSON appends the export line of r (without a newline) to b.
func (r Record) AppendJSON(b []byte) ([]byte, error) {
	if !r.Kind.Valid() {
		return b, fmt.Errorf("audit log: export entry %d: invalid kind %d", r.Seq, uint8(r.Kind))
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"time":"`...)
	b = r.Time.UTC().AppendFormat(b, jsonTime)
	b = append(b, `","kind":"`...)
	b = append(b, kindNames[r.Kind]...)
	b = append(b, '"')
	if r.ActionID != "" {
		b = append(b, `,"action_id":`...)
		b = appendJSONString(b, r.ActionID)
	}
	if r.RunID != "" {
		b = append(b, `,"run_id":`...)
		b = appendJSONString(b, r.RunID)
	}
	b = append(b, `,"fields":{`...)
	for i, f := range r.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f.Name)
		b = append(b, ':')
		switch v := f.Value.(type) {
		case string:
			b = appendJSONString(b, v)
		case []byte:
			b = append(b, '"')
			b = hex.AppendEncode(b, v)
			b = append(b, '"')
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case bool:
			b = strconv.AppendBool(b, v)
		default:
			return b, fmt.Errorf("audit log: export entry %d: field %q has type %T", r.Seq, f.Name, f.Value)
		}
	}
	b = append(b, `},"leaf":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.Leaf)
	// The tree's hashes in standard base64, as checkpoints and proofs
	// write them: one encoding to compare them in.
	b = append(b, `","leaf_hash":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.LeafHash[:])
	b = append(b, `","chain_hash":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.Chain[:])
	b = append(b, `"}`...)
	return b, nil
}

// appendJSONString appends s as a JSON string (RFC 8259 §7) in ASCII:
// quotes, backslashes, control characters and every character outside
// ASCII escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:]) // invalid: U+FFFD
		// Every rune outside ASCII as \uXXXX (a surrogate pair above
		// U+FFFF): what a JSON parser reads is the same string, and bidi
		// controls, format characters and look-alikes never reach a
		// terminal raw, as audit show escapes them.
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			b = appendU(appendU(b, r1), r2)
		} else {
			b = appendU(b, r)
		}
		i += size
	}
	return append(b, '"')
}

// appendU appends the JSON escape \uXXXX of the UTF-16 code unit r.
func appendU(b []byte, r rune) []byte {
	const hexDigits = "0123456789abcdef"
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
