package web

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

const (
	testReviewer = "alice"
	testPassword = testkit.Password
)

// t0 is the fixed "now" of rendered pages.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fakeReviewer string

func (r fakeReviewer) Name() string { return string(r) }

// fakeBackend holds cards, runs and actions in memory and records what the
// pages asked of it.
type fakeBackend struct {
	mu        sync.Mutex
	linkUsed  bool
	now       func() time.Time
	cards     []Card // pending, newest first
	decided   map[string]Card
	decisions []Decision
	runs      []Run
	revoked   []string
	actions   map[string]Action
	outputs   map[string]Output
	reads     []string
	originals map[string]string // approval id → original of a redacted command
	failures  map[string]int
	disabled  map[string]bool
	decideErr error
	verified  *Verification
}

func newFake(now func() time.Time) *fakeBackend {
	return &fakeBackend{now: now, decided: map[string]Card{}, actions: map[string]Action{}, outputs: map[string]Output{}, originals: map[string]string{}, failures: map[string]int{}, disabled: map[string]bool{}}
}

// fakeLink is the one login link the fake backend knows; it works once.
const fakeLink = "link-0123456789abcdef"

func (f *fakeBackend) LoginLink(ctx context.Context, token, addr string) (Reviewer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token != fakeLink || f.linkUsed {
		return nil, ErrBadCredentials
	}
	f.linkUsed = true
	return fakeReviewer(testReviewer), nil
}

func (f *fakeBackend) Login(ctx context.Context, name, password, device, addr string) (Reviewer, Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures[name] >= 3 {
		return nil, Device{}, ErrRateLimited
	}
	if name != testReviewer || password != testPassword {
		f.failures[name]++
		return nil, Device{}, ErrBadCredentials
	}
	return fakeReviewer(name), Device{Proof: "device-of-" + name, Expires: f.now().Add(90 * 24 * time.Hour)}, nil
}

func (f *fakeBackend) Enabled(ctx context.Context, rv Reviewer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.disabled[rv.Name()]
}

func (f *fakeBackend) Pending(ctx context.Context) ([]Card, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Card(nil), f.cards...), nil
}

func (f *fakeBackend) add(c Card) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cards = append([]Card{c}, f.cards...)
}

func (f *fakeBackend) Decide(ctx context.Context, rv Reviewer, d Decision) (Card, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, d)
	if f.decideErr != nil {
		return Card{}, f.decideErr
	}
	if _, ok := f.decided[d.RequestID]; ok {
		return Card{}, ErrAlreadyDecided
	}
	for i, c := range f.cards {
		if c.ID != d.RequestID {
			continue
		}
		if c.Digest != d.Digest {
			return Card{}, ErrChanged
		}
		if !f.now().Before(c.ExpiresAt) {
			return Card{}, ErrExpired
		}
		c.Status, c.DecidedBy, c.Reason = "approved", rv.Name(), d.Reason
		if !d.Approve {
			c.Status = "denied"
		}
		f.cards = append(f.cards[:i], f.cards[i+1:]...)
		f.decided[c.ID] = c
		return c, nil
	}
	return Card{}, ErrNotFound
}

func (f *fakeBackend) Runs(ctx context.Context) ([]Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Run(nil), f.runs...), nil
}

func (f *fakeBackend) Cancel(ctx context.Context, rv Reviewer, id, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.actions[id]
	switch {
	case !ok:
		return ErrNotFound
	case a.Outcome != "":
		return ErrFinished
	}
	a.Outcome, a.Detail = "cancelled", "cancelled by reviewer "+rv.Name()+": "+reason
	f.actions[id] = a
	return nil
}

func (f *fakeBackend) Revoke(ctx context.Context, rv Reviewer, id, note string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.runs {
		if f.runs[i].ID == id {
			if !f.runs[i].Active() {
				return ErrRunEnded
			}
			f.runs[i].State, f.runs[i].EndedBy, f.runs[i].EndNote, f.runs[i].EndReason = "ended", rv.Name(), note, "revoked"
			f.revoked = append(f.revoked, id)
			return nil
		}
	}
	return ErrNotFound
}

func (f *fakeBackend) Action(ctx context.Context, id string) (Action, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.actions[id]
	if !ok {
		return Action{}, ErrNotFound
	}
	return a, nil
}

func (f *fakeBackend) ReadOutput(ctx context.Context, rv Reviewer, id string) (Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.outputs[id]
	if !ok {
		return Output{}, ErrNotFound
	}
	f.reads = append(f.reads, rv.Name()+" read "+id)
	return o, nil
}

func (f *fakeBackend) RevealCommand(ctx context.Context, rv Reviewer, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd, ok := f.originals[id]
	if !ok {
		return "", ErrNotFound
	}
	f.reads = append(f.reads, rv.Name()+" revealed "+id)
	return cmd, nil
}

