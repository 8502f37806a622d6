package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec/sshtest"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/notify"
	"github.com/airlockgw/airlock/gateway/web"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "rewrite the committed screenshots under web/testdata/screenshots")

// screenshotDir is where committed screenshots go under -update-screenshots.
func screenshotDir() string {
	if *updateScreenshots {
		return filepath.Join("web", "testdata", "screenshots")
	}
	return ""
}

// shownText is what the page shows of s (see web.Reveal).
func shownText(s string) string {
	var b strings.Builder
	for _, seg := range web.Reveal(s) {
		b.WriteString(seg.Text)
		if seg.Break {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// pendingFor waits for the pending request whose command is cmd.
func (g *testGateway) pendingFor(cmd string) engine.Request {
	g.t.Helper()
	var found engine.Request
	testkit.EventuallyErr(g.t, func() error {
		reqs, err := g.srv.eng.Review().Pending(context.Background())
		if err != nil {
			return testkit.Stop(err)
		}
		for _, q := range reqs {
			if q.Command == cmd {
				found = q
				return nil
			}
		}
		return fmt.Errorf("%d other requests pending", len(reqs))
	}, "no pending request for %q", cmd)
	return found
}

// remoteAgent creates a remote run with a new agent token of name and
// returns a client holding the run's token.
func (g *testGateway) remoteAgent(name string) (*api.Client, api.Run) {
	g.t.Helper()
	run, err := g.agentClient(g.t, name).CreateRun(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	return api.NewHTTPClient(g.base, run.Token), *run
}

// agentClient is an HTTP client presenting a new agent token for name,
// issued as an operator would (airlock agent add).
func (g *testGateway) agentClient(t testing.TB, name string) *api.Client {
	t.Helper()
	a, err := g.srv.eng.Admin().AddAgent(context.Background(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewHTTPClient(g.base, a.Token)
}

// uiClient logs in through the login form and returns a client that keeps
// the session cookie and does not follow redirects.
func uiClient(t *testing.T, base string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tok := uiCSRF(t, c, base+"/ui/login")
	res, err := c.PostForm(base+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {testReviewer}, "password": {testkit.Password}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d", res.StatusCode)
	}
	return c
}

var uiCSRFField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func uiCSRF(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := uiCSRFField.FindSubmatch(b)
	if m == nil {
		t.Fatalf("GET %s: %d, no CSRF field", u, res.StatusCode)
	}
	return string(m[1])
}

func TestUIRefusesAgentCredentials(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	_, run := g.remoteAgent("probe")
	ctl, err := api.ReadControl(g.cfg.Listen.Socket)
	if err != nil {
		t.Fatal(err)
	}
	local := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", g.cfg.Listen.Socket)
	}}}
	login, err := api.NewHTTPClient(g.base, "").Login(context.Background(), testReviewer, testkit.Password)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		base   string
		bearer string
	}{
		{"local socket with the local token", local, "http://airlock.local", ctl.Token},
		{"local socket without a token", local, "http://airlock.local", ""},
		{"run token", http.DefaultClient, g.base, run.Token},
		{"reviewer API token", http.DefaultClient, g.base, login.Token},
	} {
		for _, path := range []string{"/ui/pending", "/ui/login", "/ui/runs", "/ui/audit"} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				req, _ := http.NewRequest(method, tc.base+path, strings.NewReader(""))
				if tc.bearer != "" {
					req.Header.Set("Authorization", "Bearer "+tc.bearer)
				}
				res, err := tc.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s: %s %s: status %d, want 401 or 403", tc.name, method, path, res.StatusCode)
				}
				if strings.Contains(string(body), "<form") {
					t.Errorf("%s: %s %s served a page", tc.name, method, path)
				}
			}
		}
	}
	// And the other way round: a browser session is no API credential.
	c := uiClient(t, g.base)
	res, err := c.Get(g.base + "/v1/approvals")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session cookie reached the API: status %d", res.StatusCode)
	}
}

