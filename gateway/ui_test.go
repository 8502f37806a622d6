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

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
	"golang.org/x/crypto/ssh"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
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

// login refuses a wrong password, then logs the reviewer in.
func (b *browserTour) login(t *testing.T) {
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("reviewer")),
		chromedp.SendKeys(chromedp.ID("reviewer"), testReviewer), chromedp.SendKeys(chromedp.ID("password"), "not it at all"),
		chromedp.Click(chromedp.ID("login-button"))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(b.tab, `document.getElementById('problem') && document.getElementById('problem').textContent.includes('Wrong reviewer name or password')`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, b.tab, "", "login-page.png", screenshotDir())
	if err := webtest.Login(b.tab, b.g.base, testReviewer, testkit.Password); err != nil {
		t.Fatal(err)
	}
	if title, _ := chromedp.Run(b.tab, chromedp.Title()); title != "(0) Pending approvals · airlock" {
		t.Errorf("title %q", title)
	}
	noPageHits(t, b.tab)
}

// approveCall approves a call request that appeared live; the waiting
// action completes (and is the approved call the later phases read).
func (b *browserTour) approveCall(t *testing.T) {
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID("empty"))); err != nil {
		t.Fatal(err)
	}
	agent, _ := b.g.remoteAgent("deploy-bot")
	cmd := "df -h /tmp > /dev/null && echo approved-in-the-browser"
	res := runAsAgent(agent, api.ActionRequest{Target: "box-call", Command: cmd})
	q := b.g.pendingFor(cmd)
	waitForCard(t, b.tab, q.ID)
	if err := webtest.WaitFor(b.tab, `document.title.startsWith('(1) ')`, testkit.Patience); err != nil {
		t.Error(err)
	}
	card, err := webtest.Eval[string](b.tab, fmt.Sprintf(`document.getElementById(%q).textContent`, q.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{cmd, "box-call", b.sshd.User, ssh.FingerprintSHA256(b.sshd.CurrentHostKey()), "agent:deploy-bot/agt_", q.Digest, "call: approving lets exactly this command run once"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	webtest.Screenshot(t, b.tab, "", "pending-page.png", screenshotDir())
	if err := chromedp.Do(b.tab, chromedp.Click(chromedp.ID("approve-"+q.ID))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "Approved call "+q.ID)
	r := <-res
	if r.err != nil || !r.a.Success() || !strings.Contains(r.a.Stdout, "approved-in-the-browser") {
		t.Fatalf("the waiting action: %+v %v", r.a, r.err)
	}
	if r.a.Approval.DecidedBy != testReviewer || r.a.Approval.ID != q.ID {
		t.Errorf("approval %+v", r.a.Approval)
	}
	b.approvedCall = r.a
	noPageHits(t, b.tab)
}

// denyWithReason denies a call with a reason the action ends with.
func (b *browserTour) denyWithReason(t *testing.T) {
	res, q := b.callCard(t, "rm -rf /srv/releases/old")
	sel := fmt.Sprintf(`#%s input[name=reason]`, q.ID)
	if err := chromedp.Do(b.tab, chromedp.SendKeys(chromedp.CSS(sel), "not on a Friday"), chromedp.Click(chromedp.ID("deny-"+q.ID))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "Denied call")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.Denied || r.a.Approval.Reason != "not on a Friday" {
		t.Fatalf("the denied action: %+v %v", r.a, r.err)
	}
}

// approveRun approves a run with a TTL and an action limit; the run's
// next action passes without asking.
func (b *browserTour) approveRun(t *testing.T) {
	ctx := context.Background()
	cmd := "echo first of the run"
	res := b.g.runAsync(api.ActionRequest{Target: "box-run", Command: cmd})
	q := b.g.pendingFor(cmd)
	if q.Kind != api.ModeRun {
		t.Fatalf("request kind %s, want run", q.Kind)
	}
	waitForCard(t, b.tab, q.ID)
	if err := chromedp.Do(b.tab,
		// The limits are folded into one line of the bar: open it as a reviewer does.
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#options-%s summary`, q.ID))),
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#%s select[name=ttl_s]`, q.ID)), "900"),
		chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`#%s input[name=max_actions]`, q.ID)), "3"),
		chromedp.Click(chromedp.ID("approve-"+q.ID))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "Approved run")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("first action: %+v %v", r.a, r.err)
	}
	run, err := b.g.srv.eng.Runs().Get(ctx, q.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.ExpiresAt == nil {
		t.Fatalf("run %s has no expiry; want approved for 15m", run.State)
	}
	if left := time.Until(*run.ExpiresAt); run.State != api.RunApproved || left < 14*time.Minute || left > 15*time.Minute || run.MaxActions != 3 {
		t.Errorf("run %s, expires in %s, max actions %d; want approved for 15m, at most 3", run.State, left, run.MaxActions)
	}
	a, err := b.g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo second"}, api.Events{})
	if err != nil || !a.Success() || a.Approval.ID != q.ID {
		t.Fatalf("the run's next action: %+v %v", a, err)
	}
	if p, _ := b.g.srv.eng.Review().Pending(ctx); len(p) != 0 {
		t.Errorf("the approved run asked again: %d pending", len(p))
	}
}

