package classify

import "strings"

// operands are the arguments that are not options (after "--", all).
func operands(rest []word) []word {
	var out []word
	dash := false
	for _, a := range rest {
		switch {
		case dash:
			out = append(out, a)
		case a.lit && a.v == "--":
			dash = true
		case a.lit && strings.HasPrefix(a.v, "-") && a.v != "-":
		default:
			out = append(out, a)
		}
	}
	return out
}

func anyArg(rest []word, names ...string) bool {
	for _, a := range rest {
		if !a.lit {
			continue
		}
		for _, n := range names {
			if a.v == n || strings.HasPrefix(a.v, n+"=") || strings.HasPrefix(n, "--") && strings.HasPrefix(a.v, n) {
				return true
			}
		}
	}
	return false
}

func anyExact(rest []word, names ...string) bool {
	for _, a := range rest {
		for _, n := range names {
			if a.lit && a.v == n {
				return true
			}
		}
	}
	return false
}

func anyPrefix(rest []word, prefixes ...string) bool {
	for _, a := range rest {
		for _, p := range prefixes {
			if a.lit && strings.HasPrefix(a.v, p) {
				return true
			}
		}
	}
	return false
}

func anyContains(rest []word, s string) bool {
	for _, a := range rest {
		if a.lit && strings.Contains(a.v, s) {
			return true
		}
	}
	return false
}
