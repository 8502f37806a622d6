package httpapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallBuffers makes the kernel's socket buffers small, so that what a
// server writes waits on the client's reading, not in the kernel.
func smallBuffers(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) {
		if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 8<<10); err == nil {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10)
		}
	})
	return err
}

// eventServer serves one SSE stream written by handle, with each piece's
// deadline timeout, and returns the response body of a client on small
// socket buffers and the handler's error.
func eventServer(t *testing.T, timeout time.Duration, handle func(s *sseWriter) error) (io.ReadCloser, <-chan error) {
	t.Helper()
	errc := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errc <- handle(newSSEWithin(w, timeout))
	}))
	lc := net.ListenConfig{Control: smallBuffers}
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	d := &net.Dialer{Control: smallBuffers}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.Body, errc
}

// A reviewer on a slow link gets a large event whole — the deadline is
// per piece, not per event — and a client that stops reading is cut
// within the deadline.
func TestSlowReaderGetsALargeEvent(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	big := strings.Repeat("x", 1<<20)
	t.Run("slow", func(t *testing.T) {
		t.Parallel()
		body, errc := eventServer(t, timeout, func(s *sseWriter) error {
			if err := s.send("finished", big); err != nil {
				return err
			}
			return s.send("end", "")
		})
		// 32 KiB each 50 ms: 1 MiB takes about 1.6 s, five deadlines.
		var got bytes.Buffer
		p := make([]byte, 32<<10)
		for {
			time.Sleep(50 * time.Millisecond)
			n, err := body.Read(p)
			got.Write(p[:n])
			if err != nil {
				break
			}
		}
		if err := <-errc; err != nil {
			t.Fatalf("the stream was cut: %v", err)
		}
		text := got.String()
		sc := bufio.NewScanner(strings.NewReader(text))
		sc.Buffer(nil, 4<<20)
		var events []string
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events = append(events, name)
			}
		}
		if strings.Join(events, ",") != "finished,end" || !strings.Contains(text, big) {
			t.Errorf("events %v, %d bytes", events, len(text))
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		body, errc := eventServer(t, timeout, func(s *sseWriter) error { return s.send("finished", big) })
		io.ReadFull(body, make([]byte, 64<<10))
		select {
		case err := <-errc:
			if err == nil {
				t.Error("1 MiB was sent to a client that stopped reading after 64 KiB")
			}
		case <-time.After(10 * time.Second):
			t.Error("a client that stopped reading held the handler for 10 s")
		}
	})
}
