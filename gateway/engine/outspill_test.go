package engine

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// smallKept is a kept stream with small bounds: a head of 16 bytes, the
// start kept up to keep, an end of 8 bytes; room fails once the spill
// file would pass full (-1: never).
func smallKept(t *testing.T, keep, full int64) (*keptStream, *spillDir) {
	t.Helper()
	dir, err := openSpillDir(t.TempDir(), clocktest.New(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dir.close)
	k := &keptStream{Capture: sshexec.Capture{Limit: 16, TailLimit: 8}, keep: keep, full: true, dir: dir, name: "act_test.stdout"}
	k.room = func(n int64) error {
		if full >= 0 && k.spilled+n > full {
			return errors.New("no room")
		}
		return nil
	}
	return k, dir
}

// feed writes stream to k in random chunks.
func feed(rng *rand.Rand, k interface{ write([]byte) }, stream []byte) {
	for rest := stream; len(rest) > 0; {
		n := 1 + rng.IntN(min(len(rest), 20))
		k.write(rest[:n])
		rest = rest[n:]
	}
}

// TestKeptStreamSpills: whatever the chunks, the head holds the stream's
// first bytes, the spill file the bytes after them up to max_output, the
// end its last bytes, and the facts count what is between (dropped) and
// name the file's digest; a stream within the head writes no file.
func TestKeptStreamSpills(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	stream := make([]byte, 100)
	for i := range stream {
		stream[i] = byte('a' + rng.IntN(26))
	}
	for _, tt := range []struct {
		name        string
		size, keep  int64
		full        int64
		wantSpilled int64
		wantDropped int64
		wantWhy     string
	}{
		{"within the head", 16, 48, -1, 0, 0, ""},
		{"within max_output", 40, 48, -1, 24, 0, ""},
		{"past max_output", 100, 48, -1, 32, 100 - 8 - 48, api.DroppedMaxOutput},
		{"max_output at the head: nothing spills", 100, 16, -1, 0, 100 - 8 - 16, api.DroppedMaxOutput},
		{"the disk full", 100, 48, 0, 0, 100 - 8 - 16, api.DroppedDisk},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, dir := smallKept(t, tt.keep, tt.full)
			s := stream[:tt.size]
			feed(rng, k, s)
			f := k.done()
			if !bytes.Equal(k.Head(), s[:min(16, tt.size)]) {
				t.Errorf("head %q", k.Head())
			}
			file, err := os.ReadFile(dir.path(k.name))
			switch {
			case tt.wantSpilled == 0 && !errors.Is(err, os.ErrNotExist):
				t.Errorf("a spill file was written: %q %v", file, err)
			case tt.wantSpilled > 0 && !bytes.Equal(file, s[16:16+tt.wantSpilled]):
				t.Errorf("spill file %q (%v), want %q", file, err, s[16:16+tt.wantSpilled])
			}
			if tt.wantSpilled == 0 && tt.wantDropped == 0 {
				if f != nil {
					t.Errorf("facts %+v, want none", f)
				}
				return
			}
			if f == nil || f.Bytes != tt.wantSpilled || f.Dropped != tt.wantDropped || f.Why != tt.wantWhy || f.MaxOutput != tt.keep {
				t.Fatalf("facts %+v, want %d spilled, %d dropped (%s)", f, tt.wantSpilled, tt.wantDropped, tt.wantWhy)
			}
			if tt.wantSpilled > 0 {
				if f.SHA256 != sha256.Sum256(file) {
					t.Error("the recorded digest is not the file's")
				}
				if fi, err := os.Stat(dir.path(k.name)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("spill file mode %v (%v), want 0600", fi.Mode(), err)
				}
			}
		})
	}
}

// TestSecretMaskedAcrossTheSpill: a secret's value split across the chunks
// it came in, the end of the in-memory head, the end of the spill and the
// start of the kept end is replaced everywhere the stream is kept: the
// head, the spill file and the end hold the masked stream, never a piece
// of the value that could be read back as it.
func TestSecretMaskedAcrossTheSpill(t *testing.T) {
	value := []byte("s3cr3t-v4lue")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, at := range []int{10, 13, 15, 40, 45, 47, 85, 88} {
		stream := append(bytes.Repeat([]byte("."), at), value...)
		stream = append(stream, bytes.Repeat([]byte("-"), 100-len(stream))...)
		masked := bytes.ReplaceAll(stream, value, []byte("[secret db]"))
		for range 20 {
			k, dir := smallKept(t, 48, -1)
			m := newSecretMask("db", value)
			sm := m.stream(sshexec.Stdout)
			feed(rng, writeFunc(func(p []byte) { k.write(sm.write(p)) }), stream)
			k.write(sm.flush())
			k.done()
			file, _ := os.ReadFile(dir.path(k.name))
			kept := append(append([]byte(nil), k.Head()...), file...)
			if !bytes.Equal(kept, masked[:min(len(masked), 48)]) || !bytes.Equal(k.Tail(), masked[len(masked)-8:]) {
				t.Fatalf("value at %d: kept %q … %q, want the masked stream %q", at, kept, k.Tail(), masked)
			}
			for _, part := range [][]byte{k.Head(), file, k.Tail()} {
				if bytes.Contains(part, value[:6]) {
					t.Fatalf("value at %d: %q holds a piece of the value", at, part)
				}
			}
		}
	}
}

// writeFunc is a function as a kept stream's writer.
type writeFunc func(p []byte)

func (f writeFunc) write(p []byte) { f(p) }

// TestSpillRetention: a spill file is removed spillRetention after its
// action ended; one a stopped gateway left is removed at the next start
// when it is older than that, else when it comes of age.
func TestSpillRetention(t *testing.T) {
	state := t.TempDir()
	clk := clocktest.New(time.Now())
	dir, err := openSpillDir(state, clk)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(state, spillDirName)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spill directory mode %v (%v), want 0700", fi.Mode(), err)
	}
	k := &keptStream{Capture: sshexec.Capture{Limit: 4}, keep: 64, full: true, dir: dir, name: "act_a.stdout", room: func(int64) error { return nil }}
	k.write([]byte("0123456789"))
	if f := k.done(); f == nil || f.Bytes != 6 {
		t.Fatalf("facts %+v", f)
	}
	exists := func(name string) bool { _, err := os.Stat(dir.path(name)); return err == nil }
	clk.Advance(spillRetention - time.Minute)
	if !exists("act_a.stdout") {
		t.Fatal("the spill file went before its time")
	}
	clk.Advance(2 * time.Minute)
	testkit.Eventually(t, func() bool { return !exists("act_a.stdout") }, "the spill file outlived its retention")

	// What a stopped gateway left.
	dir.close()
	for name, age := range map[string]time.Duration{"act_old.stdout": spillRetention + time.Hour, "act_young.stderr": time.Hour} {
		p := dir.path(name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := clk.Now().Add(-age)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	dir, err = openSpillDir(state, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.close()
	if exists("act_old.stdout") || !exists("act_young.stderr") {
		t.Fatalf("at start: old kept %v, young kept %v; want only the young", exists("act_old.stdout"), exists("act_young.stderr"))
	}
	clk.Advance(spillRetention)
	testkit.Eventually(t, func() bool { return !exists("act_young.stderr") }, "the young file outlived its retention")
}
