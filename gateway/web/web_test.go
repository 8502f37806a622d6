package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func newTestHandler(t *testing.T) (*fakeBackend, *clock, *httptest.Server, *http.Client) {
	t.Helper()
	clk := &clock{t: t0}
	f := newFake(clk.Now)
	srv, c := testServer(t, New(f, Options{Now: clk.Now}))
	return f, clk, srv, c
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	f.add(callCard("a", "true"))
	f.actions["act_abc"] = Action{ID: "act_abc"}
	anon := newClient(t)
	login(t, c, srv.URL)
	want := map[string]string{
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"Content-Security-Policy": csp,
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		status int
	}{
		{"login", anon, "/ui/login", 200},
		{"redirect to login", anon, "/ui/pending", 303},
		{"pending", c, "/ui/pending", 200},
		{"cards fragment", c, "/ui/pending/cards", 200},
		{"runs", c, "/ui/runs", 200},
		{"action", c, "/ui/actions/act_abc", 200},
		{"audit", c, "/ui/audit", 200},
		{"not found", c, "/ui/nothing", 404},
		{"stylesheet", anon, "/ui/static/ui.css", 200},
		{"script", anon, "/ui/static/ui.js", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := get(t, tc.client, srv.URL+tc.path)
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.status)
			}
			for k, v := range want {
				if k == "Cache-Control" && strings.HasPrefix(tc.path, "/ui/static/") {
					continue
				}
				if got := res.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
	// The policy itself: no inline script or style, no framing.
	for _, part := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, part) {
			t.Errorf("CSP lacks %q", part)
		}
	}
	if strings.Contains(csp, "unsafe-") {
		t.Errorf("CSP allows something unsafe: %s", csp)
	}
}

func TestStaticTypesAndNoListing(t *testing.T) {
	_, _, srv, c := newTestHandler(t)
	for path, ct := range map[string]string{"/ui/static/ui.css": "text/css", "/ui/static/ui.js": "text/javascript"} {
		res, _ := get(t, c, srv.URL+path)
		if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, ct) {
			t.Errorf("%s: Content-Type %q, want %s", path, got, ct)
		}
	}
	if res, _ := get(t, c, srv.URL+"/ui/static/"); res.StatusCode != 404 {
		t.Errorf("static directory listing: status %d, want 404", res.StatusCode)
	}
}

func TestPagesHaveNoInlineScriptOrStyle(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	f.add(callCard("a", "true"))
	f.add(runCard("b", "make deploy"))
	f.runs = []Run{*localRun("r")}
	f.actions["act_abc"] = Action{ID: "act_abc", OutputStored: true}
	_, loginPage := get(t, c, srv.URL+"/ui/login")
	login(t, c, srv.URL)
	for _, path := range []string{"/ui/pending", "/ui/runs", "/ui/actions/act_abc", "/ui/audit"} {
		_, body := get(t, c, srv.URL+path)
		checkNoInline(t, path, body)
	}
	checkNoInline(t, "/ui/login", loginPage)
}

