package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"
	"golang.org/x/crypto/ssh"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/web"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

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
