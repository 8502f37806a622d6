package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

// TestBrowser runs the pages in Chromium against the fake backend: one
// browser, one isolated tab per subtest.
func TestBrowser(t *testing.T) {
	p := browserPages{browser: webtest.Browser(t)}
	t.Run("hook sees injection", p.hookSeesInjection)
	t.Run("hostile commands", func(t *testing.T) { testHostileCorpus(t, p.start, noHits) })
	t.Run("live updates", p.liveUpdates)
	t.Run("expired card", p.expiredCard)
	t.Run("CSRF-less POST refused", p.refuseWithoutCSRF)
	t.Run("logout", p.logout)
	t.Run("card layout", p.cardLayout)
	t.Run("short confirmation", p.shortConfirmation)
	t.Run("run limits", p.runLimits)
	t.Run("pages layout", p.pagesLayout)
}

// browserPages is TestBrowser's fixture: one browser, in which each
// subtest opens its own tab.
type browserPages struct{ browser context.Context }

// start serves the pages over a new fake backend and logs a reviewer in
// on a new tab: the backend, the pages' address and the tab.
func (p browserPages) start(t *testing.T) (*fakeBackend, string, context.Context) {
	f := newFake(time.Now)
	srv := httptest.NewServer(New(f, Options{PollInterval: 500 * time.Millisecond}))
	t.Cleanup(srv.Close)
	tab := webtest.Tab(t, p.browser)
	if err := webtest.Login(tab, srv.URL, testReviewer, testPassword); err != nil {
		t.Fatalf("login: %v", err)
	}
	return f, srv.URL, tab
}

// noHits fails t if the page in tab ran, or tried to run, anything it
// was shown.
func noHits(t *testing.T, tab context.Context) {
	t.Helper()
	hits, err := webtest.Hits(tab)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("the page ran or tried to run something: %q", hits)
	}
}

// hookSeesInjection: the detector itself sees an injected handler and script,
// both when the CSP blocks them and when nothing does.
func (p browserPages) hookSeesInjection(t *testing.T) {
	injected := `<!doctype html><title>x</title><img src="/nothing" onerror="window.__xss('img')"><script>window.__xss('script')</script>`
	mux := http.NewServeMux()
	mux.HandleFunc("/strict", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		io.WriteString(w, injected)
	})
	mux.HandleFunc("/open", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, injected) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tab := webtest.Tab(t, p.browser)
	for path, want := range map[string]string{"/strict": "csp: script-src", "/open": "exec: script"} {
		if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+path)); err != nil {
			t.Fatal(err)
		}
		webtest.WaitFor(tab, `window.__airlockHits.length >= 2`, testkit.Patience)
		hits, err := webtest.Hits(tab)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(hits, "\n"), want) {
			t.Errorf("%s: hits %q, want one with %q", path, hits, want)
		}
	}
}

// liveUpdates: new requests appear without a reload, newest first; one
// decided elsewhere stays in view, marked and disabled.
func (p browserPages) liveUpdates(t *testing.T) {
	f, base, tab := p.start(t)
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID("empty"))); err != nil {
		t.Fatal(err)
	}
	first := callCard("live1", "echo first")
	first.ExpiresAt = time.Now().Add(time.Minute)
	f.add(first)
	if err := webtest.WaitFor(tab, `document.querySelectorAll('#cards article.card').length === 1 && document.title.startsWith('(1) ')`, testkit.Patience); err != nil {
		t.Fatalf("a new request did not appear without a reload: %v", err)
	}
	second := runCard("live2", "echo second")
	second.ExpiresAt = time.Now().Add(time.Minute)
	f.add(second)
	if err := webtest.WaitFor(tab, `document.querySelectorAll('#cards article.card').length === 2 && document.title.startsWith('(2) ')`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	order, err := webtest.Eval[[]string](tab, `Array.from(document.querySelectorAll('#cards article.card')).map(a => a.id)`)
	if err != nil || len(order) != 2 || order[0] != second.ID || order[1] != first.ID {
		t.Errorf("cards %v, want newest first [%s %s]", order, second.ID, first.ID)
	}
	// Decided elsewhere: the card stays in view, marked and disabled.
	if _, err := f.Decide(context.Background(), fakeReviewer("bob"), Decision{RequestID: first.ID, Digest: first.Digest, Approve: true}); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q).classList.contains('gone') && document.querySelector('#approve-%s').disabled && document.title.startsWith('(1) ')`, first.ID, first.ID), testkit.Patience); err != nil {
		t.Errorf("a request decided elsewhere is not marked: %v", err)
	}
	noHits(t, tab)
}

// expiredCard: a card is marked expired in time, and the server refuses
// even a form submitted past its disabled button.
func (p browserPages) expiredCard(t *testing.T) {
	f, base, tab := p.start(t)
	card := callCard("soon", "echo too late")
	card.ExpiresAt = time.Now().Add(1500 * time.Millisecond)
	f.add(card)
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID(card.ID))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q).classList.contains('expired') && document.querySelector('#approve-%s').disabled`, card.ID, card.ID), testkit.Patience); err != nil {
		t.Fatalf("the card was not marked expired: %v", err)
	}
	// The server refuses even a form submitted past the disabled button.
	if _, err := webtest.Eval[bool](tab, fmt.Sprintf(`document.querySelector('#approve-%s').form.submit(), true`, card.ID)); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `document.getElementById('flash') && document.getElementById('flash').textContent.includes('expired before your decision')`, testkit.Patience); err != nil {
		t.Errorf("no clear refusal after expiry: %v", err)
	}
	noHits(t, tab)
}