var (
	tagPattern  = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>`)
	attrPattern = regexp.MustCompile(`\s([a-zA-Z-]+)(?:=("[^"]*"|'[^']*'|[^\s>]*))?`)
	allowedTags = map[string]bool{}
)

func init() {
	for _, t := range strings.Fields(`html head meta title link script body header a nav form input span button main div p
		h1 h2 h3 section article time ul li strong dl dt dd br code pre table thead tbody tr th td ol details summary label select option`) {
		allowedTags[t] = true
	}
}

// checkNoInline parses every tag of a page (agent text is escaped, so every
// "<" left is the template's own) and checks that only the template's
// elements are there: the one external script, no inline script or style,
// no event handler attributes, links only within the pages.
func checkNoInline(t *testing.T, path, body string) {
	t.Helper()
	scripts := 0
	for _, m := range tagPattern.FindAllStringSubmatch(body, -1) {
		name := strings.ToLower(m[2])
		if !allowedTags[name] {
			t.Errorf("%s: unexpected element <%s%s>", path, name, m[3])
			continue
		}
		if name == "script" && m[1] == "" {
			scripts++
			if m[3] != ` src="/ui/static/ui.js" defer` {
				t.Errorf("%s: script %q", path, m[0])
			}
		}
		for _, a := range attrPattern.FindAllStringSubmatch(m[3], -1) {
			attr, val := strings.ToLower(a[1]), strings.Trim(a[2], `"'`)
			switch {
			case strings.HasPrefix(attr, "on") || attr == "style" || attr == "srcdoc":
				t.Errorf("%s: <%s> has attribute %s", path, name, attr)
			case (attr == "href" || attr == "src" || attr == "action") && !strings.HasPrefix(val, "/ui/"):
				t.Errorf("%s: <%s %s=%q> leaves the pages", path, name, attr, val)
			}
		}
	}
	if scripts != 1 {
		t.Errorf("%s: %d script elements; want exactly the external one", path, scripts)
	}
}

func TestLogin(t *testing.T) {
	_, _, srv, c := newTestHandler(t)

	t.Run("wrong password", func(t *testing.T) {
		tok := formToken(t, c, srv.URL+"/ui/login")
		res, body := post(t, c, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {"alice"}, "password": {"wrong password!"}})
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Wrong reviewer name or password") {
			t.Errorf("status %d, body lacks the message", res.StatusCode)
		}
		if hasCookie(res, sessionCookie) {
			t.Error("a failed login set a session cookie")
		}
	})

	t.Run("rate limited", func(t *testing.T) {
		var res *http.Response
		var body string
		for range 4 {
			tok := formToken(t, c, srv.URL+"/ui/login")
			res, body = post(t, c, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {"mallory"}, "password": {"guess guess guess"}})
		}
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") {
			t.Errorf("status %d after repeated failures, want 429", res.StatusCode)
		}
	})

	t.Run("without the form token", func(t *testing.T) {
		fresh := newClient(t)
		res, _ := post(t, fresh, srv.URL+"/ui/login", url.Values{"reviewer": {testReviewer}, "password": {testPassword}})
		if res.StatusCode != http.StatusForbidden || hasCookie(res, sessionCookie) {
			t.Errorf("login without its CSRF token: status %d, want 403 and no session", res.StatusCode)
		}
	})

	t.Run("cookie", func(t *testing.T) {
		tok := formToken(t, c, srv.URL+"/ui/login")
		res, _ := post(t, c, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {testReviewer}, "password": {testPassword}})
		ck := cookie(res, sessionCookie)
		if ck == nil {
			t.Fatal("no session cookie")
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || ck.Secure {
			t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, not Secure over plain HTTP", ck)
		}
		if len(ck.Value) < 43 {
			t.Errorf("session id %d characters: too short for 256 bits", len(ck.Value))
		}
	})
}

func TestCookieSecureUnderTLS(t *testing.T) {
	clk := &clock{t: t0}
	srv := httptest.NewTLSServer(New(newFake(clk.Now), Options{Now: clk.Now}))
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Jar = newClient(t).Jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, body := get(t, c, srv.URL+"/ui/login")
	if ck := cookie(res, loginCookie); ck == nil || !ck.Secure {
		t.Errorf("login form cookie %+v: want Secure under TLS", ck)
	}
	if res.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no Strict-Transport-Security under TLS")
	}
	tok := csrfField.FindStringSubmatch(body)[1]
	res, _ = post(t, c, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {testReviewer}, "password": {testPassword}})
	if ck := cookie(res, sessionCookie); ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v: want Secure, HttpOnly, SameSite=Strict under TLS", ck)
	}
}

func hasCookie(res *http.Response, name string) bool { return cookie(res, name) != nil }

func cookie(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name && c.MaxAge >= 0 {
			return c
		}
	}
	return nil
}

