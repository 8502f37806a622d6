// Package oracle checks the command classifier against what commands do
// (issue #35). It has no code of its own, only tests: TestOracle runs
// every line of a corpus — generated from classify.Programs, every
// modelled option spelled every way a shell allows, the base lines of
// the programs read by rules (testdata/rules.txt) spelled the same ways,
// and the tricks of
// testdata/tricks.txt — on a real OpenSSH sshd, as an unprivileged
// account whose home is a fresh scratch tree, and compares what changed
// with the verdict. A read_only verdict must leave no change and no
// marker of the payload program; a higher verdict that changes nothing is
// allowed (the classifier over-approximates) and only counted. FuzzOracle
// does the same for mutations of the corpus's read_only lines.
//
// The tests need root (they make the accounts airlock-oracle0…3 and reset
// their homes; the lines themselves run only as those accounts) and sshd:
// without them they skip, and under CI=true they fail. Set
// AIRLOCK_ORACLE_TABLE=FILE to have TestOracle write its result table
// as markdown to FILE (for docs/approvals.md). The generated lines are
// held to a budget that keeps the test to about half a minute under
// -race; AIRLOCK_ORACLE_FULL=1 runs every spelling of every option.
//
// It must not know how the classifier decides: only Classify, Programs
// and the verdict's reason.
package oracle