// hostileCommands shows hostile commands escaped, and nothing on the page
// runs.
func (b *browserTour) hostileCommands(t *testing.T) {
	cmds := []string{
		`echo "</script><script>window.__xss('close')</script>"`,
		`<img src=x onerror="window.__xss('img')"> " autofocus onfocus="window.__xss('attr')" x="`,
		"javascript:window.__xss('url') \x1b[8m hidden \x1b[0m",
		"echo safe # \u202e ; rm -rf ~ \u202c \u2066x\u2069 \u200b\u200d\ufeff\u00a0",
		"echo hi\nrm -rf /tmp/x\r\n\t\u2028end",
	}
	want := map[string]string{}
	results := make([]<-chan actionResult, len(cmds))
	for i, c := range cmds {
		results[i] = b.g.runAsync(api.ActionRequest{Target: "box-call", Command: c})
		want[b.g.pendingFor(c).ID] = c
	}
	for id, c := range want {
		waitForCard(t, b.tab, id)
		got, err := webtest.Eval[map[string]any](b.tab, fmt.Sprintf(`(function () {
			const pre = document.getElementById(%q).querySelector('pre.cmd');
			return {text: pre.textContent, escapes: pre.querySelectorAll('span.esc').length, elements: pre.querySelectorAll('*').length - pre.querySelectorAll('span.esc, span.na').length};
		})()`, id))
		if err != nil {
			t.Fatal(err)
		}
		escapes := 0
		for _, seg := range web.Reveal(c) {
			if seg.Escaped() {
				escapes++
			}
		}
		if got["text"] != shownText(c) || int(got["escapes"].(float64)) != escapes || got["elements"].(float64) != 0 {
			t.Errorf("%q is shown as %s, want %q with %d escapes", c, webtest.JSON(got), shownText(c), escapes)
		}
	}
	if n, _ := webtest.Eval[int](b.tab, `document.querySelectorAll('img, svg, iframe, script:not([src])').length`); n != 0 {
		t.Errorf("%d injected elements", n)
	}
	noPageHits(t, b.tab)
	for id := range want {
		if err := chromedp.Do(b.tab, chromedp.WaitVisible(chromedp.ID("deny-"+string(id))), chromedp.Click(chromedp.ID("deny-"+string(id)))); err != nil {
			t.Fatal(err)
		}
		// The decision's page no longer shows the card.
		if err := webtest.WaitFor(b.tab, fmt.Sprintf(`document.readyState === 'complete' && document.getElementById(%q) === null`, id), testkit.Patience); err != nil {
			t.Fatal(err)
		}
		waitForFlash(t, b.tab, "Denied call "+string(id))
	}
	for _, res := range results {
		if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
			t.Errorf("hostile action: %+v %v", r.a, r.err)
		}
	}
}

// refuseWithoutCSRF refuses a decision POSTed without the CSRF token, and a
// second approval of the same request from another tab.
func (b *browserTour) refuseWithoutCSRF(t *testing.T) {
	ctx := context.Background()
	res, q := b.callCard(t, "echo csrf")
	status, err := webtest.Eval[int](b.tab, fmt.Sprintf(`fetch('/ui/approvals/%s/decision', {method: 'POST', body: new URLSearchParams({decision: 'approve', digest: '%s'})}).then(r => r.status)`, q.ID, q.Digest))
	if err != nil || status != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d %v, want 403", status, err)
	}
	if got, _ := b.g.srv.eng.Review().Request(ctx, q.ID); !got.Pending() {
		t.Errorf("the request is %s after a refused POST", got.State)
	}
	// Approving twice: once here, then from a second tab of the same
	// session that still shows the card.
	tab2, cancel := chromedp.NewContext(b.tab)
	defer cancel()
	if err := chromedp.Do(tab2, chromedp.Navigate(b.g.base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID(q.ID))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID("approve-"+q.ID)), chromedp.Click(chromedp.ID("approve-"+q.ID))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "Approved call")
	if _, err := webtest.Eval[bool](tab2, fmt.Sprintf(`document.querySelector('#approve-%s').form.submit(), true`, q.ID)); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, tab2, "already approved or denied")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Errorf("action: %+v %v", r.a, r.err)
	}
}

