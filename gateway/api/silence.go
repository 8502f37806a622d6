package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Heartbeat is how often the gateway writes to an action's event stream
// when it has nothing else to say (an SSE comment, ": keep-alive", which
// every SSE reader skips): while the action waits for a reviewer or a
// connection slot, or runs without output.
const Heartbeat = 15 * time.Second

// DefaultSilence is how long a client waits for the gateway's next byte —
// the connection, the first answer, each event or heartbeat — before it
// gives up: three heartbeats missed.
const DefaultSilence = 3 * Heartbeat

// MinSilence is the shortest silence $AIRLOCK_SILENCE may set.
const MinSilence = time.Second

// SilenceError is a gateway that stopped answering: nothing came from it
// for After (the connection, the first answer, or the next event or
// heartbeat). The request may have reached it: an action it names may
// have run.
type SilenceError struct {
	After time.Duration
	// ActionID is the action the gateway had named, "" if none.
	ActionID string
}

func (e *SilenceError) Error() string {
	s := fmt.Sprintf("the gateway stopped answering: nothing came from it for %s", e.After)
	if e.ActionID != "" {
		s += " (action " + e.ActionID + ")"
	}
	return s
}

// SilenceFromEnv is $AIRLOCK_SILENCE (a Go duration, at least
// MinSilence), else DefaultSilence.
func SilenceFromEnv() (time.Duration, error) {
	v := os.Getenv("AIRLOCK_SILENCE")
	if v == "" {
		return DefaultSilence, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinSilence {
		return 0, fmt.Errorf("$AIRLOCK_SILENCE=%q: want a duration of at least %s, such as 45s (longer than the gateway's %s heartbeat)", v, MinSilence, Heartbeat)
	}
	return d, nil
}

// WithSilence returns a copy of c that gives up on a gateway silent for
// d (zero: DefaultSilence).
func (c *Client) WithSilence(d time.Duration) *Client {
	cc := *c
	cc.silence = d
	return &cc
}

// Silence is how long c waits for the gateway's next byte.
func (c *Client) Silence() time.Duration {
	if c.silence <= 0 {
		return DefaultSilence
	}
	return c.silence
}

// watchdog cancels a request whose gateway stays silent too long; every
// byte either way moves it on.
type watchdog struct {
	d      time.Duration
	t      *time.Timer
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (w *watchdog) kick() { w.t.Reset(w.d) }

func (w *watchdog) stop() {
	w.once.Do(func() {
		w.t.Stop()
		w.cancel(nil)
	})
}

// send does req under a watchdog: connecting, the first answer and each
// read of the body must come within the client's silence, else the
// request ends with a *SilenceError. The response's body stops the
// watchdog when closed.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	d := c.Silence()
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{d: d, cancel: cancel}
	w.t = time.AfterFunc(d, func() { cancel(&SilenceError{After: d}) })
	req = req.WithContext(ctx)
	// A streamed body (an upload) moves the watchdog on as it is sent.
	// One already in memory (GetBody set: JSON) is left as it is: the
	// transport sends a body it does not know as in memory after the
	// headers, in a write of its own, and a gateway that answers from
	// the headers alone (and closes) then breaks that write (EPIPE).
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		req.Body = &watchedBody{ReadCloser: req.Body, w: w, ctx: ctx}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		err = silenced(ctx, err)
		w.stop()
		return nil, err
	}
	w.kick()
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, ctx: ctx, closing: true}
	return resp, nil
}

// watchedBody moves its watchdog on at every byte read, and turns the
// watchdog's cancellation into its *SilenceError.
type watchedBody struct {
	io.ReadCloser
	w       *watchdog
	ctx     context.Context
	closing bool // the response's: closing it ends the watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.kick()
	}
	if err != nil && err != io.EOF {
		err = silenced(b.ctx, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.closing {
		b.w.stop()
	}
	return err
}

// silenced is err, or the *SilenceError that caused it.
func silenced(ctx context.Context, err error) error {
	var se *SilenceError
	if errors.As(context.Cause(ctx), &se) {
		return se
	}
	return err
}
