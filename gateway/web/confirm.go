package web

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// confirmRunes is how many characters of a command's first line a
// confirmation repeats.
const confirmRunes = 80

// firstLine is what a confirmation repeats of a command: its first line,
// at most confirmRunes characters of it, and, when that is not all of it,
// a note saying what was cut ("" when nothing was).
func firstLine(cmd string) (shown, cut string) {
	shown = cmd
	lines := 1
	if i := strings.IndexAny(cmd, "\r\n"); i >= 0 {
		shown, lines = cmd[:i], strings.Count(cmd, "\n")+1
	}
	if utf8.RuneCountInString(shown) > confirmRunes {
		n := 0
		for i := range shown {
			if n == confirmRunes {
				shown = shown[:i]
				break
			}
			n++
		}
	}
	if len(shown) == len(cmd) {
		return shown, ""
	}
	what := "start"
	if lines > 1 {
		what = fmt.Sprintf("first of %d lines", lines)
	}
	return shown, fmt.Sprintf("… cut: the %s, %d of %d bytes shown; the card and the action's page show it in full", what, len(shown), len(cmd))
}
