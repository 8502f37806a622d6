package web

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hidden is the class of a character that must not reach a reviewer's
// screen as it is: it would be invisible, would move or overwrite other
// text, or would look like something it is not.
type Hidden uint8

// The classes of hidden characters, in the order the card lists them.
const (
	// Visible is ordinary text, shown as it is.
	Visible Hidden = iota
	// Bidi is a bidirectional control (U+202A–U+202E, U+2066–U+2069,
	// U+200E, U+200F, U+061C): it reorders what follows (Trojan Source,
	// CVE-2021-42574).
	Bidi
	// ANSI is a terminal escape introducer (ESC, CSI U+009B): in a
	// terminal it can recolour, move the cursor or erase text.
	ANSI
	// ZeroWidth is an invisible format character: zero-width spaces and
	// joiners, word joiners, the BOM, soft hyphens, Unicode tags (which
	// can smuggle ASCII), variation selectors and invisible fillers.
	ZeroWidth
	// Space is a space other than U+0020 (no-break, em, ideographic, …)
	// that looks like one but is another character to a shell.
	Space
	// Newline is a line break: LF, CR, NEL, U+2028, U+2029.
	Newline
	// Control is any other control character, tab included.
	Control
	// Invalid is a byte that is not part of valid UTF-8.
	Invalid
	// Unassigned is a private-use, unassigned or non-character code point:
	// nobody can say what it looks like.
	Unassigned
	// NonASCII is a printable character outside ASCII: shown as it is but
	// marked, because it may be a look-alike of an ASCII letter (a
	// Cyrillic "а" in a path).
	NonASCII
)

var hiddenInfo = [...]struct{ class, label string }{
	Visible:    {"", ""},
	Bidi:       {"bidi", "bidirectional control characters (they reorder the text after them)"},
	ANSI:       {"ansi", "terminal escape sequences"},
	ZeroWidth:  {"zw", "invisible (zero-width or format) characters"},
	Space:      {"space", "look-alike spaces (not U+0020)"},
	Newline:    {"nl", "line breaks"},
	Control:    {"ctl", "control characters"},
	Invalid:    {"bad", "bytes that are not valid UTF-8"},
	Unassigned: {"unk", "unassigned or private-use code points"},
	NonASCII:   {"na", "non-ASCII characters (check for look-alike letters)"},
}

// Class is the CSS class of the marker ("" for Visible).
func (h Hidden) Class() string {
	if int(h) < len(hiddenInfo) {
		return hiddenInfo[h].class
	}
	return "unk"
}

// Label describes the class for the card's warning.
func (h Hidden) Label() string {
	if int(h) < len(hiddenInfo) {
		return hiddenInfo[h].label
	}
	return "unknown characters"
}

// Segment is a piece of text as shown to a reviewer. A Visible segment is
// shown as it is; any other segment stands for one character or byte (or,
// for NonASCII, a run of printable non-ASCII characters) and Text is its
// visible escape, such as `\x1b` or `⟨U+202E⟩`.
type Segment struct {
	Text string
	Kind Hidden
	// Name describes the character (for a title attribute), e.g.
	// "U+202E RIGHT-TO-LEFT OVERRIDE".
	Name string
	// Break is set after a line break's escape, so the text still shows
	// its lines.
	Break bool
}

// Escaped reports whether the segment replaces a character by an escape.
func (s Segment) Escaped() bool { return s.Kind != Visible && s.Kind != NonASCII }

// Class is the segment's CSS class.
func (s Segment) Class() string { return s.Kind.Class() }

// Reveal splits s into segments such that nothing in it can hide, move
// other text, or look like something it is not once rendered: every
// control, bidirectional, zero-width, format, look-alike space, unassigned
// or invalid character becomes a visible escape segment; everything else is
// kept in order. Joining the segments' Text of an input without hidden
// characters gives the input back.
func Reveal(s string) []Segment {
	var out []Segment
	var plain strings.Builder
	flush := func() {
		if plain.Len() > 0 {
			out = append(out, Segment{Text: plain.String()})
			plain.Reset()
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			flush()
			out = append(out, Segment{Text: fmt.Sprintf(`\x%02x`, s[i]), Kind: Invalid,
				Name: fmt.Sprintf("byte 0x%02X: not valid UTF-8", s[i])})
			i++
			continue
		}
		i += size
		k := classify(r)
		switch k {
		case Visible:
			plain.WriteRune(r)
		case NonASCII:
			flush()
			if n := len(out); n > 0 && out[n-1].Kind == NonASCII {
				out[n-1].Text += string(r)
				out[n-1].Name += ", " + codePoint(r)
			} else {
				out = append(out, Segment{Text: string(r), Kind: NonASCII, Name: codePoint(r)})
			}
		default:
			flush()
			// A line break shows as its escape and then breaks the line,
			// once for CR LF.
			brk := k == Newline && !(r == '\r' && i < len(s) && s[i] == '\n')
			out = append(out, Segment{Text: escape(r), Kind: k, Name: describe(r), Break: brk})
		}
	}
	flush()
	return out
}

// RevealText is Reveal for text whose lines are ordinary — an action's
// output, a checkpoint note: a line feed (or CR LF) is kept as a plain line
// break, not marked, so that a marker still means something. A lone CR,
// which can overwrite a line on a terminal, and every other line
// separator are marked as Reveal marks them.
func RevealText(s string) []Segment {
	var out []Segment
	for len(s) > 0 {
		line, rest, found := strings.Cut(s, "\n")
		crlf := found && strings.HasSuffix(line, "\r")
		if crlf {
			line = line[:len(line)-1]
		}
		out = append(out, Reveal(line)...)
		if found {
			brk := "\n"
			if crlf {
				brk = "\r\n"
			}
			if n := len(out); n > 0 && out[n-1].Kind == Visible {
				out[n-1].Text += brk
			} else {
				out = append(out, Segment{Text: brk})
			}
		}
		s = rest
	}
	return out
}