// approveAfterRunEnded approves a request whose run was revoked meanwhile.
func (b *browserTour) approveAfterRunEnded(t *testing.T) {
	agent, run := b.g.remoteAgent("short-lived")
	cmd := "echo from a run that ends"
	res := runAsAgent(agent, api.ActionRequest{Target: "box-call", Command: cmd})
	q := b.g.pendingFor(cmd)
	waitForCard(t, b.tab, q.ID)
	// Revoke the run from the runs page in a second tab.
	tab2, cancel := chromedp.NewContext(b.tab)
	defer cancel()
	if err := chromedp.Do(tab2, chromedp.Navigate(b.g.base+"/ui/runs"), chromedp.WaitVisible(chromedp.ID("revoke-"+run.ID))); err != nil {
		t.Fatal(err)
	}
	webtest.Screenshot(t, tab2, "#"+run.ID, "run-card.png", screenshotDir())
	if err := chromedp.Do(tab2, chromedp.SendKeys(chromedp.CSS("#"+run.ID+" input[name=note]"), "no longer needed"), chromedp.Click(chromedp.ID("revoke-"+run.ID))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, tab2, "Revoked run "+run.ID)
	if _, err := webtest.Eval[bool](b.tab, fmt.Sprintf(`document.querySelector('#approve-%s').form.submit(), true`, q.ID)); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "the run ended")
	if r := <-res; r.err != nil || r.a.Outcome == sshexec.Exited {
		t.Errorf("the action of the revoked run: %+v %v", r.a, r.err)
	}
}

// actionDetail shows the approved call's page, and reading its output is
// audited.
func (b *browserTour) actionDetail(t *testing.T) {
	ctx := context.Background()
	if b.approvedCall == nil {
		t.Skip("no approved action")
	}
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/actions/"+b.approvedCall.ID), chromedp.WaitVisible(chromedp.ID("read-output"))); err != nil {
		t.Fatal(err)
	}
	page, _ := webtest.Eval[string](b.tab, `document.querySelector('main').textContent`)
	for _, want := range []string{"exited", ssh.FingerprintSHA256(b.sshd.CurrentHostKey()), "action.requested", "action.connecting", "action.finished", "approved by " + testReviewer} {
		if !strings.Contains(page, want) {
			t.Errorf("the action page lacks %q", want)
		}
	}
	if err := chromedp.Do(b.tab, chromedp.Click(chromedp.ID("read-output")), chromedp.WaitVisible(chromedp.ID("output"))); err != nil {
		t.Fatal(err)
	}
	out, _ := webtest.Eval[string](b.tab, `document.getElementById('output').textContent`)
	if !strings.Contains(out, "approved-in-the-browser") {
		t.Errorf("output section %q", out)
	}
	webtest.Screenshot(t, b.tab, "", "action-page.png", screenshotDir())
	recs, _ := b.g.srv.eng.Audit().Reader().ActionEntries(ctx, b.approvedCall.ID)
	if last := recs[len(recs)-1]; last.Kind != auditchain.KindOutputRead {
		t.Errorf("last entry of the action is %s, want output.read", last.Kind)
	}
	noPageHits(t, b.tab)
}

// auditStatus verifies the audit log from its page.
func (b *browserTour) auditStatus(t *testing.T) {
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/audit"), chromedp.Click(chromedp.ID("verify"))); err != nil {
		t.Fatal(err)
	}
	waitForFlash(t, b.tab, "The audit log verified")
	webtest.Screenshot(t, b.tab, "#status", "audit-status.png", screenshotDir())
	noPageHits(t, b.tab)
}

// logout ends the session.
func (b *browserTour) logout(t *testing.T) {
	if err := chromedp.Do(b.tab, chromedp.Navigate(b.g.base+"/ui/pending"), chromedp.Click(chromedp.ID("logout"))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(b.tab, `location.pathname === '/ui/login'`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	status, _ := webtest.Eval[int](b.tab, `fetch('/ui/pending/cards').then(r => r.status)`)
	if status != http.StatusUnauthorized {
		t.Errorf("after logout the cards answer %d, want 401", status)
	}
}

// callCard runs cmd on box-call as the gateway's agent, and waits for
// its request and the request's card; the channel receives the action's
// result.
func (b *browserTour) callCard(t *testing.T, cmd string) (<-chan actionResult, engine.Request) {
	t.Helper()
	res := b.g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	q := b.g.pendingFor(cmd)
	waitForCard(t, b.tab, q.ID)
	return res, q
}

// runAsAgent runs req as agent in the background; the channel receives
// its result.
func runAsAgent(agent *api.Client, req api.ActionRequest) <-chan actionResult {
	res := make(chan actionResult, 1)
	go func() {
		a, err := agent.RunAction(context.Background(), req, api.Events{})
		res <- actionResult{a: a, err: err}
	}()
	return res
}

// noPageHits fails t if the page in tab ran, or tried to run, anything
// it was shown.
func noPageHits(t *testing.T, tab context.Context) {
	t.Helper()
	if hits, err := webtest.Hits(tab); err != nil || len(hits) != 0 {
		t.Errorf("the page ran or tried to run something: %q %v", hits, err)
	}
}

// waitForCard waits until the card of request id is on the page in tab.
func waitForCard(t *testing.T, tab context.Context, id string) {
	t.Helper()
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q) !== null`, id), testkit.Patience); err != nil {
		t.Fatalf("card %s did not appear live: %v", id, err)
	}
}

// waitForFlash waits until the page in tab says want in its message.
func waitForFlash(t *testing.T, tab context.Context, want string) {
	t.Helper()
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById('flash') !== null && document.getElementById('flash').textContent.includes(%q)`, want), testkit.Patience); err != nil {
		text, _ := webtest.Eval[string](tab, `(document.getElementById('flash') || document.body).textContent.slice(0, 400)`)
		t.Fatalf("no message %q; the page says %q", want, text)
	}
}

