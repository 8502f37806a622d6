package sshexec

import "io"

// chunkSize is the read size of the output drains, one SSH packet's worth.
const chunkSize = 32 << 10

// capture drains one output stream into a buffer of at most limit bytes,
// counting what it drops, so that the remote command is never blocked on a
// full pipe and memory never grows past the limit.
type capture struct {
	stream Stream
	limit  int64
	out    func(Stream, []byte)

	buf   []byte
	total int64
	// tail is a ring of the last tailLimit bytes; next is where the
	// next byte goes once it is full.
	tailLimit int64
	tail      []byte
	next      int
}

func (c *capture) drain(r io.Reader) {
	p := make([]byte, chunkSize)
	for {
		n, err := r.Read(p)
		if n > 0 {
			c.keep(p[:n])
			if c.out != nil {
				c.out(c.stream, p[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *capture) keep(p []byte) {
	c.keepTail(p)
	c.total += int64(len(p))
	room := c.limit - int64(len(c.buf))
	if room <= 0 {
		return
	}
	p = p[:min(int64(len(p)), room)]
	if need := len(c.buf) + len(p); need > cap(c.buf) {
		// Grow by doubling, but never past the limit.
		n := int(min(max(int64(2*cap(c.buf)), int64(need)), c.limit))
		nb := make([]byte, len(c.buf), n)
		copy(nb, c.buf)
		c.buf = nb
	}
	c.buf = append(c.buf, p...)
}

// keepTail keeps the last tailLimit bytes of the stream in the ring.
func (c *capture) keepTail(p []byte) {
	if c.tailLimit <= 0 {
		return
	}
	limit := int(c.tailLimit)
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

func (c *capture) fill(b *[]byte, n *int64, truncated *bool, tail *[]byte) {
	*b, *n, *truncated = c.buf, c.total, c.total > int64(len(c.buf))
	if *truncated && len(c.tail) > 0 {
		t := make([]byte, 0, len(c.tail))
		t = append(t, c.tail[c.next:]...)
		*tail = append(t, c.tail[:c.next]...)
	}
}
