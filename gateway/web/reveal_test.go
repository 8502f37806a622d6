package web

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// shown is what a reviewer reads of s: plain text as it is, every hidden
// character as its escape.
func shown(s string) string {
	var b strings.Builder
	for _, seg := range Reveal(s) {
		b.WriteString(seg.Text)
		if seg.Break {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestReveal(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "systemctl restart web", "systemctl restart web"},
		{"empty", "", ""},
		{"newline", "a\nb", `a\n` + "\n" + "b"},
		{"crlf", "a\r\nb", `a\r\n` + "\nb"},
		{"tab", "a\tb", `a\tb`},
		{"nul", "a\x00b", `a\x00b`},
		{"escape", "\x1b[31mred", `\x1b[31mred`},
		{"csi", "\u009b1m", "⟨U+009B⟩1m"},
		{"delete", "a\x7f", `a\x7f`},
		{"rlo", "a\u202eb", "a⟨U+202E⟩b"},
		{"isolates", "\u2066\u2067\u2068\u2069", "⟨U+2066⟩⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩"},
		{"marks", "\u200e\u200f\u061c", "⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩"},
		{"zero width", "a\u200bb\u200cc\u200dd\u2060e\ufefff\u00adg", "a⟨U+200B⟩b⟨U+200C⟩c⟨U+200D⟩d⟨U+2060⟩e⟨U+FEFF⟩f⟨U+00AD⟩g"},
		{"tag", "x\U000E0041", "x⟨U+E0041⟩"},
		{"nbsp", "a\u00a0b", "a⟨U+00A0⟩b"},
		{"ideographic space", "a\u3000b", "a⟨U+3000⟩b"},
		{"line separator", "a\u2028b", "a⟨U+2028⟩\nb"},
		{"invalid", "a\xffb\xc0", `a\xffb\xc0`},
		{"truncated rune", "a\xe2\x80", `a\xe2\x80`},
		{"surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"private use", "\ue000", "⟨U+E000⟩"},
		{"noncharacter", "\ufdd0", "⟨U+FDD0⟩"},
		{"cyrillic kept", "/home/\u0430lice", "/home/\u0430lice"},
		{"emoji kept", "echo 🚀", "echo 🚀"},
		{"accents kept", "café naïve", "café naïve"},
		{"literal backslash kept", `echo \x1b`, `echo \x1b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shown(tc.in); got != tc.want {
				t.Errorf("Reveal(%q) shows %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRevealSegmentsAndNames(t *testing.T) {
	got := Reveal("ok\u202e\x1b\xff\u0430")
	want := []Segment{
		{Text: "ok"},
		{Text: "⟨U+202E⟩", Kind: Bidi, Name: "U+202E RIGHT-TO-LEFT OVERRIDE"},
		{Text: `\x1b`, Kind: ANSI, Name: "U+001B ESCAPE"},
		{Text: `\xff`, Kind: Invalid, Name: "byte 0xFF: not valid UTF-8"},
		{Text: "\u0430", Kind: NonASCII, Name: "U+0430"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reveal (-want +got):\n%s", diff)
	}
}

func TestFlags(t *testing.T) {
	got := Flags("echo \u202ea\u202c\x1b[0m\nb\u200b", "/home/\u0430\u0435")
	want := []Flag{
		{Kind: Bidi, Count: 2, Examples: []string{"⟨U+202E⟩", "⟨U+202C⟩"}},
		{Kind: ANSI, Count: 1, Examples: []string{`\x1b`}},
		{Kind: ZeroWidth, Count: 1, Examples: []string{"⟨U+200B⟩"}},
		{Kind: Newline, Count: 1, Examples: []string{`\n`}},
		{Kind: NonASCII, Count: 2, Examples: []string{"\u0430 U+0430"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Flags (-want +got):\n%s", diff)
	}
	if f := Flags("ls -la /tmp", "python3", "/home/dev"); f != nil {
		t.Errorf("plain text flagged: %+v", f)
	}
}

// TestEveryHiddenCharacterIsEscaped walks the code points an attacker can
// use to hide or move text and checks that none reaches the page raw.
func TestEveryHiddenCharacterIsEscaped(t *testing.T) {
	var ranges = [][2]rune{{0, 0x1f}, {0x7f, 0x9f}, {0x202a, 0x202e}, {0x2066, 0x2069}, {0x200b, 0x200f}, {0x2060, 0x2064},
		{0x2000, 0x200a}, {0xfe00, 0xfe0f}, {0xe0000, 0xe007f}, {0xe0100, 0xe01ef}}
	singles := []rune{0xa0, 0xad, 0x34f, 0x61c, 0x115f, 0x1160, 0x1680, 0x180e, 0x2028, 0x2029, 0x202f, 0x205f, 0x2800, 0x3000, 0x3164, 0xfeff, 0xffa0}
	check := func(r rune) {
		segs := Reveal(string(r))
		if len(segs) != 1 || !segs[0].Escaped() {
			t.Errorf("%U is shown as %+v, not escaped", r, segs)
		}
	}
	for _, rg := range ranges {
		for r := rg[0]; r <= rg[1]; r++ {
			check(r)
		}
	}
	for _, r := range singles {
		check(r)
	}
}

func FuzzReveal(f *testing.F) {
	for _, h := range hostileCorpus() {
		if len(h.command) < 4096 {
			f.Add(h.command)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs := Reveal(s)
		var orig strings.Builder
		for _, seg := range segs {
			switch {
			case seg.Kind == Visible:
				for _, r := range seg.Text {
					if r < 0x20 || r > 0x7e {
						t.Fatalf("visible segment holds %U", r)
					}
				}
				if !utf8.ValidString(seg.Text) {
					t.Fatalf("visible segment %q is not valid UTF-8", seg.Text)
				}
				orig.WriteString(seg.Text)
			case seg.Kind == NonASCII:
				orig.WriteString(seg.Text)
			default:
				for _, r := range seg.Text {
					if r < 0x20 || r > 0x7e && r != '⟨' && r != '⟩' {
						t.Fatalf("escape %q holds %U", seg.Text, r)
					}
				}
			}
		}
		// With nothing hidden, the text comes back whole: nothing is cut.
		if Flags(s) == nil && orig.String() != s {
			t.Fatalf("Reveal(%q) lost text: %q", s, orig.String())
		}
	})
}

// Output and notes keep their ordinary line breaks unmarked; a lone CR
// and hidden characters are still marked.
func TestRevealTextKeepsOrdinaryLines(t *testing.T) {
	for _, c := range []struct {
		in      string
		escaped []string
	}{
		{"one\ntwo\r\nthree\n", nil},
		{"progress 10%\rprogress 99%\n", []string{`\r`}},
		{"\n\n", nil},
		{"ok\u202e\n", []string{"⟨U+202E⟩"}},
	} {
		segs := RevealText(c.in)
		var got strings.Builder
		var escaped []string
		for _, s := range segs {
			if s.Escaped() {
				escaped = append(escaped, s.Text)
			} else {
				got.WriteString(s.Text)
			}
		}
		if len(escaped) == 0 && got.String() != c.in {
			t.Errorf("%q: shown as %q", c.in, got.String())
		}
		if strings.Join(escaped, ",") != strings.Join(c.escaped, ",") {
			t.Errorf("%q: marked %q, want %q", c.in, escaped, c.escaped)
		}
	}
}
