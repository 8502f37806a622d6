package sshtest

import (
	"io"
	"time"
)

// CutReader gives data, and calls cut (say, SSHD.KillSessions) once half
// of it was read: a transfer whose peer goes away mid-stream. It pauses
// briefly after the cut so that the close reaches the reader's side
// before the rest is sent.
func CutReader(data []byte, cut func()) io.Reader {
	return &cutReader{data: data, cut: cut}
}

type cutReader struct {
	data []byte
	off  int
	cut  func()
	done bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.off >= len(c.data) {
		return 0, io.EOF
	}
	if !c.done && c.off >= len(c.data)/2 {
		c.done = true
		c.cut()
		time.Sleep(100 * time.Millisecond)
	}
	n := copy(p, c.data[c.off:min(len(c.data), c.off+32<<10)])
	c.off += n
	return n, nil
}