func TestSessionExpiry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []time.Duration // time between page views
		alive bool
	}{
		{"active reviewer", []time.Duration{20 * time.Minute, 20 * time.Minute, 20 * time.Minute}, true},
		{"idle", []time.Duration{31 * time.Minute}, false},
		{"absolute", []time.Duration{25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute,
			25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute,
			25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute,
			25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute,
			25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute, 25 * time.Minute}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, clk, srv, c := newTestHandler(t)
			login(t, c, srv.URL)
			var res *http.Response
			for _, d := range tc.steps {
				clk.Add(d)
				res, _ = get(t, c, srv.URL+"/ui/pending")
			}
			if alive := res.StatusCode == 200; alive != tc.alive {
				t.Errorf("after %v: status %d (%s), alive %v, want %v", tc.steps, res.StatusCode, res.Header.Get("Location"), alive, tc.alive)
			}
		})
	}
}

func TestPollingDoesNotKeepTheSessionAlive(t *testing.T) {
	_, clk, srv, c := newTestHandler(t)
	login(t, c, srv.URL)
	for range 20 {
		clk.Add(2 * time.Minute)
		if res, _ := get(t, c, srv.URL+"/ui/pending/cards"); res.StatusCode != 200 && res.StatusCode != 401 {
			t.Fatalf("poll: status %d", res.StatusCode)
		}
	}
	if res, _ := get(t, c, srv.URL+"/ui/pending/cards"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("after 40 minutes of only polling: status %d, want 401", res.StatusCode)
	}
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after 40 minutes of only polling the page: status %d, want a redirect to login", res.StatusCode)
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	_, _, srv, c := newTestHandler(t)
	login(t, c, srv.URL)
	u, _ := url.Parse(srv.URL + "/ui/")
	stolen := c.Jar.Cookies(u)
	tok := formToken(t, c, srv.URL+"/ui/pending")
	res, _ := post(t, c, srv.URL+"/ui/logout", url.Values{"csrf": {tok}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login?out=1" {
		t.Fatalf("logout: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	// The old cookie, replayed, no longer works.
	replay := newClient(t)
	replay.Jar.SetCookies(u, stolen)
	if res, _ := get(t, replay, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("replayed session cookie after logout: status %d, want a redirect to login", res.StatusCode)
	}
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: status %d, want a redirect to login", res.StatusCode)
	}
}

func TestStateChangesNeedTheCSRFToken(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	card := callCard("a", "rm -rf /srv/cache")
	f.add(card)
	f.runs = []Run{*localRun("r")}
	f.actions["act_abc"] = Action{ID: "act_abc", OutputStored: true}
	f.outputs["act_abc"] = Output{Stdout: []byte("secret output")}
	login(t, c, srv.URL)
	good := formToken(t, c, srv.URL+"/ui/pending")
	// A token that differs from the good one in its first character
	// (whatever that character is: it is random).
	wrong := "x" + good[1:]
	if good[0] == 'x' {
		wrong = "y" + good[1:]
	}
	posts := map[string]url.Values{
		"/ui/approvals/" + card.ID + "/decision": {"decision": {"approve"}, "digest": {card.Digest}},
		"/ui/runs/" + f.runs[0].ID + "/revoke":   {"note": {"x"}},
		"/ui/actions/act_abc/output":             {},
		"/ui/approvals/" + card.ID + "/command":  {},
		"/ui/audit/verify":                       {},
		"/ui/logout":                             {},
	}
	for path, form := range posts {
		for _, tc := range []struct {
			name  string
			token []string
		}{{"no token", nil}, {"wrong token", []string{wrong}}, {"empty token", []string{""}}} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				v := url.Values{}
				for k, x := range form {
					v[k] = x
				}
				if tc.token != nil {
					v["csrf"] = tc.token
				}
				res, body := post(t, c, srv.URL+path, v)
				if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF token") {
					t.Errorf("status %d, want 403 with the reason", res.StatusCode)
				}
			})
		}
	}
	t.Run("cross-site", func(t *testing.T) {
		req, _ := http.NewRequest("POST", srv.URL+"/ui/approvals/"+card.ID+"/decision",
			strings.NewReader(url.Values{"csrf": {good}, "decision": {"approve"}, "digest": {card.Digest}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site POST with a valid token: status %d, want 403", res.StatusCode)
		}
	})
	if len(f.decisions) != 0 || len(f.revoked) != 0 || len(f.reads) != 0 || f.verified != nil {
		t.Errorf("refused forms changed something: decisions %v, revoked %v, reads %v, verified %v", f.decisions, f.revoked, f.reads, f.verified)
	}
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != 200 {
		t.Errorf("the session did not survive refused forms: %d", res.StatusCode)
	}
}

func TestDecisions(t *testing.T) {
	f, clk, srv, c := newTestHandler(t)
	call, run := callCard("call", "systemctl restart web"), runCard("run", "make deploy")
	f.add(call)
	f.add(run)
	login(t, c, srv.URL)
	tok := formToken(t, c, srv.URL+"/ui/pending")
	decide := func(id string, v url.Values) string {
		t.Helper()
		v.Set("csrf", tok)
		res, body := post(t, c, srv.URL+"/ui/approvals/"+id+"/decision", v)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("decision: status %d\n%s", res.StatusCode, body)
		}
		_, page := get(t, c, srv.URL+"/ui/pending")
		i := strings.Index(page, `id="flash"`)
		if i < 0 {
			t.Fatalf("no flash message after a decision")
		}
		return page[i:min(len(page), i+600)]
	}

	t.Run("changed digest", func(t *testing.T) {
		msg := decide(call.ID, url.Values{"decision": {"approve"}, "digest": {digestOf("other")}})
		if !strings.Contains(msg, "its digest differs") {
			t.Errorf("flash %q", msg)
		}
	})
	t.Run("run approval with limits", func(t *testing.T) {
		msg := decide(run.ID, url.Values{"decision": {"approve"}, "digest": {run.Digest}, "ttl_s": {"900"}, "max_actions": {"5"}, "scope": {"account"}})
		if !strings.Contains(msg, "Approved run") {
			t.Errorf("flash %q", msg)
		}
		d := f.decisions[len(f.decisions)-1]
		if !d.Approve || d.TTL != 15*time.Minute || d.MaxActions != 5 || !d.OnlyThisAccount || d.Digest != run.Digest {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("call approval with a grant", func(t *testing.T) {
		g := callCard("grant", "systemctl status web")
		g.Grants = []time.Duration{5 * time.Minute, 15 * time.Minute}
		f.add(g)
		_, page := get(t, c, srv.URL+"/ui/pending")
		if !strings.Contains(page, `<select name="grant_s"><option value="0" selected>no repeats (once)</option><option value="300">`) {
			t.Errorf("the call card offers no grant:\n%s", page)
		}
		if strings.Count(page, `name="grant_s"`) != 1 {
			t.Errorf("a grant is offered on a card that allows none")
		}
		decide(g.ID, url.Values{"decision": {"approve"}, "digest": {g.Digest}, "grant_s": {"900"}})
		if d := f.decisions[len(f.decisions)-1]; !d.Approve || d.Grant != 15*time.Minute {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("twice", func(t *testing.T) {
		msg := decide(run.ID, url.Values{"decision": {"approve"}, "digest": {run.Digest}})
		if !strings.Contains(msg, "already approved or denied") {
			t.Errorf("flash %q", msg)
		}
	})
	t.Run("deny with reason", func(t *testing.T) {
		msg := decide(call.ID, url.Values{"decision": {"deny"}, "digest": {call.Digest}, "reason": {"not during business hours"}})
		if !strings.Contains(msg, "Denied call") {
			t.Errorf("flash %q", msg)
		}
		if d := f.decisions[len(f.decisions)-1]; d.Approve || d.Reason != "not during business hours" {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("expired", func(t *testing.T) {
		late := callCard("late", "true")
		f.add(late)
		clk.Add(3 * time.Minute)
		msg := decide(late.ID, url.Values{"decision": {"approve"}, "digest": {late.Digest}})
		if !strings.Contains(msg, "expired before your decision") {
			t.Errorf("flash %q", msg)
		}
	})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrRunEnded, "the run ended"},
		{ErrSelfApproval, "you are the requester"},
		{ErrUnavailable, "could not be recorded in the audit log"},
		{fmt.Errorf("%w: the time is over the 8h maximum", ErrInvalid), "the time is over the 8h maximum"},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			f.mu.Lock()
			f.decideErr = tc.err
			f.mu.Unlock()
			defer func() { f.mu.Lock(); f.decideErr = nil; f.mu.Unlock() }()
			msg := decide(call.ID, url.Values{"decision": {"approve"}, "digest": {call.Digest}})
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "Nothing was decided") {
				t.Errorf("flash %q, want %q", msg, tc.want)
			}
		})
	}
	t.Run("bad input", func(t *testing.T) { refusesBadDecisions(t, f, c, srv.URL, tok, call) })
}

// refusesBadDecisions posts malformed decisions on call's request (the
// pages at base, the form token tok): each is refused, and decides
// nothing.
func refusesBadDecisions(t *testing.T, f *fakeBackend, c *http.Client, base, tok string, call Card) {
	for name, v := range map[string]url.Values{
		"no digest":      {"decision": {"approve"}},
		"bad verdict":    {"decision": {"maybe"}, "digest": {call.Digest}},
		"bad ttl":        {"decision": {"approve"}, "digest": {call.Digest}, "ttl_s": {"-5"}},
		"bad max":        {"decision": {"approve"}, "digest": {call.Digest}, "max_actions": {"many"}},
		"bad grant":      {"decision": {"approve"}, "digest": {call.Digest}, "grant_s": {"-1"}},
		"huge grant":     {"decision": {"approve"}, "digest": {call.Digest}, "grant_s": {"99999999999999999"}},
		"long reason":    {"decision": {"deny"}, "digest": {call.Digest}, "reason": {strings.Repeat("x", 1001)}},
		"invalid reason": {"decision": {"deny"}, "digest": {call.Digest}, "reason": {"\xff"}},
	} {
		v.Set("csrf", tok)
		n := len(f.decisions)
		res, _ := post(t, c, base+"/ui/approvals/"+call.ID+"/decision", v)
		if res.StatusCode != http.StatusBadRequest || len(f.decisions) != n {
			t.Errorf("%s: status %d, want 400 and no decision", name, res.StatusCode)
		}
	}
	v := url.Values{"csrf": {tok}, "decision": {"approve"}, "digest": {call.Digest}}
	if res, _ := post(t, c, base+"/ui/approvals/apr_nope/decision", v); res.StatusCode != http.StatusNotFound {
		t.Errorf("malformed id: status %d, want 404", res.StatusCode)
	}
}

func TestForbiddenDecisionLogsOut(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	card := callCard("a", "true")
	f.add(card)
	f.decideErr = errors.Join(ErrForbidden)
	login(t, c, srv.URL)
	tok := formToken(t, c, srv.URL+"/ui/pending")
	post(t, c, srv.URL+"/ui/approvals/"+card.ID+"/decision", url.Values{"csrf": {tok}, "decision": {"approve"}, "digest": {card.Digest}})
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a reviewer refused as not allowed is still logged in: %d", res.StatusCode)
	}
}

func TestRevokeAndOutputAndVerify(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	r := localRun("r")
	r.State = "approved"
	f.runs = []Run{*r}
	f.actions["act_abc"] = Action{ID: "act_abc", Command: "cat /etc/motd", OutputStored: true, Outcome: "exited", ExitCode: new(int)}
	f.outputs["act_abc"] = Output{Stdout: []byte("hello \x1b[31mred\x1b[0m\n"), Stderr: []byte("\xff\xfe"), StdoutReceived: 20, StderrReceived: 2}
	login(t, c, srv.URL)

	tok := formToken(t, c, srv.URL+"/ui/runs")
	res, _ := post(t, c, srv.URL+"/ui/runs/"+r.ID+"/revoke", url.Values{"csrf": {tok}, "note": {"done for today"}})
	if res.StatusCode != http.StatusSeeOther || len(f.revoked) != 1 {
		t.Fatalf("revoke: status %d, revoked %v", res.StatusCode, f.revoked)
	}
	if _, page := get(t, c, srv.URL+"/ui/runs"); !strings.Contains(page, "Revoked run") || strings.Contains(page, "revoke-"+r.ID) {
		t.Errorf("runs page after revoking: no confirmation, or still offers to revoke")
	}
	post(t, c, srv.URL+"/ui/runs/"+r.ID+"/revoke", url.Values{"csrf": {tok}})
	if _, page := get(t, c, srv.URL+"/ui/runs"); !strings.Contains(page, "had already ended") {
		t.Errorf("revoking twice: no clear message")
	}

	_, page := get(t, c, srv.URL+"/ui/actions/act_abc")
	if strings.Contains(page, "red") || !strings.Contains(page, `id="read-output"`) {
		t.Errorf("the action page shows output before the reviewer asks (which is audited)")
	}
	res, page = post(t, c, srv.URL+"/ui/actions/act_abc/output", url.Values{"csrf": {tok}})
	if res.StatusCode != 200 || len(f.reads) != 1 {
		t.Fatalf("reading output: status %d, reads %v", res.StatusCode, f.reads)
	}
	for _, want := range []string{`<span class="esc ansi" title="U&#43;001B ESCAPE">\x1b</span>[31mred`, `<span class="esc bad" title="byte 0xFF: not valid UTF-8">\xff</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("output page lacks %s", want)
		}
	}

	res, _ = post(t, c, srv.URL+"/ui/audit/verify", url.Values{"csrf": {tok}})
	if _, page := get(t, c, srv.URL+"/ui/audit"); res.StatusCode != http.StatusSeeOther || !strings.Contains(page, "intact") || !strings.Contains(page, "by alice") || !strings.Contains(page, "1 entry has a time earlier") {
		t.Errorf("audit page after verifying lacks the result")
	}
}

func TestRenderedPagesHoldNoHiddenCharacters(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	for i, tc := range hostileCorpus() {
		card := callCard(fmt.Sprint("h", i), tc.command)
		if i%3 == 0 {
			card.Run.Process.Argv = append(card.Run.Process.Argv, tc.command)
			card.Run.Process.Cwd = tc.command
		}
		f.add(card)
	}
	login(t, c, srv.URL)
	_, page := get(t, c, srv.URL+"/ui/pending")
	for _, r := range page {
		if r != '\n' && (classify(r) != Visible && classify(r) != NonASCII) {
			t.Errorf("the page holds %U raw", r)
		}
	}
	if strings.ContainsRune(page, '\uFFFD') && !strings.Contains(page, "\\xff") {
		t.Error("invalid UTF-8 was replaced, not escaped")
	}
	for _, bad := range []string{"<script>alert", "<img", "<svg", "<iframe", `" onmouseover=`, "href=\"javascript:"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
	checkNoInline(t, "/ui/pending", page)
}

func TestDisabledReviewerIsLoggedOut(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	login(t, c, srv.URL)
	f.mu.Lock()
	f.disabled[testReviewer] = true
	f.mu.Unlock()
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a disabled reviewer still sees the pending page: %d", res.StatusCode)
	}
	f.mu.Lock()
	f.disabled[testReviewer] = false
	f.mu.Unlock()
	if res, _ := get(t, c, srv.URL+"/ui/pending"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the session survived being disabled: %d", res.StatusCode)
	}
}

// A one-time login link: a GET shows a button and consumes nothing; the
// POST logs in once; the same link never works again.
func TestLoginLink(t *testing.T) {
	_, _, srv, c := newTestHandler(t)
	res, body := get(t, c, srv.URL+"/ui/login?link="+fakeLink)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="link" value="`+fakeLink+`"`) || !strings.Contains(body, "link-button") {
		t.Fatalf("the link page does not offer to log in with the link (status %d)", res.StatusCode)
	}
	checkNoInline(t, "/ui/login?link=…", body)
	// Following the link again (a preview, then the reviewer) consumed
	// nothing.
	_, body = get(t, c, srv.URL+"/ui/login?link="+fakeLink)
	tok := csrfField.FindStringSubmatch(body)[1]
	res, _ = post(t, c, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "link": {fakeLink}})
	if cookie(res, sessionCookie) == nil {
		t.Fatalf("logging in with the link: status %d, no session", res.StatusCode)
	}
	fresh := newClient(t)
	_, body = get(t, fresh, srv.URL+"/ui/login?link="+fakeLink)
	tok = csrfField.FindStringSubmatch(body)[1]
	res, body = post(t, fresh, srv.URL+"/ui/login", url.Values{"csrf": {tok}, "link": {fakeLink}})
	if res.StatusCode != http.StatusUnauthorized || hasCookie(res, sessionCookie) || !strings.Contains(body, "not valid") {
		t.Errorf("a used link: status %d; want 401, no session and a clear message", res.StatusCode)
	}
	// Without the form token a link does nothing either.
	res, _ = post(t, newClient(t), srv.URL+"/ui/login", url.Values{"link": {fakeLink}})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("link without CSRF token: status %d, want 403", res.StatusCode)
	}
}

// A redacted command: the card says so and shows the redacted text; the
// original is shown only on request, and the request is recorded first.
func TestRevealRedactedCommand(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	card := callCard("red", "aws s3 ls --access-key [redacted:aws-access-key]")
	card.Redacted = []string{"aws-access-key"}
	f.add(card)
	f.originals[card.ID] = "aws s3 ls --access-key AKIAIOSFODNN7EXAMPLE"
	login(t, c, srv.URL)
	_, cards := get(t, c, srv.URL+"/ui/pending/cards")
	if strings.Contains(cards, "AKIAIOSFODNN7EXAMPLE") || !strings.Contains(cards, "redacted</strong>: what looked like credentials (aws-access-key)") ||
		!strings.Contains(cards, `action="/ui/approvals/`+card.ID+`/command"`) {
		t.Fatalf("the card:\n%s", cards)
	}
	if len(f.reads) != 0 {
		t.Fatalf("reads before asking: %v", f.reads)
	}
	tok := formToken(t, c, srv.URL+"/ui/pending")
	res, page := post(t, c, srv.URL+"/ui/approvals/"+card.ID+"/command", url.Values{"csrf": {tok}})
	if res.StatusCode != 200 || !strings.Contains(page, "AKIAIOSFODNN7EXAMPLE") || len(f.reads) != 1 || f.reads[0] != "alice revealed "+card.ID {
		t.Fatalf("reveal: status %d, reads %v", res.StatusCode, f.reads)
	}
	delete(f.originals, card.ID)
	if res, page := post(t, c, srv.URL+"/ui/approvals/"+card.ID+"/command", url.Values{"csrf": {tok}}); res.StatusCode != 404 || !strings.Contains(page, "erased") {
		t.Errorf("no original: status %d", res.StatusCode)
	}
}

// TestRunsPageEndReason: a run that ended because its action budget was
// spent says so in words, as airlock runs list does, not as max_actions
// alone.
func TestRunsPageEndReason(t *testing.T) {
	f, _, srv, c := newTestHandler(t)
	r := localRun("r")
	r.State, r.MaxActions, r.Actions, r.EndedAt, r.EndReason = "expired", 3, 3, t0, "max_actions"
	f.runs = []Run{*r}
	login(t, c, srv.URL)
	_, page := get(t, c, srv.URL+"/ui/runs")
	if want := "its action budget (3) is spent"; !strings.Contains(page, want) {
		t.Errorf("runs page for a run that spent its action budget: want %q in it", want)
	}
}
