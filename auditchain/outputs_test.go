package auditchain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/google/go-cmp/cmp"
)

func TestOutputStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outputs.db")
	s, err := OpenOutputs(ctx, OutputOptions{Path: path, MaxBlob: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name   string
		data   []byte
		stored []byte
		want   Blob
	}{
		{"empty", nil, []byte{}, Blob{Digest: sha256.Sum256(nil)}},
		{"under the cap", []byte("hello"), []byte("hello"), Blob{Digest: sha256.Sum256([]byte("hello")), Size: 5, Stored: 5}},
		{"at the cap", []byte("12345678"), []byte("12345678"), Blob{Digest: sha256.Sum256([]byte("12345678")), Size: 8, Stored: 8}},
		{"over the cap", []byte("123456789"), []byte("12345678"), Blob{Digest: sha256.Sum256([]byte("12345678")), Size: 9, Stored: 8, Truncated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Put(ctx, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Put (-want +got):\n%s", diff)
			}
			back, err := s.Get(ctx, got.Digest)
			if err != nil || !bytes.Equal(back, tt.stored) {
				t.Errorf("Get = %q, %v; want %q", back, err, tt.stored)
			}
		})
	}
	if _, err := s.Get(ctx, [32]byte{1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown): %v, want ErrNotFound", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("outputs.db mode %04o, want 0600", fi.Mode().Perm())
	}
	b := Blob{Digest: [32]byte{9}, Size: 10, Stored: 8, Truncated: true}
	want := []Field{Bytes("stdout_sha256", b.Digest[:]), Int("stdout_bytes", 10), Int("stdout_stored", 8), Bool("stdout_truncated", true)}
	got, err := FieldsOf(struct {
		Stdout Blob `audit:"stdout"`
	}{b})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a blob's fields (-want +got):\n%s", diff)
	}
}

func TestOutputStoreRefusesSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outputs.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	_, err := OpenOutputs(context.Background(), OutputOptions{Path: path})
	var kfe *securefile.Error
	if !errors.As(err, &kfe) || kfe.Path != path {
		t.Fatalf("OpenOutputs on a 0644 file: %v, want *securefile.Error", err)
	}
}

func TestExportJSON(t *testing.T) {
	rec := Record{
		Entry: Entry{Seq: 3, Time: t0, Kind: KindActionFinished, ActionID: "a", RunID: "r",
			Fields: []Field{Bytes("d", []byte{0xab}), Int("exit_code", 0), Str("outcome", "exited"), Bool("t", false)}},
		Leaf: []byte{1, 2},
	}
	rec.LeafHash[0], rec.Chain[31] = 0xff, 0x01
	got, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":3,"time":"2025-01-02T03:04:05.000000006Z","kind":"action.finished","action_id":"a","run_id":"r",` +
		`"fields":{"d":"ab","exit_code":0,"outcome":"exited","t":false},"leaf":"AQI=",` +
		`"leaf_hash":"/wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",` +
		`"chain_hash":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE="}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("export line (-want +got):\n%s", diff)
	}
}

// The hand-written export encoding must agree with encoding/json.
func TestExportJSONStrings(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x1f\x7f", "tab\tnl\ncr\r", "caf\u00e9", "\xff\xfe", "\u2028\u2029", "<&>", "\U0001F600"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q encodes to invalid JSON %s: %v", s, got, err)
			continue
		}
		ref, _ := json.Marshal(s)
		var want string
		json.Unmarshal(ref, &want)
		if back != want {
			t.Errorf("%q encodes to %s, which decodes to %q, want %q", s, got, back, want)
		}
	}
}

// PutAll stores several outputs at once; empty output is not written but
// reads back.
func TestOutputStorePutAll(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outputs.db")
	s, err := OpenOutputs(ctx, OutputOptions{Path: path, MaxBlob: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blobs, err := s.PutAll(ctx, []byte("stdout bytes"), nil, []byte("err"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 3 || !blobs[0].Truncated || blobs[0].Size != 12 || blobs[0].Stored != 8 || blobs[1].Size != 0 || blobs[2].Stored != 3 {
		t.Fatalf("blobs %+v", blobs)
	}
	for i, want := range []string{"stdout b", "", "err"} {
		got, err := s.Get(ctx, blobs[i].Digest)
		if err != nil || string(got) != want {
			t.Errorf("blob %d: %q, %v; want %q", i, got, err, want)
		}
	}
	var rows int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM blobs`).Scan(&rows); err != nil || rows != 2 {
		t.Errorf("%d rows stored (%v), want 2: empty output is not written", rows, err)
	}
}
