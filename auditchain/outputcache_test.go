package auditchain

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOutputStoreReadsABlobOnceWhilePaged: a long blob read again and
// again (an agent paging a long output) is read from the database and
// checked once; what later reads return is the checked copy, so a row
// damaged in the meantime is not served — and once the cache lets go,
// the damage is found. Small blobs are read each time.
func TestOutputStoreReadsABlobOnceWhilePaged(t *testing.T) {
	ctx := context.Background()
	s, err := OpenOutputs(ctx, OutputOptions{Path: filepath.Join(t.TempDir(), "outputs.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	small := []byte("a few bytes")
	lb, err := s.Put(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := s.Put(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Blob{lb, sb} {
		if _, err := s.Get(ctx, b.Digest); err != nil {
			t.Fatal(err)
		}
	}
	// Damage both rows behind the store's back.
	if _, err := s.db.ExecContext(ctx, `UPDATE blobs SET data = ?`, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, lb.Digest); err != nil || !bytes.Equal(got, long) {
		t.Errorf("the long blob read again: %d bytes, %v; want the checked copy", len(got), err)
	}
	if _, err := s.Get(ctx, sb.Digest); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("the small blob read again: %v, want the damage found", err)
	}
	s.cache.clear()
	if _, err := s.Get(ctx, lb.Digest); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("the long blob after the cache let go: %v, want the damage found", err)
	}
}

// TestBlobCacheBounds: the cache holds at most its byte cap, dropping the
// least recently used blob first, and empties itself when idle.
func TestBlobCacheBounds(t *testing.T) {
	c := &blobCache{max: 3 << 20, idle: 50 * time.Millisecond}
	blob := func(b byte) ([32]byte, []byte) { return [32]byte{b}, bytes.Repeat([]byte{b}, 1<<20) }
	d1, b1 := blob(1)
	d2, b2 := blob(2)
	d3, b3 := blob(3)
	d4, b4 := blob(4)
	c.put(d1, b1)
	c.put(d2, b2)
	c.put(d3, b3)
	c.get(d1) // 1 is now the most recent: 2 goes first
	c.put(d4, b4)
	for _, tc := range []struct {
		d    [32]byte
		want bool
	}{{d1, true}, {d2, false}, {d3, true}, {d4, true}} {
		if _, ok := c.get(tc.d); ok != tc.want {
			t.Errorf("blob %d cached: %v, want %v", tc.d[0], ok, tc.want)
		}
	}
	c.mu.Lock()
	n := c.bytes
	c.mu.Unlock()
	if n != 3<<20 {
		t.Errorf("cache holds %d bytes, want %d", n, 3<<20)
	}
	big := bytes.Repeat([]byte{5}, 4<<20)
	if c.put([32]byte{5}, big); func() bool { _, ok := c.get([32]byte{5}); return ok }() {
		t.Error("a blob over the cap was cached")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		empty := len(c.ents) == 0 && c.bytes == 0
		c.mu.Unlock()
		if empty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept its blobs past its idle time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
