package oracle

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/classify"
)

// maxSeeds bounds the seeds: each runs on sshd in every `go test`.
const maxSeeds = 32

// fuzzLineTimeout bounds a fuzzed line: fuzzing runs for seconds in
// `make test`, and a mutated line that waits would only stall it.
const fuzzLineTimeout = time.Second

// fuzzing is this process's runner for FuzzOracle, made at its first
// input: the fuzzing engine runs the target in worker processes, and
// each takes an account of its own.
var fuzzing struct {
	once sync.Once
	r    *runner
	err  error
}

// FuzzOracle runs mutations of the corpus's read_only lines: every one
// the classifier still rates read_only must change nothing.
func FuzzOracle(f *testing.F) {
	needRoot(f)
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Cleanup(func() {
		if fuzzing.r != nil {
			fuzzing.r.release()
			os.RemoveAll(fuzzing.r.template)
		}
	})
	f.Fuzz(func(t *testing.T, s string) {
		r := fuzzRunner(t)
		if classify.Classify(r.expand(s)).Class != classify.ReadOnly {
			return
		}
		v, err := r.check(line{group: "fuzz", text: s, origin: "fuzz"})
		if err != nil {
			t.Fatal(err)
		}
		if v.disagrees() {
			t.Fatalf("read_only verdict, yet the line changed something: %v", v)
		}
	})
}

// seeds are up to maxSeeds read_only lines of the corpus, taken evenly
// across it.
func seeds(tb testing.TB) []string {
	var ro []string
	for _, l := range corpusLines(tb) {
		text := strings.ReplaceAll(l.text, homeMark, "/home/"+accountPrefix+"0")
		if classify.Classify(text).Class == classify.ReadOnly {
			ro = append(ro, l.text)
		}
	}
	if len(ro) <= maxSeeds {
		return ro
	}
	out := make([]string, 0, maxSeeds)
	for i := 0; i < maxSeeds; i++ {
		out = append(out, ro[i*len(ro)/maxSeeds])
	}
	return out
}

// fuzzRunner takes an account for this process (waiting up to Patience
// while others hold them all) and builds its fixture, once.
func fuzzRunner(t *testing.T) *runner {
	fuzzing.once.Do(func() {
		got, err := acquire(1)
		if err != nil {
			for _, a := range got {
				a.release()
			}
			fuzzing.err = err
			return
		}
		a := got[0]
		a.timeout = fuzzLineTimeout
		dir, err := os.MkdirTemp("", "airlock-oracle-fixture-")
		if err == nil {
			fuzzing.r, err = newRunner(a, dir)
		}
		if err != nil {
			a.release()
			fuzzing.err = err
		}
	})
	if fuzzing.err != nil {
		t.Fatal(fuzzing.err)
	}
	return fuzzing.r
}
