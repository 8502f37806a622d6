package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxActionObject bounds one action object as JSON: two streams of at most
// outputCap bytes each (the gateway's output cap), each
// byte at most six when escaped ("\u001b"), and a megabyte for the rest.
// maxResponse bounds a JSON response body and maxEventLine one SSE line:
// both carry whole action objects.
const (
	maxActionObject = 2*6*outputCap + 1<<20
	maxResponse     = maxActionObject
	maxEventLine    = maxActionObject
)

// DefaultStateDir is $AIRLOCK_STATE_DIR, else $XDG_STATE_HOME/airlock, else
// ~/.local/state/airlock.
func DefaultStateDir() (string, error) {
	if d := os.Getenv("AIRLOCK_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "airlock"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory: $AIRLOCK_STATE_DIR and $XDG_STATE_HOME are unset and there is no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "airlock"), nil
}

// DefaultSocket is $AIRLOCK_SOCKET, else the socket in the default state
// directory.
func DefaultSocket() (string, error) {
	if s := os.Getenv("AIRLOCK_SOCKET"); s != "" {
		return s, nil
	}
	d, err := DefaultStateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "run", "airlock.sock"), nil
}

// Client talks to a gateway over its local socket or HTTP.
type Client struct {
	base string
	http *http.Client
	auth string
	// silence bounds each wait for the gateway (zero: DefaultSilence).
	silence time.Duration
}

// NewLocalClient returns a client for the local socket, presenting token.
func NewLocalClient(socket, token string) *Client {
	return &Client{
		base: "http://airlock.local",
		auth: "Bearer " + token,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", socket)
			},
			DisableKeepAlives: true,
		}},
	}
}

// NewHTTPClient returns a client for the gateway at baseURL, presenting
// bearer (a run token or a reviewer session token) when not empty.
func NewHTTPClient(baseURL, bearer string) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{}}
	if bearer != "" {
		c.auth = "Bearer " + bearer
	}
	return c
}

// WithHTTP returns a copy of c that sends its requests with hc (a TLS
// configuration of its own: a private CA, a client certificate).
func (c *Client) WithHTTP(hc *http.Client) *Client {
	cc := *c
	cc.http = hc
	return &cc
}

// WithBearer returns a copy of c presenting another bearer token.
func (c *Client) WithBearer(token string) *Client {
	cc := *c
	cc.auth = "Bearer " + token
	return &cc
}

func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	return req, nil
}

// readError turns a non-2xx response into an *Error.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(b, e) != nil || e.Err.Code == "" {
		e.Err = ErrorBody{Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
	}
	return e
}

// Do sends a JSON request and decodes a JSON response into out (if not
// nil). A non-2xx answer is returned as an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxResponse))
	return dec.Decode(out)
}

// Events receives what a streamed action reports while it runs.
type Events struct {
	State  func(StateEvent)
	Output func(stream string, p []byte)
}

// RunAction requests an action and streams its events until it finishes,
// returning the final action object. Cancelling ctx cancels the action.
func (c *Client) RunAction(ctx context.Context, r ActionRequest, ev Events) (*Action, error) {
	if err := r.checkText(); err != nil {
		return nil, err
	}
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/actions", r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, readError(resp)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var a Action
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(&a); err != nil {
			return nil, err
		}
		return &a, nil
	}
	var id string
	state := ev.State
	ev.State = func(s StateEvent) {
		if s.ActionID != "" {
			id = s.ActionID
		}
		if state != nil {
			state(s)
		}
	}
	final, err := readActionEvents(resp.Body, ev)
	if err != nil {
		return nil, namedSilence(err, id)
	}
	if final == nil {
		return nil, errors.New("airlock: the event stream ended before the action finished")
	}
	return final, nil
}

// namedSilence is err, naming action id when it is a *SilenceError.
func namedSilence(err error, id string) error {
	var se *SilenceError
	if id != "" && errors.As(err, &se) {
		return &SilenceError{After: se.After, ActionID: id}
	}
	return err
}

