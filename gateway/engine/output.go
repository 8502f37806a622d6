package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"unicode/utf8"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// What the output store keeps of a stream: its head, up to the store's cap
// (sshexec's output limit), and — when the stream was longer — its last
// tailKeep bytes, so that the end of any output can be returned.
const (
	// tailSize is what output = "tail" returns of each stream.
	tailSize = 64 << 10
	// tailKeep is how much of a stream's end is kept beyond its head.
	tailKeep = tailSize
)

// streamRef says where one stream of a finished action is.
type streamRef struct {
	head [32]byte
	// tail is the stream's end, when the head does not hold it all.
	tail *[32]byte
	// total is the bytes the command wrote to the stream.
	total int64
	// spill is what was kept past the head in a spill file, and dropped
	// after it (nil: nothing); spillPath is the file, "" when it holds
	// nothing.
	spill     *spillFacts
	spillPath string
}

// spilled is how many bytes the spill file holds.
func (r streamRef) spilled() int64 {
	if r.spillPath == "" {
		return 0
	}
	return r.spill.Bytes
}

// heldOutput says where a finished action's output is, and how much of
// it its account's policy returns.
type heldOutput struct {
	stdout, stderr streamRef
	// stdin is set only for paging the standard input an action sent.
	stdin  streamRef
	policy config.OutputPolicy
}

// storedStream is one stream as stored: its head, its end (nil when the
// head holds it all) and the size the command wrote.
type storedStream struct {
	head, tail []byte
	total      int64
}

// load reads a stream back from the output store.
func (r streamRef) load(ctx context.Context, outputs *auditchain.OutputStore) (storedStream, error) {
	s := storedStream{total: r.total}
	var err error
	if s.head, err = outputs.Get(ctx, r.head); err != nil {
		return s, err
	}
	if r.tail != nil {
		if s.tail, err = outputs.Get(ctx, *r.tail); err != nil {
			return s, err
		}
	}
	return s, nil
}

// tailStart is the offset of the first byte of s.tail in the stream.
func (s storedStream) tailStart() int64 { return s.total - int64(len(s.tail)) }

// end returns the last n bytes of the stream, or as many of them as are
// stored (the end first), starting on a character boundary when the
// bytes are text.
func (s storedStream) end(n int64) []byte {
	src := s.head
	if s.tail != nil {
		src = s.tail
	}
	if int64(len(src)) > n {
		src = api.StartOnRune(src[int64(len(src))-n:])
	}
	return src
}

// pageBytes reads up to limit bytes at offset of stream, from the stored
// head, the spill file or the stored end, whichever holds offset.
func (a *Action) pageBytes(ref streamRef, s storedStream, stream string, offset, limit int64) ([]byte, error) {
	head := int64(len(s.head))
	kept := head + ref.spilled()
	switch {
	case offset < head:
		return s.head[offset:min(head, offset+limit)], nil
	case offset < kept:
		if err := a.checkSpill(ref, stream, head, kept); err != nil {
			return nil, err
		}
		b, err := readSpill(ref.spillPath, offset-head, min(limit, kept-offset))
		if err != nil {
			return nil, a.spillGone(err, stream, head, kept)
		}
		return b, nil
	case s.tail != nil && offset >= s.tailStart():
		return s.tail[offset-s.tailStart() : min(int64(len(s.tail)), offset-s.tailStart()+limit)], nil
	}
	why := fmt.Sprintf("the output store keeps the first %d bytes and the last %d of each stream", head, len(s.tail))
	if d := streamDropped(stream, ref.spill); d != nil {
		why = d.Text
	}
	return nil, refuse(ErrNotFound, fmt.Sprintf("bytes %d to %d of %s are not stored (next stored offset: %d): %s",
		kept, s.tailStart(), stream, s.tailStart(), why))
}

// checkSpill checks, once for each stream of a, that its spill file holds
// what action.finished recorded.
func (a *Action) checkSpill(ref streamRef, stream string, from, to int64) error {
	a.mu.Lock()
	ok := a.spillChecked[stream]
	a.mu.Unlock()
	if ok {
		return nil
	}
	if err := checkSpill(ref.spillPath, ref.spill); err != nil {
		return a.spillGone(err, stream, from, to)
	}
	a.mu.Lock()
	if a.spillChecked == nil {
		a.spillChecked = map[string]bool{}
	}
	a.spillChecked[stream] = true
	a.mu.Unlock()
	return nil
}

// spillGone is the refusal of a page of bytes [from, to) of stream that
// were in a spill file that is gone or changed (err).
func (a *Action) spillGone(err error, stream string, from, to int64) error {
	if errors.Is(err, fs.ErrNotExist) {
		return refuse(ErrNotFound, fmt.Sprintf("bytes %d to %d of %s were kept on the disk of the gateway that ran the action for %s after it ended, and are gone "+
			"(removed after that time, or kept by another replica of the gateway: ask through that one); the stored end of the stream can still be read", from, to, stream, spillRetention))
	}
	return refuse(ErrUnavailable, fmt.Sprintf("bytes %d to %d of %s cannot be returned: the gateway's spill file for them cannot be read or does not hold what the audit log recorded (%v); tell the operator",
		from, to, stream, err))
}

// policyView returns what the policy lets the agent see of s, and whether
// that is less than the command wrote.
func (s storedStream) policyView(p config.OutputPolicy) ([]byte, bool) {
	switch p {
	case config.OutputNone:
		return nil, s.total > 0
	case config.OutputTail:
		b := s.end(tailSize)
		return b, int64(len(b)) < s.total
	}
	return s.head, int64(len(s.head)) < s.total
}

