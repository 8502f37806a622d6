package auditchain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// testClock is a deterministic clock: each call advances one millisecond.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time {
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// testOptions returns options for a log in a fresh temporary state dir.
func testOptions(t testing.TB) Options {
	t.Helper()
	dir := t.TempDir()
	o := DefaultOptions(dir)
	o.Origin = "airlock.test/log"
	o.CheckpointInterval = -1
	clk := &testClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	o.Now = clk.now
	return o
}

func openLog(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// sampleEntry returns a varied, deterministic entry for position i.
func sampleEntry(i int) Entry {
	kinds := []Kind{KindActionRequested, KindApprovalRequested, KindApprovalDecided, KindActionConnecting, KindActionFinished}
	return Entry{
		Kind:     kinds[i%len(kinds)],
		ActionID: fmt.Sprintf("act-%d", i/len(kinds)),
		RunID:    "run-1",
		Fields: []Field{
			Str("target", "build-box"),
			Str("command", fmt.Sprintf("systemctl restart worker-%d", i)),
			Int("i", int64(i)),
			Bool("even", i%2 == 0),
		},
	}
}

// buildLog appends n sample entries and closes the log. It returns the
// options and the verifier.
func buildLog(t testing.TB, o Options, n int) note.Verifier {
	t.Helper()
	l := openLog(t, o)
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, err := l.Append(ctx, sampleEntry(i)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	closeLog(t, l)
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func verify(t testing.TB, o Options, v note.Verifier, trusted ...TrustedNote) *Report {
	t.Helper()
	rep, err := Verify(context.Background(), VerifyOptions{Path: o.Path, Key: v, Trusted: trusted})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func trustedFile(t testing.TB, o Options) []TrustedNote {
	t.Helper()
	ns, err := ReadTrustedNotes(o.CheckpointLogPath)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

var _ = filepath.Join

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// execer is the subset of *sql.DB a concurrent tamperer uses.
type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

// tamperWhileOpen writes to a database that a Log holds open.
func tamperWhileOpen(t testing.TB, path string, fn func(db execer)) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fn(db)
}
