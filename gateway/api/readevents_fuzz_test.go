package api

import (
	"strings"
	"testing"
)

// FuzzReadEvents: the SSE reader never panics and never returns more data
// than it was given.
func FuzzReadEvents(f *testing.F) {
	f.Add("event: state\ndata: {\"state\":\"running\"}\n\n")
	f.Add("data: a\ndata: b\n\n: c\n\nevent:\n\n")
	f.Add(strings.Repeat("data: x\n", 1000) + "\n")
	f.Fuzz(func(t *testing.T, stream string) {
		total := 0
		ReadEvents(strings.NewReader(stream), func(event string, data []byte) error {
			total += len(data)
			return nil
		})
		if total > len(stream) {
			t.Fatalf("read %d bytes of data from a %d-byte stream", total, len(stream))
		}
	})
}