// refuseWithoutCSRF: a decision POSTed without the CSRF token is refused.
func (p browserPages) refuseWithoutCSRF(t *testing.T) {
	f, base, tab := p.start(t)
	card := callCard("csrf", "echo x")
	card.ExpiresAt = time.Now().Add(time.Minute)
	f.add(card)
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID(card.ID))); err != nil {
		t.Fatal(err)
	}
	status, err := webtest.Eval[int](tab, fmt.Sprintf(`fetch('/ui/approvals/%s/decision', {method: 'POST', body: new URLSearchParams({decision: 'approve', digest: %q})}).then(r => r.status)`, card.ID, card.Digest))
	if err != nil {
		t.Fatal(err)
	}
	if status != 403 || len(f.decisions) != 0 {
		t.Errorf("POST without the CSRF token: status %d, %d decisions; want 403 and none", status, len(f.decisions))
	}
}

// logout ends the session: the pending page leads to the login.
func (p browserPages) logout(t *testing.T) {
	_, base, tab := p.start(t)
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending"), chromedp.Click(chromedp.ID("logout"))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `location.pathname === '/ui/login' && document.body.textContent.includes('You are logged out')`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending")); err != nil {
		t.Fatal(err)
	}
	if loc, _ := chromedp.Run(tab, chromedp.Location()); !strings.HasSuffix(loc, "/ui/login") {
		t.Errorf("after logout the pending page leads to %s, want the login", loc)
	}
}

// cardCheck is what the browser reports of one card's command.
type cardCheck struct {
	ID       string   `json:"id"`
	Text     string   `json:"text"`
	Escapes  int      `json:"escapes"`
	Others   []string `json:"others"`
	Overflow bool     `json:"overflow"`
	Warned   bool     `json:"warned"`
}

func testHostileCorpus(t *testing.T, start func(*testing.T) (*fakeBackend, string, context.Context), noHits func(*testing.T, context.Context)) {
	f, base, tab := start(t)
	corpus := hostileCorpus()
	want := map[string]hostile{}
	for i, h := range corpus {
		c := callCard(fmt.Sprint("hostile", i), h.command)
		c.RequestedAt, c.ExpiresAt = time.Now().Add(-10*time.Second), time.Now().Add(110*time.Second)
		f.add(c)
		want[c.ID] = h
	}
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/pending"), chromedp.WaitVisible(chromedp.ID("cards"))); err != nil {
		t.Fatal(err)
	}
	// Let the live update run at least once over the same cards.
	time.Sleep(1200 * time.Millisecond)
	got, err := webtest.Eval[[]cardCheck](tab, `Array.from(document.querySelectorAll('#cards article.card')).map(function (a) {
		const pre = a.querySelector('pre.cmd');
		return {
			id: a.id,
			text: pre.textContent,
			escapes: pre.querySelectorAll('span.esc').length,
			others: Array.from(pre.querySelectorAll('*')).filter(e => !(e.tagName === 'SPAN' && (e.classList.contains('esc') || e.classList.contains('na')))).map(e => e.outerHTML.slice(0, 80)),
			overflow: pre.scrollWidth > pre.clientWidth + 1,
			warned: !!a.querySelector('.warn'),
		};
	})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(corpus) {
		t.Fatalf("%d cards on the page, want %d", len(got), len(corpus))
	}
	for _, c := range got {
		h := want[c.ID]
		escapes := 0
		for _, s := range Reveal(h.command) {
			if s.Escaped() {
				escapes++
			}
		}
		switch {
		case c.Text != shown(h.command):
			t.Errorf("%s: the page shows %q…, want %q… (%d vs %d bytes)", h.name, cutStr(c.Text), cutStr(shown(h.command)), len(c.Text), len(shown(h.command)))
		case c.Escapes != escapes:
			t.Errorf("%s: %d escapes marked, want %d", h.name, c.Escapes, escapes)
		case len(c.Others) != 0:
			t.Errorf("%s: the command became elements: %q", h.name, c.Others)
		case c.Overflow:
			t.Errorf("%s: the command overflows its box instead of wrapping", h.name)
		case c.Warned != (Flags(h.command) != nil):
			t.Errorf("%s: warned %v, want %v", h.name, c.Warned, Flags(h.command) != nil)
		}
	}
	// Nothing the payloads tried exists or ran.
	n, err := webtest.Eval[int](tab, `document.querySelectorAll('script:not([src="/ui/static/ui.js"]), iframe, img, svg, style, meta[http-equiv], a[href^="javascript"], #clickme, #approve-x, form[action="/ui/logout"]:not(.logout)').length`)
	if err != nil || n != 0 {
		t.Errorf("%d injected elements on the page (%v)", n, err)
	}
	// Hover and focus every card, as a reviewer would.
	if _, err := webtest.Eval[bool](tab, `document.querySelectorAll('article.card, pre.cmd, code.text').forEach(function (e) {
		['mouseover', 'mouseenter', 'focus', 'click'].forEach(function (t) { e.dispatchEvent(new Event(t, {bubbles: true})); });
	}), true`); err != nil {
		t.Fatal(err)
	}
	noHits(t, tab)
	dir := ""
	if *update {
		dir = "testdata/screenshots"
	}
	trojan := ""
	for id, h := range want {
		if h.name == "mixed" {
			trojan = id
		}
	}
	webtest.Screenshot(t, tab, "#"+trojan, "hostile-card.png", dir)
}

func cutStr(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