// readActionEvents reads an action's event stream, passing states and
// output to ev, and returns the final object (nil if the stream ended
// without it).
func readActionEvents(body io.Reader, ev Events) (*Action, error) {
	var final *Action
	err := ReadEvents(body, func(event string, data []byte) error {
		switch event {
		case "state":
			var s StateEvent
			if err := json.Unmarshal(data, &s); err != nil {
				return err
			}
			if ev.State != nil {
				ev.State(s)
			}
		case "stdout", "stderr":
			var o OutputEvent
			if err := json.Unmarshal(data, &o); err != nil {
				return err
			}
			b, err := DecodeBytes(o.Data, o.Encoding)
			if err != nil {
				return err
			}
			if ev.Output != nil {
				ev.Output(event, b)
			}
		case "finished":
			var a Action
			if err := json.Unmarshal(data, &a); err != nil {
				return err
			}
			final = &a
			return errStop
		case "error":
			// The error envelope, as an HTTP error's body.
			var e Error
			if err := json.Unmarshal(data, &e); err != nil {
				return err
			}
			if e.Err.Code == "" {
				return fmt.Errorf("airlock: the gateway ended the stream with an error it did not name: %.200s", data)
			}
			return &e
		}
		return nil
	})
	return final, err
}

var errStop = errors.New("stop")

// ReadEvents reads a text/event-stream, calling fn for each event. It stops
// at the end of the stream or when fn returns an error (the sentinel that
// ends a stream normally is not returned).
func ReadEvents(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var event string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 || event != "" {
				if event == "" {
					event = "message"
				}
				if err := fn(event, bytes.TrimSuffix(data.Bytes(), []byte("\n"))); err != nil {
					if errors.Is(err, errStop) {
						return nil
					}
					return err
				}
			}
			event = ""
			data.Reset()
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			data.Write(bytes.TrimPrefix(line[len("data:"):], []byte(" ")))
			data.WriteByte('\n')
		}
	}
	return sc.Err()
}

// Action fetches an action object.
func (c *Client) Action(ctx context.Context, id string) (*Action, error) {
	var a Action
	err := c.Do(ctx, http.MethodGet, "/v1/actions/"+url.PathEscape(id), nil, &a)
	return &a, err
}

