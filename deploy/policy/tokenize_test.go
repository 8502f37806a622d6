package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name    string
		command string
		want    []string
	}{
		{"one word", "status", []string{"status"}},
		{"words", "restart web", []string{"restart", "web"}},
		{"runs of blanks", "  restart \t web  ", []string{"restart", "web"}},
		{"single quotes keep spaces", "echo 'a b'", []string{"echo", "a b"}},
		{"single quotes keep metacharacters", `echo '$HOME; rm -rf / | x && y > z \ "'`, []string{"echo", `$HOME; rm -rf / | x && y > z \ "`}},
		{"double quotes", `echo "a 'b' c"`, []string{"echo", "a 'b' c"}},
		{"double quote escapes", `echo "a\"b\\c"`, []string{"echo", `a"b\c`}},
		{"empty single quotes", "echo ''", []string{"echo", ""}},
		{"empty double quotes", `echo ""`, []string{"echo", ""}},
		{"concatenation", `a'b c'"d"e`, []string{`ab cde`}},
		{"plain punctuation", "deploy v1.2.3 --flag=x,y:z@h+%^", []string{"deploy", "v1.2.3", "--flag=x,y:z@h+%^"}},
		{"utf-8 letters", "echo héllo 日本", []string{"echo", "héllo", "日本"}},
		{"metacharacters in single quotes inside double", `echo "it's; ok"`, []string{"echo", "it's; ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tokenize(tt.command)
			if err != nil {
				t.Fatalf("Tokenize(%q): %v", tt.command, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tokenize(%q) (-want +got):\n%s", tt.command, diff)
			}
		})
	}
}

func TestTokenizeRefuses(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		want       error
		wantOffset int
	}{
		{"empty", "", ErrEmpty, 0},
		{"blanks only", " \t ", ErrEmpty, 0},
		{"semicolon", "status; rm -rf /", ErrMetachar, 6},
		{"pipe", "status | sh", ErrMetachar, 7},
		{"and", "status && sh", ErrMetachar, 7},
		{"background", "status &", ErrMetachar, 7},
		{"redirect out", "status > /etc/passwd", ErrMetachar, 7},
		{"redirect in", "status < /etc/shadow", ErrMetachar, 7},
		{"command substitution", "echo $(id)", ErrMetachar, 5},
		{"variable", "echo $HOME", ErrMetachar, 5},
		{"backticks", "echo `id`", ErrMetachar, 5},
		{"subshell", "(id)", ErrMetachar, 0},
		{"glob star", "ls *", ErrMetachar, 3},
		{"glob question", "ls ?", ErrMetachar, 3},
		{"glob class", "ls [a]", ErrMetachar, 3},
		{"brace expansion", "echo {a,b}", ErrMetachar, 5},
		{"tilde", "ls ~root", ErrMetachar, 3},
		{"comment", "status #x", ErrMetachar, 7},
		{"history", "echo !!", ErrMetachar, 5},
		{"backslash outside quotes", `echo a\ b`, ErrMetachar, 6},
		{"dollar in double quotes", `echo "$HOME"`, ErrMetachar, 6},
		{"backtick in double quotes", "echo \"`id`\"", ErrMetachar, 6},
		{"other escape in double quotes", `echo "a\nb"`, ErrBadEscape, 7},
		{"escape at end of double quotes", `echo "a\`, ErrBadEscape, 7},
		{"newline", "status\nid", ErrControl, 6},
		{"newline in quotes", "echo 'a\nb'", ErrControl, 7},
		{"carriage return", "status\r", ErrControl, 6},
		{"NUL", "status\x00id", ErrControl, 6},
		{"NUL in quotes", "echo 'a\x00'", ErrControl, 7},
		{"escape character", "echo \x1b[31m", ErrControl, 5},
		{"DEL", "echo \x7f", ErrControl, 5},
		{"C1 control", "echo \u0085", ErrControl, 5},
		{"tab in quotes", "echo 'a\tb'", ErrControl, 7},
		{"bidi override", "echo \u202egnp.exe", ErrControl, 5},
		{"zero-width space", "echo a\u200bb", ErrControl, 6},
		{"line separator", "echo a\u2028b", ErrControl, 6},
		{"invalid UTF-8", "echo \xff", ErrInvalidUTF8, 5},
		{"truncated UTF-8", "echo \xe6\x97", ErrInvalidUTF8, 5},
		{"encoded surrogate", "echo \xed\xa0\x80", ErrInvalidUTF8, 5},
		{"unterminated single", "echo 'abc", ErrUnterminated, 5},
		{"unterminated double", `echo "abc`, ErrUnterminated, 5},
		{"too long", "echo " + strings.Repeat("a", MaxCommandBytes), ErrTooLong, MaxCommandBytes},
		{"too many words", strings.Repeat("a ", MaxWords+1), ErrTooManyWords, 2*MaxWords + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tokenize(tt.command)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Tokenize(%q) = %q, %v; want error %v", tt.command, got, err, tt.want)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SyntaxError", err)
			}
			if se.Offset != tt.wantOffset {
				t.Errorf("offset = %d, want %d", se.Offset, tt.wantOffset)
			}
		})
	}
}

