package classify

import (
	"sort"
	"strings"
)

// grammars are the programs the classifier can prove read-only (or whose
// writes it can read from their arguments), by name.
var grammars = func() map[string]*grammar {
	out := map[string]*grammar{}
	for _, table := range [][]model{coreutilsModels, systemModels, writerModels, otherModels, netModels} {
		for i := range table {
			g := compile(&table[i])
			for _, n := range strings.Fields(table[i].names) {
				if out[n] != nil {
					panic("classify: " + n + " modelled twice")
				}
				out[n] = g
			}
		}
	}
	return out
}()

// Programs describes every program modelled by its option grammar,
// sorted by name: what the effect oracle generates its corpus from, and
// what docs/approvals.md lists.
func Programs() []ProgramSpec {
	seen := map[*grammar]bool{}
	var out []ProgramSpec
	for _, g := range grammars {
		if !seen[g] {
			seen[g] = true
			out = append(out, g.spec())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Names[0] < out[j].Names[0] })
	return out
}
