package auditchain

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The crash test's child: append in a loop, printing each acknowledged
// seq, until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("AUDITCHAIN_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	o := DefaultOptions(dir)
	o.Origin = "airlock.test/log"
	o.CheckpointEvery = 200
	o.CheckpointInterval = -1
	l, err := Open(context.Background(), o)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		ref, err := l.Append(context.Background(), sampleEntry(i))
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(1)
		}
		fmt.Fprintln(w, "seq", ref.Seq)
		w.Flush()
	}
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	tests := []struct {
		name      string
		removeWAL bool
	}{
		{"killed", false},
		{"killed and WAL removed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := DefaultOptions(dir)
			o.Origin = "airlock.test/log"
			o.CheckpointEvery = 200
			o.CheckpointInterval = -1
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "AUDITCHAIN_CRASH_DIR="+dir)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := int64(-1)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 2 && f[0] == "seq" {
					acked, _ = strconv.ParseInt(f[1], 10, 64)
				} else {
					t.Logf("child: %s", sc.Text())
				}
				// Past two checkpoints, and (for the WAL case) well away
				// from the next one: a kill in the middle of moving WAL
				// frames into the database file, followed by deleting the
				// WAL, would corrupt any SQLite file.
				if acked >= 450 && acked%200 >= 60 && acked%200 <= 140 {
					break
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if acked < 450 {
				t.Fatalf("child stopped at %d", acked)
			}
			if tt.removeWAL {
				os.Remove(o.Path + "-wal")
				os.Remove(o.Path + "-shm")
			}
			os.Remove(o.Path + ".lock")

			v, err := ReadVerifierKey(o.VerifierKeyPath)
			if err != nil {
				t.Fatal(err)
			}
			rep := verify(t, o, v, trustedFile(t, o)...)
			if !rep.Intact() {
				t.Fatalf("survivor: %+v", rep.Damage)
			}
			if !tt.removeWAL && rep.Entries <= acked {
				t.Errorf("%d entries survive, but seq %d was acknowledged as durable", rep.Entries, acked)
			}
			if rep.Covered == 0 || rep.Covered > rep.Entries {
				t.Errorf("covered %d of %d entries", rep.Covered, rep.Entries)
			}
			// The survivor reopens, recovers and goes on.
			l := openLog(t, o)
			if _, err := l.Append(context.Background(), sampleEntry(0)); err != nil {
				t.Fatal(err)
			}
			closeLog(t, l)
			if rep := verify(t, o, v, trustedFile(t, o)...); !rep.Intact() || rep.Uncovered != 0 {
				t.Fatalf("after recovery: %+v", rep)
			}
		})
	}
}

// Verifying an evidence copy (the database file alone, in a directory of
// its own) leaves nothing beside it: no -wal, no -shm.
func TestVerifyLeavesNothingBesideACopy(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 4
	v := buildLog(t, o, 10)
	b, err := os.ReadFile(o.Path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cp := filepath.Join(dir, "evidence.db")
	if err := os.WriteFile(cp, b, 0o400); err != nil {
		t.Fatal(err)
	}
	co := o
	co.Path = cp
	verify(t, co, v)
	readEvery(t, cp)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the evidence directory holds %v, want only the copy", names)
	}
}

// The obvious witness, `cat >> notes.log`, keeps notes with no blank line
// between them: they read as the notes they are, and verify. A note that
// cannot be used is a problem of that file, never damage to the database.
func TestWitnessNotesWithoutBlankLines(t *testing.T) {
	o := testOptions(t)
	o.CheckpointEvery = 3
	v := buildLog(t, o, 10)
	data, err := os.ReadFile(o.CheckpointLogPath)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := SplitNotes(data)
	if err != nil || len(notes) < 3 {
		t.Fatalf("%d notes, %v", len(notes), err)
	}
	var cat []byte
	for _, n := range notes {
		cat = append(cat, bytes.TrimRight(n, "\n")...)
		cat = append(cat, '\n')
	}
	witness := filepath.Join(t.TempDir(), "notes.log")
	if err := os.WriteFile(witness, cat, 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, err := ReadTrustedNotes(witness)
	if err != nil || len(trusted) != len(notes) {
		t.Fatalf("read %d of %d notes: %v", len(trusted), len(notes), err)
	}
	if rep := verify(t, o, v, trusted...); !rep.Intact() || rep.TrustedCheckpoints != len(notes) {
		t.Errorf("with the witness's notes: intact %v, %d trusted checkpoints verified of %d: %+v", rep.Intact(), rep.TrustedCheckpoints, len(notes), rep.Damage)
	}

	bad := append(bytes.Clone(cat), "airlock/elsewhere\n7\nAAAA\n\n\u2014 elsewhere AAAAAAAA\n"...)
	if err := os.WriteFile(witness, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, err = ReadTrustedNotes(witness)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Verify(context.Background(), VerifyOptions{Path: o.Path, Key: v, Trusted: trusted})
	var ee *EvidenceError
	if !errors.As(err, &ee) || ee.Index != len(notes)+1 || !strings.Contains(err.Error(), "says nothing about the database") {
		t.Errorf("a note the file cannot vouch with: %v, want an evidence error naming note %d", err, len(notes)+1)
	}
}

// readEvery reads every entry of the database at path through a Reader.
func readEvery(t *testing.T, path string) {
	t.Helper()
	r, err := OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, err := range r.Entries(context.Background(), -1) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Two logs made with the default origin on one host never share it: their
// checkpoints could otherwise pass for each other's.
func TestDefaultOriginsDiffer(t *testing.T) {
	var origins []string
	for range 2 {
		o := DefaultOptions(t.TempDir())
		l, err := Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		origins = append(origins, l.Origin())
		l.Close(context.Background())
	}
	host, _ := os.Hostname()
	if origins[0] == origins[1] || !strings.HasPrefix(origins[0], "airlock/") || host != "" && !strings.Contains(origins[0], host) {
		t.Errorf("default origins %q", origins)
	}
}
