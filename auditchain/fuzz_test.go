package auditchain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecodeLeaf(f *testing.F) {
	for i := 0; i < 5; i++ {
		e := sampleEntry(i)
		e.Seq, e.Time = int64(i), t0
		leaf, err := EncodeLeaf(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(leaf)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, leaf []byte) {
		e, err := DecodeLeaf(leaf)
		if err != nil {
			return
		}
		// Whatever decodes is canonical: it encodes back to the same bytes.
		again, err := EncodeLeaf(e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		if !bytes.Equal(again, leaf) {
			t.Fatalf("non-canonical leaf accepted:\n in %x\nout %x", leaf, again)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add("airlock.test/log\n10\nX2MBGBb0YwIhAKeHzg15OypqRkl7G0iBZAZY/wYnhW8=\n")
	f.Add("o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n")
	f.Add("o\n01\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseCheckpoint(text)
		if err != nil {
			return
		}
		back, err := ParseCheckpoint(c.Text())
		if err != nil || back != c {
			t.Fatalf("checkpoint %+v does not round-trip: %+v, %v", c, back, err)
		}
		if !bytes.HasPrefix([]byte(text), []byte(c.Text())) {
			t.Fatalf("parsed %+v from %q, which does not start with its text", c, text)
		}
	})
}

func FuzzOpenCheckpoint(f *testing.F) {
	o := testOptions(f)
	o.CheckpointEvery = 2
	v := buildLog(f, o, 5)
	data, err := os.ReadFile(o.CheckpointLogPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	notes, _ := SplitNotes(data)
	for _, n := range notes {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		notes, _ := SplitNotes(data)
		for _, n := range notes {
			c, err := OpenCheckpoint(n, v)
			if err == nil && c.Origin != v.Name() {
				t.Fatalf("accepted a checkpoint for origin %q", c.Origin)
			}
		}
		OpenCheckpoint(data, v)
	})
}

// FuzzVerifyCorrupted flips bytes of a real log's database file. Verify
// must never panic; when it finds the log intact, every entry it vouched
// for must still read back.
func FuzzVerifyCorrupted(f *testing.F) {
	o := testOptions(f)
	o.CheckpointEvery = 4
	v := buildLog(f, o, 12)
	data, err := os.ReadFile(o.Path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), byte(0))            // untouched
	f.Add(uint32(100), byte(0xff))       // header
	f.Add(uint32(len(data)-40), byte(1)) // last page, in the records
	f.Add(uint32(len(data)-1), byte(0x80))
	f.Add(uint32(len(data)/2), byte(0x10))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, off uint32, xor byte) {
		b := bytes.Clone(data)
		b[int(off)%len(b)] ^= xor
		path := filepath.Join(dir, "corrupt.db")
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rep, err := Verify(ctx, VerifyOptions{Path: path, Key: v})
		if err != nil || !rep.Intact() {
			return
		}
		r, err := OpenReader(ctx, path)
		if err != nil {
			t.Fatalf("verified intact but cannot be read: %v", err)
		}
		defer r.Close()
		var n int64
		for _, err := range r.Entries(ctx, -1) {
			if err != nil {
				t.Fatalf("verified intact but entry %d does not read: %v", n, err)
			}
			n++
		}
		if n != rep.Entries {
			t.Fatalf("verified %d entries, read %d", rep.Entries, n)
		}
	})
}
