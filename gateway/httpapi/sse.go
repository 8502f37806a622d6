package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// writePiece is the most a client is given writeTimeout to take: at the
// slowest, about 2 KB/s.
const writePiece = 64 << 10

// paced writes to a client in pieces of at most writePiece bytes, each
// within its own deadline: a client that stops reading is cut within the
// deadline, one that reads slowly gets a response of any size. (One
// deadline for a whole large response, an action's 8 MiB of output or
// an event that carries it, would cut a reader on a slow link that was
// still taking it.)
type paced struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func newPaced(w http.ResponseWriter, timeout time.Duration) *paced {
	return &paced{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (p *paced) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), writePiece)
		p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
		m, err := p.w.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}

// flush sends what is buffered, within the deadline.
func (p *paced) flush() error {
	p.rc.SetWriteDeadline(time.Now().Add(p.timeout))
	return p.rc.Flush()
}

// sseWriter writes server-sent events, each piece within its deadline.
type sseWriter struct {
	p *paced
}

func newSSE(w http.ResponseWriter) *sseWriter { return newSSEWithin(w, writeTimeout) }

// newSSEWithin is newSSE with each piece's deadline given.
func newSSEWithin(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{p: newPaced(w, timeout)}
}

func (s *sseWriter) send(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	// In pieces: a finished event carries whole outputs, and formatting
	// would copy them once more.
	for _, piece := range [][]byte{[]byte("event: " + name + "\ndata: "), b, []byte("\n\n")} {
		if _, err := s.p.Write(piece); err != nil {
			return err
		}
	}
	return s.p.flush()
}

func (s *sseWriter) comment() error {
	if _, err := io.WriteString(s.p, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.p.flush()
}