func TestTokenizeLimitsAreInclusive(t *testing.T) {
	long := "echo " + strings.Repeat("a", MaxCommandBytes-5)
	if _, err := Tokenize(long); err != nil {
		t.Errorf("command of exactly %d bytes: %v", len(long), err)
	}
	many := strings.TrimSpace(strings.Repeat("a ", MaxWords))
	if got, err := Tokenize(many); err != nil || len(got) != MaxWords {
		t.Errorf("%d words: got %d, %v", MaxWords, len(got), err)
	}
}

func TestQuoteRoundTrips(t *testing.T) {
	words := []string{"web", "", "a b", "it's", `a"b\c`, "$HOME; rm -rf /", "it's $5", "*", "--flag=x", "日本"}
	for _, w := range words {
		q := Quote(w)
		got, err := Tokenize("verb " + q)
		if err != nil {
			t.Errorf("Tokenize(Quote(%q) = %s): %v", w, q, err)
			continue
		}
		if diff := cmp.Diff([]string{"verb", w}, got); diff != "" {
			t.Errorf("round trip of %q via %s (-want +got):\n%s", w, q, diff)
		}
	}
	// Words Tokenize can never return are still quoted on one line.
	for _, w := range []string{"a\nb", "\x00", "\xff", "\u202e"} {
		if q := Quote(w); strings.ContainsAny(q, "\n\x00") || !strings.HasPrefix(q, `"`) {
			t.Errorf("Quote(%q) = %q, want a Go-quoted ASCII string", w, q)
		}
	}
}

// FuzzTokenize checks Tokenize's promises on any input: it never panics,
// every word it returns is free of forbidden characters, and quoting the
// words again gives the same words back.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"restart web", "echo 'a b'", `echo "a\"b"`, "a'b'c", "x; y", "$(id)", "`id`",
		"a\nb", "a\x00b", "\xff", "''", `""`, "echo 'unterminated", "a\u202eb", "-- --help",
		"../../etc/passwd", "*", strings.Repeat("a", MaxCommandBytes+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		words, err := Tokenize(command)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SyntaxError", err)
			}
			return
		}
		if len(words) == 0 || len(words) > MaxWords || len(command) > MaxCommandBytes {
			t.Fatalf("accepted %q as %d words", command, len(words))
		}
		var requoted []string
		for _, w := range words {
			if !safeText(w) {
				t.Fatalf("word %q of %q holds a forbidden character", w, command)
			}
			requoted = append(requoted, Quote(w))
		}
		again, err := Tokenize(strings.Join(requoted, " "))
		if err != nil {
			if errors.Is(err, ErrTooLong) {
				return // quoting can make it longer
			}
			t.Fatalf("re-tokenize %q: %v", requoted, err)
		}
		if diff := cmp.Diff(words, again); diff != "" {
			t.Fatalf("re-tokenized words differ (-want +got):\n%s", diff)
		}
	})
}