// TestUIBrowserExpiredCard approves a call after its request expired: the
// page says so, and the agent's action ends expired.
func TestUIBrowserExpiredCard(t *testing.T) {
	s := sharedSSHD(t)
	browser := webtest.Browser(t)
	// The request expires when the test moves the clock, not while a busy
	// machine is still loading the page.
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{
		mutate:  func(c *config.Config) { c.Approval.Timeout = 3 * time.Second },
		options: func(o *Options) { o.clock = clk },
	})
	tab := webtest.Tab(t, browser)
	if err := webtest.Login(tab, g.base, testReviewer, testkit.Password); err != nil {
		t.Fatal(err)
	}
	cmd := "echo too late"
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	q := g.pendingFor(cmd)
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q) !== null`, q.ID), testkit.Patience); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Second)
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q).classList.contains('expired') || document.getElementById(%q).classList.contains('gone')`, q.ID, q.ID), testkit.Patience); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool {
		got, _ := g.srv.eng.Review().Request(context.Background(), q.ID)
		return got.State == "expired"
	}, "the request did not expire")
	if _, err := webtest.Eval[bool](tab, fmt.Sprintf(`document.querySelector('#approve-%s').form.submit(), true`, q.ID)); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `document.getElementById('flash') !== null && document.getElementById('flash').textContent.includes('expired before your decision')`, testkit.Patience); err != nil {
		text, _ := webtest.Eval[string](tab, `document.body.textContent.slice(0, 300)`)
		t.Fatalf("%v; the page says %q", err, text)
	}
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Expired {
		t.Errorf("the action: %+v %v, want expired", r.a, r.err)
	}
}

// otherDigest is a well-formed digest that is not digest: its last hex
// digit changed.
func otherDigest(digest string) string {
	last := "0"
	if strings.HasSuffix(digest, "0") {
		last = "1"
	}
	return digest[:len(digest)-1] + last
}

func TestUIDecisionBoundToTheShownDigest(t *testing.T) {
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	cmd := "echo bound to its digest"
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	q := g.pendingFor(cmd)
	c := uiClient(t, g.base)
	tok := uiCSRF(t, c, g.base+"/ui/pending")
	decide := func(digest string) string {
		t.Helper()
		resp, err := c.PostForm(g.base+"/ui/approvals/"+q.ID+"/decision", url.Values{"csrf": {tok}, "decision": {"approve"}, "digest": {digest}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("decision: status %d", resp.StatusCode)
		}
		resp, err = c.Get(g.base + "/ui/pending")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(page)
	}
	if page := decide(otherDigest(q.Digest)); !strings.Contains(page, "its digest differs") {
		t.Error("a decision for another digest was not refused clearly")
	}
	if got, _ := g.srv.eng.Review().Request(context.Background(), q.ID); !got.Pending() {
		t.Fatalf("after a decision with the wrong digest the request is %s", got.State)
	}
	if page := decide(q.Digest); !strings.Contains(page, "Approved call "+q.ID) {
		t.Error("the decision with the shown digest was not confirmed")
	}
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v", r.a, r.err)
	}
}

func TestUIWebhookRefusesAnExposedSecret(t *testing.T) {
	s := sharedSSHD(t)
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("readable-by-everyone"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{extraConfig: fmt.Sprintf("notify {\n  url = %q\n  secret_file = %q\n}\n", srv.URL, secretFile)})
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "echo unnoticed"})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v (notifications off must not stop the gateway)", r.a, r.err)
	}
	time.Sleep(2 * notify.Poll)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.calls) != 0 {
		t.Errorf("%d notifications signed with a secret others can read", len(hook.calls))
	}
}