// classify says how a valid rune is shown.
func classify(r rune) Hidden {
	switch {
	case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
		return Newline
	case r == 0x1b || r == 0x9b:
		return ANSI
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return Control
	case r == ' ':
		return Visible
	case r < 0x7f:
		return Visible
	case isBidi(r):
		return Bidi
	case unicode.Is(unicode.Zs, r):
		return Space
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Variation_Selector, r),
		r == 0x034f,                                        // combining grapheme joiner
		r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, // Hangul fillers: invisible letters
		r == 0x2800, // braille pattern blank
		r == 0x180e: // Mongolian vowel separator
		return ZeroWidth
	case unicode.Is(unicode.Co, r), unicode.Is(unicode.Noncharacter_Code_Point, r), !unicode.IsGraphic(r):
		return Unassigned
	}
	return NonASCII
}

func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

func escape(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return "⟨" + codePoint(r) + "⟩"
}

func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// names of the characters a reviewer is most likely to meet in an attack.
var names = map[rune]string{
	0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x09: "CHARACTER TABULATION", 0x0a: "LINE FEED",
	0x0b: "LINE TABULATION", 0x0c: "FORM FEED", 0x0d: "CARRIAGE RETURN", 0x1b: "ESCAPE", 0x7f: "DELETE",
	0x85: "NEXT LINE", 0x9b: "CONTROL SEQUENCE INTRODUCER",
	0xa0: "NO-BREAK SPACE", 0xad: "SOFT HYPHEN", 0x034f: "COMBINING GRAPHEME JOINER", 0x061c: "ARABIC LETTER MARK",
	0x115f: "HANGUL CHOSEONG FILLER", 0x1160: "HANGUL JUNGSEONG FILLER", 0x1680: "OGHAM SPACE MARK",
	0x180e: "MONGOLIAN VOWEL SEPARATOR",
	0x2000: "EN QUAD", 0x2001: "EM QUAD", 0x2002: "EN SPACE", 0x2003: "EM SPACE", 0x2004: "THREE-PER-EM SPACE",
	0x2005: "FOUR-PER-EM SPACE", 0x2006: "SIX-PER-EM SPACE", 0x2007: "FIGURE SPACE", 0x2008: "PUNCTUATION SPACE",
	0x2009: "THIN SPACE", 0x200a: "HAIR SPACE", 0x200b: "ZERO WIDTH SPACE", 0x200c: "ZERO WIDTH NON-JOINER",
	0x200d: "ZERO WIDTH JOINER", 0x200e: "LEFT-TO-RIGHT MARK", 0x200f: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
	0x202a: "LEFT-TO-RIGHT EMBEDDING", 0x202b: "RIGHT-TO-LEFT EMBEDDING", 0x202c: "POP DIRECTIONAL FORMATTING",
	0x202d: "LEFT-TO-RIGHT OVERRIDE", 0x202e: "RIGHT-TO-LEFT OVERRIDE", 0x202f: "NARROW NO-BREAK SPACE",
	0x205f: "MEDIUM MATHEMATICAL SPACE", 0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION",
	0x2062: "INVISIBLE TIMES", 0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE", 0x2800: "BRAILLE PATTERN BLANK", 0x3000: "IDEOGRAPHIC SPACE",
	0x3164: "HANGUL FILLER", 0xfeff: "ZERO WIDTH NO-BREAK SPACE (BOM)", 0xffa0: "HALFWIDTH HANGUL FILLER",
}

func describe(r rune) string {
	if n, ok := names[r]; ok {
		return codePoint(r) + " " + n
	}
	switch {
	case r >= 0xe0000 && r <= 0xe007f:
		return codePoint(r) + " TAG character (invisible; can carry hidden ASCII)"
	case unicode.Is(unicode.Variation_Selector, r):
		return codePoint(r) + " VARIATION SELECTOR"
	case r < 0x20 || (r >= 0x80 && r <= 0x9f):
		return codePoint(r) + " control character"
	}
	return codePoint(r)
}

// Flag is one class of hidden characters found in a text, for the card's
// warning.
type Flag struct {
	Kind  Hidden
	Count int
	// Examples are up to four distinct escapes of this class, as shown.
	Examples []string
}

// Label describes the flag's class.
func (f Flag) Label() string { return f.Kind.Label() }

// Class is the flag's CSS class.
func (f Flag) Class() string { return f.Kind.Class() }

// Flags counts the hidden characters of every class in the texts, in the
// order of the Hidden constants. Newlines are flagged too: a line break in
// a command runs a second command.
func Flags(texts ...string) []Flag {
	var counts [len(hiddenInfo)]int
	var examples [len(hiddenInfo)][]string
	for _, t := range texts {
		for _, seg := range Reveal(t) {
			if seg.Kind == Visible {
				continue
			}
			n := 1
			if seg.Kind == NonASCII {
				n = utf8.RuneCountInString(seg.Text)
			}
			counts[seg.Kind] += n
			ex := seg.Text
			if seg.Kind == NonASCII {
				r, _ := utf8.DecodeRuneInString(seg.Text)
				ex = string(r) + " " + codePoint(r)
			}
			if len(examples[seg.Kind]) < 4 && !contains(examples[seg.Kind], ex) {
				examples[seg.Kind] = append(examples[seg.Kind], ex)
			}
		}
	}
	var out []Flag
	for k := range counts {
		if counts[k] > 0 {
			out = append(out, Flag{Kind: Hidden(k), Count: counts[k], Examples: examples[k]})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
