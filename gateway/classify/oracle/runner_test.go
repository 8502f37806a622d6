package oracle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/classify"
)

// runner runs lines as one account, each in a fresh copy of its fixture.
type runner struct {
	*account
	// template is the account's fixture, built once, copied into the
	// home before a line unless the home is the fixture still.
	template string
	// pristine is the snapshot of the fixture in the home; dirty says
	// the last line left something else, last is what.
	pristine, last snapshot
	dirty          bool
}

// verdict is a line, the classifier's verdict and what running it did.
type verdict struct {
	line
	// text is the line as run: @HOME@ replaced.
	text    string
	result  classify.Result
	effects []string
	// outcome is how the line ended (exit status, timeout).
	outcome string
	// debris are the temporary files a line the oracle had to kill left
	// in a temporary directory (see splitDebris): listed, not effects.
	debris []string
	// took is how long the check took: reset, run, snapshots.
	took time.Duration
}

// disagrees reports whether the verdict said read_only and the line
// changed something.
func (v verdict) disagrees() bool {
	return v.result.Class == classify.ReadOnly && len(v.effects) > 0
}

func (v verdict) String() string {
	return fmt.Sprintf("%q (%s)\n\tverdict: %s\n\tran: %s\n\teffects:\n\t\t%s", v.text, v.origin,
		v.result.Reason(), v.outcome, joinLines(v.effects))
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n\t\t"
		}
		out += l
	}
	return out
}

// newRunners takes up to n oracle accounts for tb and builds each one's
// fixture.
func newRunners(tb testing.TB, n int) []*runner {
	tb.Helper()
	var out []*runner
	for _, a := range takeAccounts(tb, n) {
		r, err := newRunner(a, tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		a.sshd.LogOnFailure(tb)
		out = append(out, r)
	}
	return out
}

func newRunner(a *account, dir string) (*runner, error) {
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := a.buildTemplate(dir); err != nil {
		return nil, err
	}
	return &runner{account: a, template: dir, dirty: true}, nil
}

// check classifies l and runs it. An error means the oracle could not
// look: the fixture could not be made, or the line could not be started.
func (r *runner) check(l line) (verdict, error) { return r.checkWith(l, r.run) }

// checkWith is check with the line run by run.
func (r *runner) checkWith(l line, run func(string) (ran, error)) (verdict, error) {
	v := verdict{line: l, text: r.expand(l.text)}
	v.result = classify.Classify(v.text)
	if err := r.fresh(); err != nil {
		return v, err
	}
	res, err := run(v.text)
	if err != nil {
		return v, err
	}
	v.outcome = res.String()
	left := r.leftRunning()
	if len(left) > 0 {
		if err := r.killAll(); err != nil {
			return v, err
		}
	}
	after, err := r.snapshot()
	if err != nil {
		return v, err
	}
	v.effects = append(r.pristine.diff(after), left...)
	if res.how == "timed out" {
		v.effects, v.debris = splitDebris(v.effects)
	}
	r.dirty, r.last = len(v.effects) > 0, after
	return v, nil
}

// fresh makes the home the fixture, and nothing of the account's left
// elsewhere. A home the last line left as the fixture was (its snapshot
// after the line equals the fixture's) is not rebuilt: nothing the
// oracle compares tells them apart. One the last line changed is
// repaired — what it changed removed or copied back — and rebuilt from
// scratch when the repair does not give the fixture back.
func (r *runner) fresh() error {
	if !r.dirty {
		return nil
	}
	if r.pristine != nil && r.repair(r.template, r.pristine, r.last) {
		if s, err := r.snapshot(); err == nil && len(r.pristine.diff(s)) == 0 {
			r.dirty = false
			return nil
		}
	}
	if err := r.reset(r.template); err != nil {
		return err
	}
	s, err := r.snapshot()
	if err != nil {
		return err
	}
	if r.pristine != nil {
		if d := r.pristine.diff(s); len(d) > 0 {
			return fmt.Errorf("oracle: %s's fixture differs from its first copy: %v", r.name, d)
		}
	}
	r.pristine, r.dirty = s, false
	return nil
}

// checkAll runs lines on the runners in parallel and returns the
// verdicts in the order of lines.
func checkAll(tb testing.TB, runners []*runner, lines []line) []verdict {
	tb.Helper()
	out := make([]verdict, len(lines))
	errs := make([]error, len(lines))
	next := make(chan int)
	done := make(chan struct{})
	for _, r := range runners {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range next {
				start := time.Now()
				out[i], errs[i] = r.check(lines[i])
				out[i].took = time.Since(start)
			}
		}()
	}
	for i := range lines {
		next <- i
	}
	close(next)
	for range runners {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return out
}

// selfCheck makes sure the oracle sees what it must: the payload's
// marker, a file written, a file removed, a process left running, and
// nothing for a line that changes nothing. Without it, a blind oracle
// would pass every verdict.
func selfCheck(tb testing.TB, r *runner) {
	tb.Helper()
	for _, c := range []struct {
		text      string
		effective bool
	}{
		{"true", false},
		{"cat a.txt; ls -la; false", false},
		{homeMark + "/bin/mark", true},
		{"echo x > out.txt", true},
		{"rm c.txt", true},
		{"touch a.txt", true},
		{"echo x > /tmp/x", true},
		{"nohup sleep 30 </dev/null >/dev/null 2>&1 &", true},
	} {
		// Both ways of running a line: in a session, as the oracle
		// does, and in a connection of its own, as the gateway does.
		for _, run := range []func(string) (ran, error){r.run, r.runExec} {
			v, err := r.checkWith(line{group: "self-check", text: c.text, origin: "self-check"}, run)
			if err != nil {
				tb.Fatal(err)
			}
			if got := len(v.effects) > 0; got != c.effective {
				tb.Fatalf("self-check: the oracle is blind or sees ghosts: %v, want effects %v", v, c.effective)
			}
		}
	}
	// The last line left a process running: the next reset must end it.
	if err := r.fresh(); err != nil {
		tb.Fatal(err)
	}
	testkit.Eventually(tb, func() bool { return len(r.processes()) == 0 }, "%s's processes are gone", r.name)
}

// splitDebris takes out of a killed line's effects the regular files it
// created directly in a temporary directory: what a program makes there
// while it runs (sort's spill files) and removes when it ends, unless it
// is killed with SIGKILL, as the oracle (and the gateway's cancel) kill
// it. The line's own words did not ask for them; docs/classification.md
// says a killed program can leave them.
func splitDebris(effects []string) (kept, debris []string) {
	for _, e := range effects {
		path, _, _ := strings.Cut(strings.TrimPrefix(e, "created "), " (")
		dir := filepath.Dir(path)
		if strings.HasPrefix(e, "created ") && (dir == "/tmp" || dir == "/var/tmp" || dir == "/dev/shm") && strings.Contains(e, " (-") {
			debris = append(debris, e)
			continue
		}
		kept = append(kept, e)
	}
	return kept, debris
}
