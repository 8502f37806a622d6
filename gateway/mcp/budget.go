package mcp

import (
	"context"
	"unicode/utf8"

	"github.com/airlockgw/airlock/gateway/api"
)

// DefaultOutputBudget is how many bytes of each stream a tool result
// carries by default: its head and its end, half each. The rest stays in
// the output store; get_action pages through it.
const DefaultOutputBudget = 32 << 10

// ActionResult is the structured result of ssh_exec and get_action: the
// action object with its output sized for a model — when a stream is
// longer than the budget, Stdout holds its head, StdoutTail its end, and
// StdoutOmittedBytes counts what is between (for an account whose policy
// is "tail", Stdout holds the end and the omitted bytes come before it)
// — and, while it is in flight, how to follow it.
type ActionResult struct {
	api.Action
	StdoutTail         string `json:"stdout_tail,omitempty"`
	StdoutTailEncoding string `json:"stdout_tail_encoding,omitempty"`
	StdoutOmittedBytes int64  `json:"stdout_omitted_bytes,omitempty"`
	StderrTail         string `json:"stderr_tail,omitempty"`
	StderrTailEncoding string `json:"stderr_tail_encoding,omitempty"`
	StderrOmittedBytes int64  `json:"stderr_omitted_bytes,omitempty"`
	// Follow, while the action is in flight, is how to follow it.
	Follow *Follow `json:"follow,omitempty"`
}

// lastBytes reads the last n bytes of a stored stream of total bytes,
// page by page (a page stops where the store's head ends); nil if they
// cannot all be read.
func lastBytes(ctx context.Context, b Backend, id, stream string, total, n int64) []byte {
	var out []byte
	for off := total - n; off < total; {
		pg, err := b.Output(ctx, id, stream, off, total-off)
		if err != nil || pg.Bytes == 0 || pg.Skipped > 0 {
			return nil
		}
		p, err := api.DecodeBytes(pg.Data, pg.Encoding)
		if err != nil {
			return nil
		}
		out = append(out, p...)
		if pg.NextOffset == nil {
			break
		}
		off = *pg.NextOffset
	}
	return out
}

// sized is a's result with each stream cut to budget bytes: its first and
// last budget/2 bytes, on character boundaries. The end of a stream the
// output store holds only the head of in the object (over its cap) is
// read from the store. A stream whose end cannot be read keeps its head,
// and what is left out is counted.
func sized(ctx context.Context, b Backend, a *api.Action, budget int) *ActionResult {
	r := &ActionResult{Action: *a}
	if a.Outcome == 0 && a.State != api.StateFinished {
		return r
	}
	for _, s := range []struct {
		name          string
		text, enc     *string
		total         int64
		cut           *bool
		tail, tailEnc *string
		omitted       *int64
	}{
		{"stdout", &r.Stdout, &r.StdoutEncoding, a.StdoutBytes, &r.StdoutTruncated, &r.StdoutTail, &r.StdoutTailEncoding, &r.StdoutOmittedBytes},
		{"stderr", &r.Stderr, &r.StderrEncoding, a.StderrBytes, &r.StderrTruncated, &r.StderrTail, &r.StderrTailEncoding, &r.StderrOmittedBytes},
	} {
		view, err := api.DecodeBytes(*s.text, *s.enc)
		if err != nil || len(view) <= budget {
			continue
		}
		if a.OutputPolicy == "tail" {
			// What the account returns is the end: keep the end.
			end := api.StartOnRune(view[len(view)-budget:])
			*s.text, *s.enc = api.EncodeBytes(end)
			*s.omitted = s.total - int64(len(end))
			*s.cut = true
			continue
		}
		half := budget / 2
		head := view[:half]
		for len(head) > 0 && len(head) > half-utf8.UTFMax && !utf8.Valid(head) {
			head = head[:len(head)-1] // end on a character boundary
		}
		var end []byte
		if int64(len(view)) < s.total && a.OutputPolicy == "full" {
			// The object holds the head the store kept: its end is in the
			// store, after the cap.
			end = lastBytes(ctx, b, a.ID, s.name, s.total, int64(half))
		} else {
			end = view[len(view)-half:]
		}
		end = api.StartOnRune(end)
		*s.text, *s.enc = api.EncodeBytes(head)
		*s.tail, *s.tailEnc = api.EncodeBytes(end)
		*s.omitted = s.total - int64(len(head)) - int64(len(end))
		*s.cut = true
	}
	return r
}
