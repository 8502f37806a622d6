package sshexec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The capture keeps the head up to its limit and, when the stream is
// longer, its last tailLimit bytes, whatever the chunks it came in.
func TestCaptureKeepsHeadAndTail(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ total, limit, tail int }{
		{0, 10, 4}, {10, 10, 4}, {11, 10, 4}, {100, 10, 4}, {1000, 64, 64}, {5000, 100, 333}, {50, 100, 0}, {500, 100, 0},
	} {
		stream := make([]byte, tc.total)
		for i := range stream {
			stream[i] = byte(r.IntN(256))
		}
		c := &Capture{Limit: int64(tc.limit), TailLimit: int64(tc.tail)}
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(3*max(tc.tail, 1)))
			c.Write(rest[:n])
			rest = rest[n:]
		}
		head, tail, n, cut := c.Head(), c.Tail(), c.Total(), c.Truncated()
		if n != int64(tc.total) || !bytes.Equal(head, stream[:min(tc.total, tc.limit)]) || cut != (tc.total > tc.limit) {
			t.Errorf("%+v: head %d bytes, total %d, cut %v", tc, len(head), n, cut)
		}
		var want []byte
		if tc.total > tc.limit && tc.tail > 0 {
			want = stream[max(0, tc.total-tc.tail):]
		}
		if !bytes.Equal(tail, want) {
			t.Errorf("%+v: tail %d bytes, want the last %d", tc, len(tail), len(want))
		}
	}
}