func (f *fakeBackend) AuditStatus(ctx context.Context) (AuditStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return AuditStatus{
		Origin: "airlock.example/gw-1", Entries: 120, Uncovered: 20,
		LastCheckpoint: &Checkpoint{Size: 100, Note: "airlock.example/gw-1\n100\nq0t3…=\n\n— airlock.example/gw-1 Az3…\n"},
		LastVerify:     f.verified,
		Latest: []Entry{{Seq: 119, Time: t0, Kind: "action.requested", ActionID: "act_abc", RunID: "run_" + strings.Repeat("1", 32),
			Fields: []Field{{"command", "echo \u202ehi"}, {"target", "web-1"}}}},
	}, nil
}

func (f *fakeBackend) VerifyAudit(ctx context.Context, rv Reviewer) (Verification, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := Verification{At: f.now(), By: rv.Name(), Intact: true, Entries: 120, Verified: 120, Checkpoints: 1, Covered: 100, Uncovered: 20,
		Notes: []string{"1 entry has a time earlier than the entry before"}}
	f.verified = &v
	return v, nil
}

// ids makes well-formed ids from a name.
func reqID(name string) string {
	return fmt.Sprintf("apr_%x", sha256.Sum256([]byte(name)))[:36]
}

func runID(name string) string {
	return fmt.Sprintf("run_%x", sha256.Sum256([]byte("run"+name)))[:36]
}

func digestOf(name string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte("digest"+name)))
}

func localRun(name string) *Run {
	return &Run{
		ID: runID(name), State: "pending", Kind: "local", Requester: "dev", CreatedAt: t0.Add(-5 * time.Minute), Actions: 3,
		Process: &Process{PID: 4242, StartTime: 987654, Exe: "/usr/bin/python3.11",
			SHA256: "5f1c0c3b0e6f8a0d2b8a9d3f4e5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6",
			Argv:   []string{"python3", "agent.py", "--task", "deploy web"}, Cwd: "/home/dev/agent", UID: 1000, User: "dev",
			Parents: []Parent{{PID: 4100, UID: 1000, Comm: "bash", Exe: "/usr/bin/bash"}, {PID: 900, Comm: "sshd", Exe: "/usr/sbin/sshd"}, {PID: 1, Comm: "systemd", Exe: "/usr/lib/systemd/systemd"}}},
		Recent: []ActionSummary{{ID: "act_aaaabbbbccccdddd", Target: "web-1", Account: "deploy", Command: "uptime", State: "finished", Outcome: "exited", ExitCode: new(int), RequestedAt: t0.Add(-4 * time.Minute)}},
	}
}

func callCard(name, command string) Card {
	return Card{
		ID: reqID(name), Kind: "call", Status: "pending", RunID: runID(name), Target: "web-1", Address: "10.0.0.24:22",
		HostKeys: []string{"SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8"}, Account: "deploy", Command: command,
		Timeout: time.Minute, Digest: digestOf(name), RequestedAt: t0.Add(-10 * time.Second), ExpiresAt: t0.Add(110 * time.Second),
		Requester: "dev", Run: localRun(name), Waiting: []string{"act_waitingaction" + strings.ToLower(name[:1])},
	}
}

func runCard(name, command string) Card {
	return Card{
		ID: reqID(name), Kind: "run", Status: "pending", RunID: runID(name), Target: "build-box", Address: "10.0.0.30:22",
		HostKeys: []string{"SHA256:Zm9vYmFyYmF6cXV4cXV1eHF1dXpxdXV4cXV1eHF1dXo"}, KnownHosts: true, Account: "ci", Command: command,
		Timeout: 5 * time.Minute, Digest: digestOf(name), RequestedAt: t0.Add(-30 * time.Second), ExpiresAt: t0.Add(90 * time.Second),
		Requester: "remote:ci-bot@10.0.0.5",
		Run:       &Run{ID: runID(name), State: "pending", Kind: "remote", Requester: "remote:ci-bot@10.0.0.5", CreatedAt: t0.Add(-time.Minute)},
		TTLs:      []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour}, DefaultTTL: time.Hour,
	}
}

// testServer serves h and returns a client that keeps cookies and does not
// follow redirects.
func testServer(t *testing.T, h http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, newClient(t)
}

func newClient(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// formToken fetches a page and returns the CSRF token of its first form.
func formToken(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	res, body := get(t, c, u)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("GET %s (%d): no CSRF field in\n%s", u, res.StatusCode, body)
	}
	return m[1]
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res, readAll(t, res)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res, readAll(t, res)
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// login logs c in as the test reviewer.
func login(t *testing.T, c *http.Client, base string) {
	t.Helper()
	tok := formToken(t, c, base+"/ui/login")
	res, body := post(t, c, base+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {testReviewer}, "password": {testPassword}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/pending" {
		t.Fatalf("login: %d %s\n%s", res.StatusCode, res.Header.Get("Location"), body)
	}
}

// lastDecision is the last decision the backend was asked for.
func (f *fakeBackend) lastDecision() Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.decisions) == 0 {
		return Decision{}
	}
	return f.decisions[len(f.decisions)-1]
}
