package auditchain

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestRolledBackBackupRestored(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 10
	buildLog(t, o, 25)
	backup := filepath.Join(t.TempDir(), "audit.db")
	copyFile(t, o.Path, backup)
	v := buildLog(t, o, 20) // reopen, 20 more, close
	copyFile(t, backup, o.Path)
	os.Remove(o.Path + "-wal")
	os.Remove(o.Path + "-shm")

	if rep := verify(t, o, v); !rep.Intact() {
		t.Fatalf("without an outside checkpoint the old copy looks intact (a documented limit), got %+v", rep.Damage)
	}
	rep := verify(t, o, v, trustedFile(t, o)...)
	old, err := OpenReader(context.Background(), o.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	n, err := old.Size(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := rep.First()
	if got == nil || got.Kind != DamageRolledBack || got.Seq != n {
		t.Errorf("first damage %+v, want rolled_back at %d", got, n)
	}
	// The log refuses to write on top of a rolled-back database.
	if _, err := Open(context.Background(), o); !errorsIs(err, ErrInconsistent) {
		t.Errorf("Open after rollback: %v, want ErrInconsistent", err)
	}
}

func TestForkRewrittenWithStolenKey(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 10
	buildLog(t, o, 30)
	trusted := trustedFile(t, o) // the investigator's copy, kept elsewhere

	// The thief holds the key and rewrites the whole log from scratch.
	o2 := o
	o2.Path = filepath.Join(t.TempDir(), "audit.db")
	o2.CheckpointLogPath = ""
	l := openLog(t, o2)
	for i := 0; i < 40; i++ {
		e := sampleEntry(i)
		e.RunID = "run-rewritten"
		if _, err := l.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	v, err := ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, o2, v); !rep.Intact() {
		t.Fatalf("re-signed rewrite without outside checkpoints: %+v (a stolen key defeats in-database evidence)", rep.Damage)
	}
	rep := verify(t, o2, v, trusted...)
	got := rep.First()
	if got == nil || got.Kind != DamageFork || got.Seq != 0 {
		t.Fatalf("first damage %+v, want fork at 0", got)
	}
	f := rep.Fork
	if f == nil || f.LocalNote == "" || len(f.Proof) == 0 {
		t.Fatalf("fork evidence incomplete: %+v", f)
	}
	// The evidence holds up on its own: the trusted note and the local note
	// both verify, and the proof shows the local tree at the trusted size
	// has a different root.
	tc, err := OpenCheckpoint([]byte(f.TrustedNote), v)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := OpenCheckpoint([]byte(f.LocalNote), v)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(f.Proof, lc.Size, lc.Root, f.Size, f.LocalRoot); err != nil {
		t.Errorf("fork proof does not check: %v", err)
	}
	if tc.Root == f.LocalRoot {
		t.Errorf("trusted root equals the local root at size %d", f.Size)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

var _ = hex.EncodeToString
