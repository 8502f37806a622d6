package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// silentGateway is what no real gateway can be made to do on demand: a
// socket that accepts and reads, then answers with prefix (nothing, or
// the start of a stream) and never another byte. It stands in for a
// gateway that hangs.
func silentGateway(t *testing.T, prefix string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "airlock.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			if prefix == "" {
				continue
			}
			// Read the request's head, then answer the prefix.
			r := bufio.NewReader(c)
			if _, err := http.ReadRequest(r); err != nil {
				continue
			}
			io.WriteString(c, prefix)
		}
	}()
	return sock
}

const streamHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" +
	"event: state\ndata: {\"state\":\"waiting_approval\",\"action_id\":\"act_silent\",\"kind\":\"call\",\"approval_id\":\"apr_x\"}\n\n"

// runBounded runs f, failing the test if it does not return within
// testkit.Patience (the silence under test is far shorter).
func runBounded(t *testing.T, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(testkit.Patience):
		t.Fatal("the client still waits on a silent gateway")
		return nil
	}
}

// TestSilentGateway: a gateway that accepts and never answers, or answers
// and then goes silent mid-stream, is given up on after the silence, with
// the action named when the gateway had named it.
func TestSilentGateway(t *testing.T) {
	const silence = 300 * time.Millisecond
	req := ActionRequest{Target: "box", Command: "true"}
	for _, tt := range []struct {
		name, prefix, wantID string
	}{
		{"never answers", "", ""},
		{"silent mid-stream", streamHead, "act_silent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewLocalClient(silentGateway(t, tt.prefix), "token").WithSilence(silence)
			var se *SilenceError
			err := runBounded(t, func() error { _, err := c.RunAction(context.Background(), req, Events{}); return err })
			if !errors.As(err, &se) {
				t.Fatalf("RunAction: %v, want a *SilenceError", err)
			}
			if se.ActionID != tt.wantID || se.After != silence {
				t.Errorf("got %+v, want action %q after %s", se, tt.wantID, silence)
			}
			// Every request is bounded the same way.
			if tt.prefix == "" {
				err = runBounded(t, func() error { _, err := c.Targets(context.Background()); return err })
				if !errors.As(err, &se) {
					t.Errorf("Targets: %v, want a *SilenceError", err)
				}
			}
			err = runBounded(t, func() error { _, err := c.WaitAction(context.Background(), "act_silent", Events{}); return err })
			if !errors.As(err, &se) || se.ActionID != "act_silent" {
				t.Errorf("WaitAction: %v, want a *SilenceError naming the action", err)
			}
		})
	}
}

func TestSilenceFromEnv(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want time.Duration
		ok   bool
	}{{"", DefaultSilence, true}, {"2m", 2 * time.Minute, true}, {"1s", time.Second, true}, {"500ms", 0, false}, {"soon", 0, false}} {
		t.Setenv("AIRLOCK_SILENCE", tt.env)
		got, err := SilenceFromEnv()
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("AIRLOCK_SILENCE=%q: %v, %v; want %v (ok %v)", tt.env, got, err, tt.want, tt.ok)
		}
	}
}

// bodyRecorder is a RoundTripper that keeps the body each request went
// out with, and answers 204.
type bodyRecorder struct{ bodies []io.Reader }

func (b *bodyRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b.bodies = append(b.bodies, req.Body)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: req}, nil
}

// A JSON body goes to the transport as the in-memory reader it is, so
// that the headers and the body leave in one write: wrapped in the
// watchdog's reader, the transport flushed the headers first, and a
// gateway that answered from the headers and closed broke the body's
// write (EPIPE: "reviewer disable nobody" failed so under load). A
// streamed body (an upload) is still watched.
func TestInMemoryBodiesLeaveInOneWrite(t *testing.T) {
	rec := &bodyRecorder{}
	c := NewHTTPClient("http://gateway.test", "").WithHTTP(&http.Client{Transport: rec})
	if err := c.Do(context.Background(), http.MethodPost, "/v1/reviewers/nobody/disable", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, watched := rec.bodies[0].(*watchedBody); watched {
		t.Errorf("a JSON body went out as %T, which the transport sends after the headers in a write of its own", rec.bodies[0])
	}
	req, err := http.NewRequest(http.MethodPut, "http://gateway.test/v1/uploads", io.NopCloser(strings.NewReader("streamed")))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.send(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, watched := rec.bodies[1].(*watchedBody); !watched {
		t.Errorf("a streamed body went out as %T, not watched", rec.bodies[1])
	}
}
