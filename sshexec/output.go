package sshexec

import (
	"io"
	"sync/atomic"
)

// chunkSize is the read size of the output drains, one SSH packet's worth.
const chunkSize = 32 << 10

// Capture keeps one output stream within bounded memory: its first Limit
// bytes and, once the stream is longer, its last TailLimit bytes, and
// counts every byte. Run keeps each stream with one; a caller that
// changes the bytes on their way (the gateway hides secrets) keeps what
// it passes on with its own. The zero value keeps nothing and counts.
type Capture struct {
	// Limit is how many bytes of the stream's start are kept.
	Limit int64
	// TailLimit is how many bytes of its end are kept.
	TailLimit int64

	buf   []byte
	total int64
	// tail is a ring of the last TailLimit bytes; next is where the
	// next byte goes once it is full.
	tail []byte
	next int
}

// Write keeps what it must of p; it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	c.keepTail(p)
	c.total += int64(len(p))
	room := c.Limit - int64(len(c.buf))
	if room <= 0 {
		return len(p), nil
	}
	q := p[:min(int64(len(p)), room)]
	if need := len(c.buf) + len(q); need > cap(c.buf) {
		// Grow by doubling, but never past the limit.
		n := int(min(max(int64(2*cap(c.buf)), int64(need)), c.Limit))
		nb := make([]byte, len(c.buf), n)
		copy(nb, c.buf)
		c.buf = nb
	}
	c.buf = append(c.buf, q...)
	return len(p), nil
}

// Total is how many bytes were written.
func (c *Capture) Total() int64 { return c.total }

// Head is the kept start of the stream: at most Limit bytes.
func (c *Capture) Head() []byte { return c.buf }

// Truncated says the stream is longer than its kept start.
func (c *Capture) Truncated() bool { return c.total > int64(len(c.buf)) }

// Tail is the stream's last TailLimit bytes (fewer when it is shorter)
// when the stream is longer than its kept start, else nil.
func (c *Capture) Tail() []byte {
	if !c.Truncated() || len(c.tail) == 0 {
		return nil
	}
	t := make([]byte, 0, len(c.tail))
	t = append(t, c.tail[c.next:]...)
	return append(t, c.tail[:c.next]...)
}

// keepTail keeps the last TailLimit bytes of the stream in the ring.
func (c *Capture) keepTail(p []byte) {
	if c.TailLimit <= 0 {
		return
	}
	limit := int(c.TailLimit)
	if len(p) >= limit {
		c.tail = append(c.tail[:0], p[len(p)-limit:]...)
		c.next = 0
		return
	}
	if room := limit - len(c.tail); room > 0 {
		n := min(room, len(p))
		c.tail = append(c.tail, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(c.tail[c.next:], p)
		p = p[n:]
		c.next = (c.next + n) % limit
	}
}

// capture drains one output stream into a Capture, so that the remote
// command is never blocked on a full pipe and memory never grows past the
// limits.
type capture struct {
	Capture
	stream Stream
	out    func(Stream, []byte)
}

// drain reads r to its end and returns the error that ended it; each
// read that brought bytes leaves a token in progress, when there is room,
// and busy counts the drain while the Output callback has the bytes.
func (c *capture) drain(r io.Reader, progress chan<- struct{}, busy *atomic.Int32) error {
	p := make([]byte, chunkSize)
	for {
		n, err := r.Read(p)
		if n > 0 {
			select {
			case progress <- struct{}{}:
			default:
			}
			c.Write(p[:n])
			if c.out != nil {
				busy.Add(1)
				c.out(c.stream, p[:n])
				busy.Add(-1)
			}
		}
		if err != nil {
			return err
		}
	}
}

func (c *capture) fill(b *[]byte, n *int64, truncated *bool, tail *[]byte) {
	*b, *n, *truncated, *tail = c.Head(), c.Total(), c.Truncated(), c.Tail()
}