// TestUILoginRateLimited: ten wrong passwords from one address within
// the minute block the address, in the page and on the API. The clock is
// the test's, so that the minute is not used up by slow password checks
// on a loaded machine; it moves only to let each check past the name's
// five free failures reach its slot (1, 2, 4, 8 and 16 s, 31 s in all).
func TestUILoginRateLimited(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	status := 0
	for i := range 11 {
		if i >= 5 && i < 10 {
			clk.Advance(time.Second << (i - 5))
		}
		tok := uiCSRF(t, c, g.base+"/ui/login")
		res, err := c.PostForm(g.base+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {"mallory"}, "password": {"not the password"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		status = res.StatusCode
	}
	if status != http.StatusTooManyRequests {
		t.Errorf("after 11 wrong passwords: status %d, want 429", status)
	}
	// The address is now blocked for every name, on the API too.
	if _, err := api.NewHTTPClient(g.base, "").Login(context.Background(), testReviewer, testkit.Password); err == nil || err.(*api.Error).Err.Code != api.CodeRateLimited {
		t.Errorf("API login from the blocked address: %v, want rate_limited", err)
	}
}

func TestUIOutputReadIsAudited(t *testing.T) {
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	res := g.runAsync(api.ActionRequest{Target: "box-none", Command: "echo secret-output; echo err >&2"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "" {
		t.Fatalf("action: %+v %v (output policy none: the agent sees nothing)", r.a, r.err)
	}
	c := uiClient(t, g.base)
	tok := uiCSRF(t, c, g.base+"/ui/actions/"+r.a.ID)
	resp, err := c.PostForm(g.base+"/ui/actions/"+r.a.ID+"/output", url.Values{"csrf": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "secret-output") {
		t.Fatalf("output page: status %d, output missing", resp.StatusCode)
	}
	recs, err := g.srv.eng.Audit().Reader().ActionEntries(context.Background(), r.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		if rec.Kind == auditchain.KindOutputRead {
			who, _ := rec.Field("reviewer")
			found = who == testReviewer && rec.RunID == r.a.RunID
		}
	}
	if !found {
		t.Errorf("no output.read entry by %s for %s", testReviewer, r.a.ID)
	}
	// Without the CSRF token nothing is read, and nothing recorded.
	resp, err = c.PostForm(g.base+"/ui/actions/"+r.a.ID+"/output", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	recs2, _ := g.srv.eng.Audit().Reader().ActionEntries(context.Background(), r.a.ID)
	if resp.StatusCode != http.StatusForbidden || len(recs2) != len(recs) {
		t.Errorf("a CSRF-less read: status %d, %d new entries", resp.StatusCode, len(recs2)-len(recs))
	}
	g.verifyAudit()
}

// webhook records what a notification endpoint receives; the first fail
// requests are answered 503.
type webhook struct {
	mu    sync.Mutex
	fail  int
	calls []webhookCall
}

type webhookCall struct {
	header http.Header
	body   []byte
	status int
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	status := http.StatusNoContent
	if h.fail > 0 {
		h.fail--
		status = http.StatusServiceUnavailable
	}
	h.calls = append(h.calls, webhookCall{r.Header.Clone(), body, status})
	w.WriteHeader(status)
}

// delivered returns the accepted notifications of an event.
func (h *webhook) delivered(event string) []webhookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []webhookCall
	for _, c := range h.calls {
		if c.status/100 == 2 && c.header.Get("X-Airlock-Event") == event {
			out = append(out, c)
		}
	}
	return out
}

func TestUIWebhookNotifies(t *testing.T) {
	s := sharedSSHD(t)
	hook := &webhook{fail: 2}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	secret := "0123456789abcdef-webhook-secret"
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{extraConfig: fmt.Sprintf("notify {\n  url = %q\n  secret_file = %q\n}\n", srv.URL+"/hook", secretFile)})
	cmd := "echo notify-me --password=hunter2"
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	// The command holds a password: reviewers and records see it redacted.
	q := g.pendingFor("echo notify-me --password=[redacted:assignment]")
	waitFor := func(event string) webhookCall {
		t.Helper()
		var call webhookCall
		testkit.Eventually(t, func() bool {
			d := hook.delivered(event)
			if len(d) > 0 {
				call = d[0]
			}
			return len(d) > 0
		}, "no %s notification delivered", event)
		return call
	}
	req := waitFor("approval.requested")
	if _, err := g.reviewer.Decide(context.Background(), q.ID, api.DecisionRequest{Decision: "approve", Digest: q.Digest}); err != nil {
		t.Fatal(err)
	}
	dec := waitFor("approval.decided")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v", r.a, r.err)
	}

	for name, c := range map[string]webhookCall{"requested": req, "decided": dec} {
		// The signature covers timestamp and body with the shared secret.
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(c.header.Get("X-Airlock-Timestamp") + "."))
		mac.Write(c.body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); c.header.Get("X-Airlock-Signature") != want {
			t.Errorf("%s: signature %q, want %q", name, c.header.Get("X-Airlock-Signature"), want)
		}
		if c.header.Get("Content-Type") != "application/json" || c.header.Get("X-Airlock-Delivery") == "" {
			t.Errorf("%s: headers %v", name, c.header)
		}
		for _, secretish := range []string{secret, "hunter2", cmd, testkit.Password, g.srv.local.token.hex} {
			if strings.Contains(string(c.body), secretish) || strings.Contains(fmt.Sprint(c.header), secretish) {
				t.Errorf("%s: the notification carries %q", name, secretish)
			}
		}
	}
	var n notify.Notification
	if err := json.Unmarshal(req.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Event != "approval.requested" || n.ApprovalID != q.ID || n.Kind != "call" || n.State != "pending" || n.Target != "box-call" ||
		n.URL != g.base+"/ui/pending#"+q.ID {
		t.Errorf("requested notification %+v", n)
	}
	if err := json.Unmarshal(dec.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Event != "approval.decided" || n.ApprovalID != q.ID || n.State != "approved" || n.DecidedBy != testReviewer {
		t.Errorf("decided notification %+v", n)
	}
	// The first delivery was retried after two failures, under one id.
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.calls) < 4 || hook.calls[0].header.Get("X-Airlock-Delivery") != hook.calls[2].header.Get("X-Airlock-Delivery") {
		t.Errorf("calls %d; want the first notification retried under the same delivery id", len(hook.calls))
	}
}

func TestUIWebhookNeverBlocksTheLifecycle(t *testing.T) {
	s := sharedSSHD(t)
	// A webhook that never answers.
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stall); srv.Close() })
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	os.WriteFile(secretFile, []byte("stalled-secret-value"), 0o600)
	// A delivery attempt lasts as long as the webhook stalls: a lifecycle
	// that waited for it would never finish. The bound below only turns
	// that into a failure instead of a hung test; it is not about speed.
	g := startGateway(t, s, gwOptions{
		extraConfig: fmt.Sprintf("notify {\n  url = %q\n  secret_file = %q\n}\n", srv.URL, secretFile),
		options:     func(o *Options) { o.notifyAttempt = time.Hour },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 3 {
		cmd := fmt.Sprintf("echo %d", i)
		res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
		q := g.pendingFor(cmd)
		if _, err := g.reviewer.Decide(context.Background(), q.ID, api.DecisionRequest{Decision: "approve"}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-res:
			if r.err != nil || !r.a.Success() {
				t.Fatalf("action %d: %+v %v", i, r.a, r.err)
			}
		case <-ctx.Done():
			t.Fatalf("action %d never finished with a stalled webhook", i)
		}
	}
}

// The tests here that run commands on the shared sshd are not parallel:
// other tests count the logins it accepts while they run.

// TestUIBrowser drives the reviewer pages of a real gateway, with real
// agents waiting on a real sshd, in Chromium.
func TestUIBrowser(t *testing.T) {
	s := sharedSSHD(t)
	browser := webtest.Browser(t)
	g := startGateway(t, s, gwOptions{extraConfig: "audit {\n  checkpoint_every = \"10 entries\"\n}\n"})
	b := &browserTour{sshd: s, g: g, tab: webtest.Tab(t, browser)}
	t.Run("login", b.login)
	t.Run("a pending call appears live and approving it completes the waiting action", b.approveCall)
	t.Run("deny with a reason", b.denyWithReason)
	t.Run("a run approval with a TTL lets the run's next actions pass", b.approveRun)
	t.Run("hostile commands are shown escaped and nothing runs", b.hostileCommands)
	t.Run("CSRF-less POST refused", b.refuseWithoutCSRF)
	t.Run("approving after the run ended", b.approveAfterRunEnded)
	t.Run("action detail and audited output", b.actionDetail)
	t.Run("audit status", b.auditStatus)
	t.Run("logout ends the session", b.logout)
}

// browserTour is TestUIBrowser's fixture: one gateway, one reviewer's tab,
// shared by its phases in order.
type browserTour struct {
	sshd *sshtest.SSHD
	g    *testGateway
	tab  context.Context
	// approvedCall is the call the browser approved, for the phases that
	// read it; nil until then.
	approvedCall *api.Action
}