// StartAction requests an action without waiting for it (POST
// /v1/actions?wait=false) and returns its id: the action goes on when
// the caller goes, bounded by its approval's deadline and its timeout.
func (c *Client) StartAction(ctx context.Context, r ActionRequest) (string, error) {
	if err := r.checkText(); err != nil {
		return "", err
	}
	var started struct {
		ID string `json:"id"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/actions?wait=false", r, &started); err != nil {
		return "", err
	}
	return started.ID, nil
}

// WaitAction follows an action's events until it finishes, and returns
// it then; when ctx ends first, it returns the action as it is now
// (Outcome empty) without an error. ctx's end does not cancel the action.
func (c *Client) WaitAction(ctx context.Context, id string, ev Events) (*Action, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/actions/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	now := func() (*Action, error) { return c.Action(context.WithoutCancel(ctx), id) }
	resp, err := c.send(req)
	if err != nil {
		if ctx.Err() != nil {
			return now()
		}
		return nil, namedSilence(err, id)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, readError(resp)
	}
	final, err := readActionEvents(resp.Body, ev)
	switch {
	case ctx.Err() != nil && final == nil:
		return now()
	case err != nil:
		return nil, namedSilence(err, id)
	case final == nil:
		return nil, errors.New("airlock: the event stream ended before the action finished")
	}
	return final, nil
}

// Output reads one page of an action's stored output.
func (c *Client) Output(ctx context.Context, id, stream string, offset, limit int64) (*OutputPage, error) {
	var p OutputPage
	q := url.Values{"stream": {stream}, "offset": {strconv.FormatInt(offset, 10)}, "limit": {strconv.FormatInt(limit, 10)}}
	err := c.Do(ctx, http.MethodGet, "/v1/actions/"+url.PathEscape(id)+"/output?"+q.Encode(), nil, &p)
	return &p, err
}

// Targets lists the configured targets.
func (c *Client) Targets(ctx context.Context) ([]Target, error) {
	var t []Target
	err := c.Do(ctx, http.MethodGet, "/v1/targets", nil, &t)
	return t, err
}

// Approvals lists approval requests in state ("pending", or "" for all
// recent ones).
func (c *Client) Approvals(ctx context.Context, state string) ([]Approval, error) {
	path := "/v1/approvals"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	var a []Approval
	err := c.Do(ctx, http.MethodGet, path, nil, &a)
	return a, err
}

// RevealCommand reads the original of a pending request's redacted
// command (reviewer; recorded in the audit log).
func (c *Client) RevealCommand(ctx context.Context, id string) (*RevealedCommand, error) {
	var out RevealedCommand
	if err := c.Do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id)+"/command", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decide approves or denies an approval request.
func (c *Client) Decide(ctx context.Context, id string, d DecisionRequest) (*Approval, error) {
	var a Approval
	err := c.Do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/decision", d, &a)
	return &a, err
}

// CancelAction stops one action (a reviewer's token); the answer is the
// action with its outcome, cancelled.
func (c *Client) CancelAction(ctx context.Context, id, reason string) (*Action, error) {
	var a Action
	err := c.Do(ctx, http.MethodPost, "/v1/actions/"+url.PathEscape(id)+"/cancel", CancelRequest{Reason: reason}, &a)
	return &a, err
}

// Runs lists runs.
func (c *Client) Runs(ctx context.Context) ([]Run, error) {
	var r []Run
	err := c.Do(ctx, http.MethodGet, "/v1/runs", nil, &r)
	return r, err
}

// CreateRun creates a remote run; the token in the answer is shown once.
func (c *Client) CreateRun(ctx context.Context) (*Run, error) {
	var r Run
	err := c.Do(ctx, http.MethodPost, "/v1/runs", struct{}{}, &r)
	return &r, err
}

// EndRun ends a run.
func (c *Client) EndRun(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(id), nil, nil)
}

// Login exchanges a reviewer's name and password for a session token.
func (c *Client) Login(ctx context.Context, reviewer, password string) (*LoginResponse, error) {
	var l LoginResponse
	err := c.Do(ctx, http.MethodPost, "/v1/login", LoginRequest{Reviewer: reviewer, Password: password}, &l)
	return &l, err
}

// DoRaw sends a prepared request (its URL's host is ignored) and returns an
// *Error for a non-2xx answer.
func (c *Client) DoRaw(req *http.Request) error {
	u, err := url.Parse(c.base + req.URL.Path)
	if err != nil {
		return err
	}
	req.URL = u
	req.Host = u.Host
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	return nil
}

// AuditEntries returns up to 1000 audit entries after seq, as exported
// JSON (reviewers).
func (c *Client) AuditEntries(ctx context.Context, after int64) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.Do(ctx, http.MethodGet, "/v1/audit/entries?after="+strconv.FormatInt(after, 10), nil, &raw)
	return raw, err
}

// DenialCause says why this process may not read path: the first
// directory on the way it may not pass, or the file it may not read,
// with its mode, owner and group, and whether this process is in that
// group. "" when no such place is found (the cause is elsewhere).
func DenialCause(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		last := i == len(parts)-1
		mode, what := uint32(unix.X_OK), "pass through"
		if last {
			mode, what = unix.R_OK, "read"
		}
		if unix.Access(cur, mode) == nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(cur, &st) != nil {
			return ""
		}
		owner, group := strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
		member := "not a member"
		if groups, err := os.Getgroups(); err == nil && (slices.Contains(groups, int(st.Gid)) || os.Getegid() == int(st.Gid)) {
			member = "a member"
		}
		return fmt.Sprintf("this user may not %s %s (mode %04o, owner %s, group %s, of which this user is %s)", what, cur, st.Mode&0o7777, owner, group, member)
	}
	return ""
}

// Upload sends a file's size bytes from r to the gateway for a put of
// this caller's run (POST /v1/uploads), and returns what it kept.
func (c *Client) Upload(ctx context.Context, r io.Reader, size int64) (*Upload, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/uploads", r)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, readError(resp)
	}
	var up Upload
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(&up); err != nil {
		return nil, err
	}
	return &up, nil
}

// ErrFileDigest: a got file's bytes do not have the SHA-256 its action
// recorded.
var ErrFileDigest = errors.New("the file's bytes do not match the SHA-256 the gateway recorded")

// Fetch writes the bytes of a successful get (action a) to w, checking
// their size and SHA-256 against the action's: on ErrFileDigest, or any
// error, what w received must not be used.
func (c *Client) Fetch(ctx context.Context, a *Action, w io.Writer) (int64, error) {
	t := a.Transfer
	if t == nil || t.File == "" {
		return 0, errors.New("the action has no file to fetch")
	}
	req, err := c.newRequest(ctx, http.MethodGet, t.File, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return 0, readError(resp)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(resp.Body, t.Size+1))
	switch {
	case err != nil:
		return n, err
	case n != t.Size || hex.EncodeToString(h.Sum(nil)) != t.SHA256:
		return n, ErrFileDigest
	}
	return n, nil
}
