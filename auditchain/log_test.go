package auditchain

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

func TestAppendVerifyIntact(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 10
	v := buildLog(t, o, 95)
	rep := verify(t, o, v, trustedFile(t, o)...)
	if !rep.Intact() {
		t.Fatalf("untouched log: damage %+v", rep.Damage)
	}
	// 95 entries and 10 checkpoint entries (sizes 10, 20, … 100); the final
	// checkpoint at Close covers everything.
	want := Report{Entries: 105, Verified: 105, Checkpoints: 11, TrustedCheckpoints: 11, Covered: 105, Damage: []Damage{}}
	if diff := cmp.Diff(want, *rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestAppendAssignsSeqTimeAndReturnsHashes(t *testing.T) {
	o := testOptions(t)
	l := openLog(t, o)
	ctx := context.Background()
	var refs []Ref
	for i := 0; i < 3; i++ {
		e := sampleEntry(i)
		e.Seq, e.Time = 99, time.Unix(1, 0) // ignored
		ref, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	closeLog(t, l)
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prev := chainGenesis
	for i, ref := range refs {
		rec, err := r.Entry(ctx, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		want := sampleEntry(i)
		want.Seq, want.Time = int64(i), ref.Time
		want.Fields, _ = want.normalize()
		if diff := cmp.Diff(want, rec.Entry); diff != "" {
			t.Errorf("entry %d (-want +got):\n%s", i, diff)
		}
		if ref.Seq != int64(i) || ref.LeafHash != rec.LeafHash || ref.Chain != rec.Chain || ref.Chain != ChainHash(prev, rec.Leaf) {
			t.Errorf("ref %d = %+v does not match the stored record", i, ref)
		}
		prev = rec.Chain
	}
	if !refs[1].Time.After(refs[0].Time) {
		t.Errorf("times not from the injected clock: %v, %v", refs[0].Time, refs[1].Time)
	}
}

func TestAppendErrors(t *testing.T) {
	o := testOptions(t)
	l := openLog(t, o)
	ctx := context.Background()
	if _, err := l.Append(ctx, Entry{Kind: KindRunCreated, Fields: []Field{Str("a", "1"), Str("a", "2")}}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("duplicate field: %v, want ErrInvalidEntry", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(cctx, sampleEntry(0)); !errors.Is(err, context.Canceled) || errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
	closeLog(t, l)
	if _, err := l.Append(ctx, sampleEntry(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, _ := r.Size(ctx); n != 0 {
		t.Errorf("%d entries written by failed appends", n)
	}
}

// A write failure surfaces as an error and the log fails closed.
func TestAppendFailsClosed(t *testing.T) {
	o := testOptions(t)
	l := openLog(t, o)
	ctx := context.Background()
	if _, err := l.Append(ctx, sampleEntry(0)); err != nil {
		t.Fatal(err)
	}
	// Someone else takes seq 1 behind the log's back.
	tamperWhileOpen(t, o.Path, func(db execer) {
		db.Exec(`INSERT INTO entries (seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain) VALUES (1, 0, 'x', '', '', x'', x'', x'')`)
	})
	if _, err := l.Append(ctx, sampleEntry(1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the database changed under the log: %v, want ErrFailed", err)
	}
	if _, err := l.Append(ctx, sampleEntry(2)); !errors.Is(err, ErrFailed) {
		t.Errorf("later append: %v, want ErrFailed (sticky)", err)
	}
	if err := l.Close(ctx); !errors.Is(err, ErrFailed) {
		t.Errorf("Close of a failed log: %v, want ErrFailed", err)
	}
}

// Verify and the Reader never write to the file they examine.
func TestVerifyIsReadOnly(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 4
	v := buildLog(t, o, 10)
	before, err := os.ReadFile(o.Path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(o.Path, 0o400)
	verify(t, o, v, trustedFile(t, o)...)
	readEvery(t, o.Path)
	after, err := os.ReadFile(o.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("verifying changed the database file")
	}
}

func TestOpenIsExclusive(t *testing.T) {
	o := testOptions(t)
	l := openLog(t, o)
	defer closeLog(t, l)
	if _, err := Open(context.Background(), o); err == nil {
		t.Fatal("second Open of the same log succeeded")
	}
}

func TestReopenContinues(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 7
	buildLog(t, o, 20)
	v := buildLog(t, o, 20)
	rep := verify(t, o, v, trustedFile(t, o)...)
	if !rep.Intact() || rep.Uncovered != 0 {
		t.Fatalf("reopened log: %+v", rep)
	}
}

func TestOpenRefusesLostCheckpointedEntries(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, db *sql.DB)
	}{
		{"tail cut", func(t *testing.T, db *sql.DB) { cutTail(t, db, 20, true) }},
		{"last entry changed", func(t *testing.T, db *sql.DB) { flipLeafByte(t, db, catalogueRows-1) }},
		{"schema changed", func(t *testing.T, db *sql.DB) { mustExec(t, db, `CREATE TABLE extra (x)`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			o.CheckpointEvery = 10
			buildLog(t, o, catalogueAppends)
			tamper(t, o.Path, func(db *sql.DB) { tt.tamper(t, db) })
			if _, err := Open(context.Background(), o); !errors.Is(err, ErrInconsistent) {
				t.Errorf("Open: %v, want ErrInconsistent", err)
			}
		})
	}
}

func TestConcurrentAppends(t *testing.T) {
	const goroutines, each = 64, 1000
	o := testOptions(t)
	o.Now = nil
	o.CheckpointEvery = 5000
	l := openLog(t, o)
	ctx := context.Background()
	var wg sync.WaitGroup
	seqs := make([][]int64, goroutines)
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ref, err := l.Append(ctx, Entry{Kind: KindActionRequested, ActionID: fmt.Sprintf("g%d-%d", g, i), Fields: []Field{Int("g", int64(g))}})
				if err != nil {
					errs <- err
					return
				}
				seqs[g] = append(seqs[g], ref.Seq)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	closeLog(t, l)
	seen := map[int64]bool{}
	for _, s := range seqs {
		for i, q := range s {
			if seen[q] {
				t.Fatalf("seq %d returned twice", q)
			}
			seen[q] = true
			if i > 0 && q <= s[i-1] {
				t.Fatalf("one goroutine's seqs go backwards: %d after %d", q, s[i-1])
			}
		}
	}
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := verify(t, o, v, trustedFile(t, o)...)
	if !rep.Intact() || rep.Uncovered != 0 {
		t.Fatalf("report %+v", rep)
	}
	// Every appended seq exists, and the others are checkpoint entries:
	// seqs are contiguous from 0.
	n := rep.Entries
	if n < goroutines*each {
		t.Fatalf("%d entries, want at least %d", n, goroutines*each)
	}
	r, err := OpenReader(ctx, o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var next int64
	for rec, err := range r.Entries(ctx, -1) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Seq != next {
			t.Fatalf("seq %d, want %d", rec.Seq, next)
		}
		if !seen[rec.Seq] && rec.Kind != KindCheckpoint {
			t.Fatalf("entry %d was never acknowledged", rec.Seq)
		}
		next++
	}
}

func TestCheckpointTriggers(t *testing.T) {
	t.Run("every N entries", func(t *testing.T) {
		o := testOptions(t)
		o.CheckpointEvery = 5
		l := openLog(t, o)
		for i := 0; i < 12; i++ {
			if _, err := l.Append(context.Background(), sampleEntry(i)); err != nil {
				t.Fatal(err)
			}
		}
		// Sizes 5 and 10 (the checkpoint entry at seq 5 counts), before Close.
		if got := checkpointSizes(t, o); !cmp.Equal(got, []int64{5, 10}) {
			t.Errorf("checkpoint sizes %v, want [5 10]", got)
		}
		closeLog(t, l)
		if got := checkpointSizes(t, o); !cmp.Equal(got, []int64{5, 10, 14}) {
			t.Errorf("after Close: %v, want [5 10 14]", got)
		}
	})
	t.Run("every T", func(t *testing.T) {
		o := testOptions(t)
		o.CheckpointEvery = -1
		o.CheckpointInterval = 50 * time.Millisecond
		o.Now = nil
		l := openLog(t, o)
		if _, err := l.Append(context.Background(), sampleEntry(0)); err != nil {
			t.Fatal(err)
		}
		testkit.Poll(testkit.Patience, func() bool { return len(checkpointSizes(t, o)) > 0 })
		// An idle log does not sign again for its own checkpoint entry.
		time.Sleep(1500 * time.Millisecond)
		closeLog(t, l)
		if got := checkpointSizes(t, o); !cmp.Equal(got, []int64{1, 2}) {
			t.Errorf("checkpoint sizes %v, want [1 2] (timer, then Close)", got)
		}
	})
	t.Run("close without new entries signs nothing", func(t *testing.T) {
		o := testOptions(t)
		buildLog(t, o, 3)
		closeLog(t, openLog(t, o))
		if got := checkpointSizes(t, o); !cmp.Equal(got, []int64{3}) {
			t.Errorf("checkpoint sizes %v, want [3]", got)
		}
	})
}

// checkpointSizes reads the sizes in checkpoints.log.
func checkpointSizes(t *testing.T, o Options) []int64 {
	t.Helper()
	data, err := os.ReadFile(o.CheckpointLogPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	notes, err := SplitNotes(data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, n := range notes {
		c, err := OpenCheckpoint(n, v)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, c.Size)
	}
	return sizes
}

func TestKeyFileChecks(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, o Options)
		path    func(o Options) string
	}{
		{"key readable by group", func(t *testing.T, o Options) { os.Chmod(o.KeyPath, 0o640) }, func(o Options) string { return o.KeyPath }},
		{"key readable by world", func(t *testing.T, o Options) { os.Chmod(o.KeyPath, 0o604) }, func(o Options) string { return o.KeyPath }},
		{"key directory writable by others", func(t *testing.T, o Options) { os.Chmod(filepath.Dir(o.KeyPath), 0o777) }, func(o Options) string { return filepath.Dir(o.KeyPath) }},
		{"key owned by another user", func(t *testing.T, o Options) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give the key to another user")
			}
			if err := os.Chown(o.KeyPath, 65534, -1); err != nil {
				t.Fatal(err)
			}
		}, func(o Options) string { return o.KeyPath }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			buildLog(t, o, 1)
			tt.prepare(t, o)
			_, err := Open(context.Background(), o)
			var kfe *securefile.Error
			if !errors.As(err, &kfe) {
				t.Fatalf("Open: %v, want *securefile.Error", err)
			}
			if kfe.Path != tt.path(o) || kfe.Fix() == "" {
				t.Errorf("securefile.Error %+v, want path %s and a fix", kfe, tt.path(o))
			}
		})
	}
	t.Run("generated owner-only", func(t *testing.T) {
		o := testOptions(t)
		buildLog(t, o, 1)
		for path, want := range map[string]os.FileMode{o.KeyPath: 0o600, filepath.Dir(o.KeyPath): 0o700, o.Path: 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
			}
		}
	})
}

// The signing key never reaches a log line or an error.
func TestSigningKeyNeverLogged(t *testing.T) {
	o := testOptions(t)
	var buf bytes.Buffer
	o.Logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	o.CheckpointEvery = 2
	buildLog(t, o, 5)
	raw, err := os.ReadFile(o.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	// PRIVATE+KEY+<name>+<hash>+<key data, which may itself hold '+'>
	secret := strings.SplitN(strings.TrimSpace(string(raw)), "+", 5)[4]
	if strings.Contains(buf.String(), secret) {
		t.Error("the signing key appears in the log output")
	}
	// A key file that is not a key: the error must not quote it.
	os.WriteFile(o.KeyPath, []byte("PRIVATE+KEY+x+00000000+"+secret+"garbage\n"), 0o600)
	_, err = Open(context.Background(), o)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Open with a broken key: %v (must fail without quoting the key)", err)
	}
	if got := fmt.Sprintf("%v %#v", signingKey{}, signingKey{}); strings.Contains(got, "PRIVATE") {
		t.Errorf("signingKey formats as %q", got)
	}
}

func TestWitness(t *testing.T) {
	t.Run("receives every note", func(t *testing.T) {
		o := testOptions(t)
		o.CheckpointEvery = 3
		out := filepath.Join(t.TempDir(), "witnessed")
		o.WitnessCommand = []string{"/bin/sh", "-c", `cat >> "$0"; printf '\n' >> "$0"`, out}
		buildLog(t, o, 4)
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(o.CheckpointLogPath)
		if err != nil {
			t.Fatal(err)
		}
		// The witness may skip a note while busy, never reorder; here the
		// last note (the one at Close) must have arrived.
		notes, _ := SplitNotes(want)
		if !bytes.HasSuffix(got, append(notes[len(notes)-1], '\n')) {
			t.Errorf("witness got %q, want it to end with %q", got, notes[len(notes)-1])
		}
	})
	t.Run("failing witness does not block appends", func(t *testing.T) {
		o := testOptions(t)
		o.CheckpointEvery = 1
		o.WitnessCommand = []string{"/bin/false"}
		var mu sync.Mutex
		var runs, failed int
		o.OnWitness = func(err error) { // the gateway counts these in a metric
			mu.Lock()
			defer mu.Unlock()
			runs++
			if err != nil {
				failed++
			}
		}
		v := buildLog(t, o, 5)
		if rep := verify(t, o, v); !rep.Intact() {
			t.Fatal(rep.Damage)
		}
		mu.Lock()
		defer mu.Unlock()
		if runs == 0 || failed != runs {
			t.Errorf("OnWitness: %d runs, %d failed; want every run reported failed", runs, failed)
		}
	})
	t.Run("hanging witness is bounded", func(t *testing.T) {
		o := testOptions(t)
		o.CheckpointEvery = 1
		o.WitnessCommand = []string{"/bin/sleep", "30"}
		o.WitnessTimeout = 100 * time.Millisecond
		start := time.Now()
		buildLog(t, o, 3)
		// An unbounded witness would hold each of the three checkpoints
		// 30 s; well under one of those means the bound held, however
		// slow the machine.
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v with a hanging witness", d)
		}
	})
}

// The witness command leads a process group of its own, and nothing in
// that group outlives it: what it started is killed at its timeout, and
// when it exits.
func TestWitnessGroupEndsWithIt(t *testing.T) {
	for _, tc := range []struct {
		name, script string
	}{
		// sh waits for a child that holds its output open.
		{"at its timeout", `sleep 1000 & echo $! >> "$0"; cat >/dev/null; wait`},
		// sh leaves a child behind and exits.
		{"when it exits", `sleep 1000 >/dev/null 2>&1 </dev/null & echo $! >> "$0"; cat >/dev/null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			o.CheckpointEvery = 1
			pids := filepath.Join(t.TempDir(), "pids")
			o.WitnessCommand = []string{"/bin/sh", "-c", tc.script, pids}
			o.WitnessTimeout = time.Second
			buildLog(t, o, 2)
			b, err := os.ReadFile(pids)
			if err != nil || len(bytes.Fields(b)) == 0 {
				t.Fatalf("the witness started no child: %q, %v", b, err)
			}
			for _, f := range bytes.Fields(b) {
				pid, err := strconv.Atoi(string(f))
				if err != nil {
					t.Fatal(err)
				}
				testkit.Eventually(t, func() bool { return !proctree.Alive(pid) },
					"the witness's child %d still runs after the witness ended", pid)
			}
		})
	}
}

func TestDangling(t *testing.T) {
	o := testOptions(t)
	l := openLog(t, o)
	ctx := context.Background()
	for _, e := range []Entry{
		{Kind: KindActionRequested, ActionID: "a1"},
		{Kind: KindActionConnecting, ActionID: "a1"},
		{Kind: KindActionConnecting, ActionID: "a2"},
		{Kind: KindActionFinished, ActionID: "a2", Fields: []Field{Str("outcome", "exited")}},
		{Kind: KindActionRequested, ActionID: "a3"},
		{Kind: KindActionConnecting, ActionID: "a4"},
	} {
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Dangling(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "a4"}, got); diff != "" {
		t.Errorf("Dangling (-want +got):\n%s", diff)
	}
	if _, err := l.Append(ctx, Entry{Kind: KindActionFinished, ActionID: "a1", Fields: []Field{Str("outcome", "interrupted")}}); err != nil {
		t.Fatal(err)
	}
	got, _ = l.Dangling(ctx)
	if diff := cmp.Diff([]string{"a4"}, got); diff != "" {
		t.Errorf("Dangling after recovery (-want +got):\n%s", diff)
	}
	recs, err := l.Reader().ActionEntries(ctx, "a1")
	if err != nil || len(recs) != 3 {
		t.Errorf("ActionEntries(a1): %d records, %v", len(recs), err)
	}
	if _, err := l.Reader().ActionEntries(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ActionEntries(nope): %v, want ErrNotFound", err)
	}
	closeLog(t, l)
}
