package oracle

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// ruled reads testdata/rules.txt: base lines of the programs the
// classifier reads by rules of their own, under [program]. Each base line
// is spelled plainly, with its first option double-quoted and
// $'…'-quoted, and behind each of the contexts; full keeps every
// spelling, else each base line keeps its plain one and one other, taken
// in turn.
func ruled(full bool) ([]line, error) {
	f, err := os.Open("testdata/rules.txt")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	seen := map[string]bool{}
	program, turn := "", 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		t := strings.TrimSpace(sc.Text())
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			continue
		case strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"):
			program = strings.Trim(t, "[]")
			continue
		case program == "":
			return nil, fmt.Errorf("rules.txt:%d: %q comes before any [program]", n, t)
		}
		ways := ruleSpellings(program, t)
		if !full {
			ways = []string{ways[0], ways[1+turn%(len(ways)-1)]}
			turn++
		}
		for _, w := range ways {
			if !seen[w] {
				seen[w] = true
				out = append(out, line{group: program, text: w, origin: fmt.Sprintf("rules.txt:%d", n)})
			}
		}
	}
	return out, sc.Err()
}

// plainOption is an option word that quoting leaves the same word.
var plainOption = regexp.MustCompile(`^-[A-Za-z0-9_=.,/@{}%:-]+$`)

// ruleSpellings are the ways to write base, a line of program: as it is,
// its first option after the program's name double-quoted and
// $'…'-quoted, and base behind every context.
func ruleSpellings(program, base string) []string {
	ways := []string{base}
	words := strings.Fields(base)
	at := -1
	for i, w := range words {
		if w == program {
			at = i
			break
		}
	}
	for i := at + 1; at >= 0 && i < len(words); i++ {
		if words[i] == "|" {
			break
		}
		if plainOption.MatchString(words[i]) {
			for _, q := range []string{`"%s"`, `$'%s'`} {
				quoted := append([]string(nil), words...)
				quoted[i] = fmt.Sprintf(q, words[i])
				ways = append(ways, strings.Join(quoted, " "))
			}
			break
		}
	}
	for _, c := range contexts {
		ways = append(ways, fmt.Sprintf(c, base))
	}
	return ways
}
