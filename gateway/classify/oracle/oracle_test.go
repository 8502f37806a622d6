package oracle

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/classify"
)

// minGenerated and minTricks are the least the corpus must hold: the
// oracle proves little with less.
const (
	minGenerated = 500
	minTricks    = 80
)

// lineBudget bounds the generated lines of a test run, so that the
// oracle keeps to about half a minute under -race on two cores (about
// 80 lines a second there): with every program modelled, each option is
// then spelled about once, a different way each. AIRLOCK_ORACLE_FULL=1
// lifts it: every option spelled every way.
const lineBudget = 2400

// corpusLines is the whole corpus: generated from the classifier's
// grammars, then the tricks.
func corpusLines(tb testing.TB) []line {
	tb.Helper()
	budget, full := lineBudget, os.Getenv("AIRLOCK_ORACLE_FULL") != ""
	if full {
		budget = 0
	}
	gen := generated(classify.Programs(), budget)
	rl, err := ruled(full)
	if err != nil {
		tb.Fatal(err)
	}
	gen = append(gen, rl...)
	tr, err := tricks()
	if err != nil {
		tb.Fatal(err)
	}
	if len(tr) < minTricks {
		tb.Fatalf("tricks.txt has %d lines, want at least %d", len(tr), minTricks)
	}
	return append(gen, tr...)
}

// TestOracle runs every line of the corpus as an unprivileged account in
// a fresh scratch tree and fails on every read_only verdict of a line
// that changed something.
func TestOracle(t *testing.T) {
	lines := corpusLines(t)
	needRoot(t)
	start := time.Now()
	runners := newRunners(t, maxAccounts)
	selfCheck(t, runners[0])
	verdicts := checkAll(t, runners, lines)
	t.Logf("%d lines on %d accounts in %v", len(lines), len(runners), time.Since(start).Round(time.Millisecond))
	disagreements := 0
	for _, v := range verdicts {
		if v.disagrees() {
			disagreements++
			t.Errorf("read_only verdict, yet the line changed something: %v\n\t%s", v, confirm(runners[0], v.line))
		}
		if len(v.debris) > 0 {
			t.Logf("killed at the time limit, it left temporary files (not counted): %q: %s", v.text, joinLines(v.debris))
		}
	}
	logSlowest(t, verdicts, 8)
	tab := tabulate(verdicts)
	t.Logf("result (%d disagreements):\n%s", disagreements, tab.text())
	if file := os.Getenv("AIRLOCK_ORACLE_TABLE"); file != "" {
		if err := os.WriteFile(file, []byte(tab.markdown()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// confirm runs l again through sshexec.Run, the gateway's client, and
// says what it changed that way.
func confirm(r *runner, l line) string {
	v, err := r.checkWith(l, r.runExec)
	switch {
	case err != nil:
		return "through sshexec.Run: " + err.Error()
	case len(v.effects) == 0:
		return "through sshexec.Run: no effect (" + v.outcome + ")"
	}
	return "through sshexec.Run (" + v.outcome + "), too:\n\t\t" + joinLines(v.effects)
}

// logSlowest logs the n lines that took longest: what to look at when
// the oracle gets slow.
func logSlowest(t *testing.T, vs []verdict, n int) {
	s := slices.Clone(vs)
	slices.SortFunc(s, func(a, b verdict) int { return cmp.Compare(b.took, a.took) })
	var b strings.Builder
	for _, v := range s[:min(n, len(s))] {
		fmt.Fprintf(&b, "\n\t%v %q: %s", v.took.Round(time.Millisecond), v.text, v.outcome)
	}
	t.Logf("slowest lines:%s", b.String())
}

// TestCorpus checks the corpus without running it: enough generated
// lines, and tricks that each say what they try.
func TestCorpus(t *testing.T) {
	lines := corpusLines(t)
	if gen := len(lines) - countGroup(lines, "tricks"); gen < minGenerated {
		t.Errorf("%d generated lines, want at least %d (classify.Programs() models %d programs)",
			gen, minGenerated, len(classify.Programs()))
	}
	for _, l := range lines {
		if !strings.Contains(l.text, homeMark) && strings.Contains(l.text, "/home/") {
			t.Errorf("%q names a home by its path: write %s", l.text, homeMark)
		}
	}
}

func countGroup(lines []line, group string) int {
	n := 0
	for _, l := range lines {
		if l.group == group {
			n++
		}
	}
	return n
}

// row is one program's line of the result table.
type row struct {
	group                                           string
	lines, readOnly, higher, effects, disagreements int
}

type table []row

// tabulate counts the verdicts by program, the tricks last, with a
// total.
func tabulate(vs []verdict) table {
	by := map[string]*row{}
	total := row{group: "total"}
	for _, v := range vs {
		r := by[v.group]
		if r == nil {
			r = &row{group: v.group}
			by[v.group] = r
		}
		for _, r := range []*row{r, &total} {
			r.lines++
			if v.result.Class == classify.ReadOnly {
				r.readOnly++
			} else {
				r.higher++
			}
			if len(v.effects) > 0 {
				r.effects++
			}
			if v.disagrees() {
				r.disagreements++
			}
		}
	}
	var t table
	for _, r := range by {
		t = append(t, *r)
	}
	sort.Slice(t, func(i, j int) bool {
		if (t[i].group == "tricks") != (t[j].group == "tricks") {
			return t[j].group == "tricks"
		}
		return t[i].group < t[j].group
	})
	return append(t, total)
}

var tableHeader = []string{"program", "lines", "read_only", "higher", "with effects", "disagreements"}

func (r row) cells() []string {
	return []string{r.group, fmt.Sprint(r.lines), fmt.Sprint(r.readOnly), fmt.Sprint(r.higher),
		fmt.Sprint(r.effects), fmt.Sprint(r.disagreements)}
}

// text is the table in aligned columns, for the test's log.
func (t table) text() string {
	var b strings.Builder
	format := "%-10s %6s %9s %6s %12s %13s\n"
	fmt.Fprintf(&b, format, toAny(tableHeader)...)
	for _, r := range t {
		fmt.Fprintf(&b, format, toAny(r.cells())...)
	}
	return b.String()
}

// markdown is the table as docs/approvals.md shows it.
func (t table) markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n")
	b.WriteString("|---|" + strings.Repeat("---:|", len(tableHeader)-1) + "\n")
	for _, r := range t {
		c := r.cells()
		if r.group != "tricks" && r.group != "total" {
			c[0] = "`" + c[0] + "`"
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	return b.String()
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
