package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a requested command. sshd passes the client's exec request on
// verbatim (SSH_ORIGINAL_COMMAND), so every byte of it is attacker-chosen.
const (
	// MaxCommandBytes bounds the length of the command string.
	MaxCommandBytes = 4096
	// MaxWords bounds the number of words (the verb and its arguments).
	MaxWords = 64
)

// The reasons Tokenize refuses a command; a *SyntaxError wraps one of them.
var (
	ErrEmpty        = errors.New("empty command")
	ErrTooLong      = fmt.Errorf("command longer than %d bytes", MaxCommandBytes)
	ErrTooManyWords = fmt.Errorf("command has more than %d words", MaxWords)
	ErrInvalidUTF8  = errors.New("invalid UTF-8")
	ErrControl      = errors.New("control or invisible formatting character")
	ErrMetachar     = errors.New("shell metacharacter")
	ErrUnterminated = errors.New("unterminated quote")
	ErrBadEscape    = errors.New("backslash escape")
)

// SyntaxError says where and why Tokenize refused a command.
type SyntaxError struct {
	// Offset is the byte offset of the offending character in the command.
	Offset int
	// Char is the offending character; zero when there is none (an empty
	// or overlong command, or a quote left open).
	Char rune
	// Err is one of ErrEmpty, ErrTooLong, ErrTooManyWords, ErrInvalidUTF8,
	// ErrControl, ErrMetachar, ErrUnterminated or ErrBadEscape.
	Err error
}

func (e *SyntaxError) Error() string {
	if e.Char != 0 {
		return fmt.Sprintf("command: %v %s at byte %d", e.Err, strconv.QuoteRuneToASCII(e.Char), e.Offset)
	}
	return fmt.Sprintf("command: %v at byte %d", e.Err, e.Offset)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// metachars are refused outside quotes: characters a shell would give a
// meaning to (expansion, globbing, redirection, command lists, comments,
// history) or that start an escape. No shell ever sees the command, so
// passing them on literally would make the command mean something other
// than what a reader of it expects; refusing them keeps the two equal.
const metachars = "$`;|&<>()*?[]{}~#!\\"

// Tokenize splits a command into words the way a POSIX shell would split a
// simple command of literal words, and refuses everything else. There is
// no expansion of any kind.
//
// The rules:
//   - The command is valid UTF-8 of at most MaxCommandBytes bytes and at
//     most MaxWords words, and holds at least one word.
//   - Words are separated by spaces and tabs outside quotes.
//   - No control character (NUL, newline, carriage return, escape, DEL, the
//     C1 range), line or paragraph separator, or invisible formatting
//     character (bidirectional overrides, zero-width spaces) may appear
//     anywhere, quoted or not; tab only as a separator.
//   - Outside quotes, the characters $ ` ; | & < > ( ) * ? [ ] { } ~ # ! and
//     backslash are refused.
//   - 'single quotes' keep everything between them literally; a single
//     quote cannot appear inside them.
//   - "double quotes" keep everything literally except that \" stands for "
//     and \\ for \; any other backslash, and $ or ` (which a shell would
//     expand inside double quotes), are refused.
//   - Quoted and unquoted parts next to each other make one word: a'b c'
//     is the word "ab c", and a pair of empty quotes is an empty word.
func Tokenize(command string) ([]string, error) {
	if len(command) > MaxCommandBytes {
		return nil, &SyntaxError{Offset: MaxCommandBytes, Err: ErrTooLong}
	}
	var (
		words   []string
		word    strings.Builder
		inWord  bool // a word has started, possibly empty ('')
		quote   rune // 0, '\'' or '"'
		quoteAt int
	)
	endWord := func(at int) error {
		if !inWord {
			return nil
		}
		if len(words) == MaxWords {
			return &SyntaxError{Offset: at, Err: ErrTooManyWords}
		}
		words = append(words, word.String())
		word.Reset()
		inWord = false
		return nil
	}
	for i := 0; i < len(command); {
		r, size := utf8.DecodeRuneInString(command[i:])
		if r == utf8.RuneError && size <= 1 {
			return nil, &SyntaxError{Offset: i, Err: ErrInvalidUTF8}
		}
		if r != '\t' && forbidden(r) || r == '\t' && quote != 0 {
			return nil, &SyntaxError{Offset: i, Char: r, Err: ErrControl}
		}
		switch quote {
		case '\'':
			if r == '\'' {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case '"':
			switch r {
			case '"':
				quote = 0
			case '$', '`':
				return nil, &SyntaxError{Offset: i, Char: r, Err: ErrMetachar}
			case '\\':
				next, nsize := utf8.DecodeRuneInString(command[i+size:])
				if next != '"' && next != '\\' {
					return nil, &SyntaxError{Offset: i, Char: r, Err: ErrBadEscape}
				}
				word.WriteRune(next)
				size += nsize
			default:
				word.WriteRune(r)
			}
		default:
			switch {
			case r == ' ' || r == '\t':
				if err := endWord(i); err != nil {
					return nil, err
				}
			case r == '\'' || r == '"':
				quote, quoteAt, inWord = r, i, true
			case strings.ContainsRune(metachars, r):
				return nil, &SyntaxError{Offset: i, Char: r, Err: ErrMetachar}
			default:
				word.WriteRune(r)
				inWord = true
			}
		}
		i += size
	}
	if quote != 0 {
		return nil, &SyntaxError{Offset: quoteAt, Char: quote, Err: ErrUnterminated}
	}
	if err := endWord(len(command)); err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, &SyntaxError{Offset: 0, Err: ErrEmpty}
	}
	return words, nil
}

// forbidden reports whether r may not appear in a command at all: control
// characters (C0, DEL, C1), line and paragraph separators, and format
// characters such as bidirectional overrides and zero-width spaces, which
// would make a logged or displayed command read differently from what ran.
func forbidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError
}

// Quote returns word written so that Tokenize gives it back unchanged:
// as it is when it holds only plain characters, else in single quotes (a
// single quote inside becomes '"'"'). It is for messages and --explain
// output; a word Tokenize could never produce (one with control characters
// or invalid UTF-8) is written with strconv.QuoteToASCII instead.
func Quote(word string) string {
	switch {
	case !safeText(word):
		return strconv.QuoteToASCII(word)
	case word != "" && !strings.ContainsAny(word, metachars+" '\""):
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'"'"'`) + "'"
}

func safeText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if forbidden(r) || r == '\t' {
			return false
		}
	}
	return true
}
