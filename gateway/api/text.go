package api

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckText refuses JSON text that is not valid UTF-8 or that escapes an
// unpaired UTF-16 surrogate (\ud800). Go's decoder would silently turn
// either into U+FFFD, so that the command that runs would differ from the
// one the agent sent; every decoder of a request (the HTTP API, the MCP
// tools) checks its raw bytes with it first.
func CheckText(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("the body is not valid UTF-8")
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(data):
			if data[i+1] != 'u' {
				i++ // a two-character escape, such as \" or \\
				continue
			}
			r, ok := hexRune(data, i+2)
			if !ok {
				return errors.New("invalid \\u escape")
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00:
				// A high surrogate must be followed by a low one.
				lo, ok := hexRune(data, i+8)
				if i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
					return errors.New("an escaped UTF-16 surrogate is unpaired")
				}
				i += 11
			case utf16.IsSurrogate(r):
				return errors.New("an escaped UTF-16 surrogate is unpaired")
			default:
				i += 5
			}
		}
	}
	return nil
}

// hexRune reads the 4 hex digits at data[i:].
func hexRune(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// ErrNotText is returned by Client.RunAction for a request whose target,
// account or command is not valid UTF-8. JSON carries text only: the
// encoder would replace the invalid bytes with U+FFFD and the gateway would
// run a command the caller did not write.
var ErrNotText = errors.New("not valid UTF-8; airlock carries commands as text (write such bytes with printf escapes inside the command)")

// checkText refuses fields that JSON cannot carry unaltered.
func (r ActionRequest) checkText() error {
	for _, f := range []struct{ name, v string }{{"target", r.Target}, {"account", r.Account}, {"command", r.Command}, {"reason", r.Reason}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("the %s is %w", f.name, ErrNotText)
		}
	}
	return nil
}