// readable is the range of the stream the policy lets the agent page
// through: [from, s.total); none for OutputNone.
func readable(total int64, p config.OutputPolicy) (from int64, ok bool) {
	switch p {
	case config.OutputNone:
		return 0, false
	case config.OutputTail:
		return max(0, total-tailSize), true
	}
	return 0, true
}

// outputView fills o's stdout and stderr with what the account's policy p
// returns of the stored output, and flags what the agent does not get: cut
// by the policy, or over the store's cap.
func outputView(o *api.Action, stdout, stderr storedStream, p config.OutputPolicy) {
	out, outCut := stdout.policyView(p)
	errb, errCut := stderr.policyView(p)
	o.Stdout, o.StdoutEncoding = api.EncodeBytes(out)
	o.Stderr, o.StderrEncoding = api.EncodeBytes(errb)
	o.StdoutBytes, o.StderrBytes = stdout.total, stderr.total
	o.StdoutTruncated, o.StderrTruncated = outCut, errCut
	o.OutputPolicy = string(p)
}

// resultStreams are the streams sshexec returned, as they are stored.
func resultStreams(r *sshexec.Result) (stdout, stderr storedStream) {
	return storedStream{head: r.Stdout, tail: r.StdoutTail, total: r.StdoutBytes},
		storedStream{head: r.Stderr, tail: r.StderrTail, total: r.StderrBytes}
}

// MaxPage bounds one page of output.
const MaxPage = 1 << 20

// Page reads bytes [offset, offset+limit) of one stream of a finished
// action — stdout, stderr, or the stdin it sent — under the read rules of
// its account's output policy: all of it for "full", its last 64 KiB for
// "tail", nothing for "none"; and only what the output store keeps (the
// head up to its cap, and the end).
func (a *Action) Page(ctx context.Context, stream string, offset, limit int64) (api.OutputPage, error) {
	return a.page(ctx, stream, offset, limit, "")
}

// ReviewerPage is Page for a reviewer: everything the store keeps,
// whatever the account's policy returns to agents. The caller records the
// read.
func (a *Action) ReviewerPage(ctx context.Context, stream string, offset, limit int64) (api.OutputPage, error) {
	return a.page(ctx, stream, offset, limit, config.OutputFull)
}

// page reads a page under the account's policy, or under rules when set.
func (a *Action) page(ctx context.Context, stream string, offset, limit int64, rules config.OutputPolicy) (api.OutputPage, error) {
	a.mu.Lock()
	out, finished, policy, obj := a.out, a.finished, a.policy, a.obj
	a.mu.Unlock()
	if out != nil {
		policy = out.policy
	}
	if rules != "" {
		policy = rules
	}
	if stream == "stdin" && finished {
		// What the action sent is kept whole; it reads like output.
		var d [32]byte
		if n, err := hex.Decode(d[:], []byte(obj.StdinSHA256)); err != nil || n != len(d) {
			return api.OutputPage{ActionID: a.id, Stream: stream}, refuse(ErrNotFound, "action "+a.id+" sent no standard input")
		}
		out = &heldOutput{stdin: streamRef{head: d, total: obj.StdinBytes}}
	}
	pg := api.OutputPage{ActionID: a.id, Stream: stream, Offset: offset}
	var ref streamRef
	switch {
	case !finished:
		return pg, refuse(ErrNotFinished, "action "+a.id+" has not finished; its output can be paged once it has")
	case stream != "stdout" && stream != "stderr" && stream != "stdin":
		return pg, refuse(ErrInvalid, fmt.Sprintf("stream must be stdout, stderr or stdin, not %q", stream))
	case offset < 0:
		return pg, refuse(ErrInvalid, "offset must be 0 or more")
	case limit < 1 || limit > MaxPage:
		return pg, refuse(ErrInvalid, fmt.Sprintf("limit must be from 1 to %d bytes", MaxPage))
	case out == nil:
		return pg, refuse(ErrNotFound, "no output is stored for action "+a.id)
	case stream == "stdout":
		ref = out.stdout
	case stream == "stdin":
		ref = out.stdin
	default:
		ref = out.stderr
	}
	pg.Total = ref.total
	from, ok := readable(ref.total, policy)
	switch {
	case !ok:
		return pg, refuse(ErrForbidden, fmt.Sprintf("the account's output policy (%s) returns no output; its size is %d bytes", policy, ref.total))
	case offset < from:
		return pg, refuse(ErrForbidden, fmt.Sprintf("the account's output policy (%s) returns only the last %d bytes of %s: offsets from %d", policy, tailSize, stream, from))
	case offset >= ref.total:
		pg.Offset = ref.total
		return pg, nil // past the end: an empty last page
	}
	s, err := ref.load(ctx, a.outputs)
	if err != nil {
		return pg, fmt.Errorf("reading the %s of %s from the output store: %w", stream, a.id, err)
	}
	b, err := a.pageBytes(ref, s, stream, offset, limit)
	if err != nil {
		return pg, err
	}
	if end := offset + int64(len(b)); end < ref.total && !utf8.Valid(b) {
		// A page that ends inside a character: end it before, when that
		// makes it text; the next page starts there.
		for i := 1; i < utf8.UTFMax && i < len(b); i++ {
			if utf8.Valid(b[:len(b)-i]) {
				b = b[:len(b)-i]
				break
			}
		}
	}
	pg.Data, pg.Encoding = api.EncodeBytes(b)
	pg.Bytes = int64(len(b))
	if next := offset + pg.Bytes; next < ref.total {
		if kept := int64(len(s.head)) + ref.spilled(); s.tail != nil && next == kept && next < s.tailStart() {
			next = s.tailStart() // skip what is not stored
			pg.Skipped = s.tailStart() - kept
		}
		pg.NextOffset = &next
	}
	return pg, nil
}
