package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
)

// Budgets follow identities: a reviewer's name across every address, a
// remembered login device, an agent identity; an address's budget is
// its bucket's (every loopback address one bucket, IPv6 by /64).

// loginAnswer is one POST /v1/login's answer.
type loginAnswer struct {
	status     int
	retryAfter string
	ok         api.LoginResponse
	err        api.Error
}

// tryLogin sends one POST /v1/login from c.
func tryLogin(t *testing.T, c *http.Client, base string, req api.LoginRequest) loginAnswer {
	t.Helper()
	body, _ := json.Marshal(req)
	res, err := c.Post(base+"/v1/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return loginAnswer{}
	}
	defer res.Body.Close()
	a := loginAnswer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	if res.StatusCode == http.StatusOK {
		json.NewDecoder(res.Body).Decode(&a.ok)
	} else {
		json.NewDecoder(res.Body).Decode(&a.err)
	}
	return a
}

// authFailures reads airlock_auth_failures_total{credential}.
func authFailures(t *testing.T, g *testGateway, credential string) float64 {
	t.Helper()
	mfs, err := g.srv.eng.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "airlock_auth_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "credential" && lp.GetValue() == credential {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// releaseHeld lets the test clock run, a second at a time and at most
// upTo, until n calls have ended (*ended): checks held for their slots
// are let through. Then it waits for them.
func releaseHeld(t *testing.T, clk *clocktest.Fake, ended *atomic.Int32, n int, upTo time.Duration) {
	t.Helper()
	for moved := time.Duration(0); int(ended.Load()) < n && moved < upTo; moved += time.Second {
		clk.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	testkit.Eventually(t, func() bool { return int(ended.Load()) >= n }, "checks held for their slots did not end")
}

// TestLoginGuessesFromManyAddressesAreBounded: 600 guesses at one
// reviewer's password from 60 loopback addresses at once (any local user
// can send from all of 127.0.0.0/8) reach the password check 9 times: the
// 5 free failures of the name, then 4 held for slots 1, 3, 7 and 15 s
// away; every other guess is refused at once with 429, Retry-After and
// a message that says why and that a known browser or CLI is not slowed.
// Each failure counts once in airlock_auth_failures_total.
func TestLoginGuessesFromManyAddressesAreBounded(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	g := startGateway(t, sharedSSHD(t), gwOptions{options: func(o *Options) { o.clock = clk }})
	before := authFailures(t, g, "reviewer_password")
	const addrs, each = 60, 10
	var mu sync.Mutex
	statuses, retries := map[int]int{}, map[string]int{}
	var refusal string
	var ended atomic.Int32
	var wg sync.WaitGroup
	for i := range addrs {
		c := fromAddress(fmt.Sprintf("127.0.2.%d", i+1))
		for j := range each {
			wg.Go(func() {
				defer ended.Add(1)
				a := tryLogin(t, c, g.base, api.LoginRequest{Reviewer: testReviewer, Password: fmt.Sprintf("guess %d/%d", i, j)})
				mu.Lock()
				defer mu.Unlock()
				statuses[a.status]++
				if a.status == http.StatusTooManyRequests {
					retries[a.retryAfter]++
					if a.retryAfter == "31" {
						refusal = a.err.Err.Message
					}
				}
			})
		}
	}
	// All but the held ones are answered without the clock moving.
	testkit.Eventually(t, func() bool { return ended.Load() >= addrs*each-4 }, "the guesses were not answered")
	releaseHeld(t, clk, &ended, addrs*each, 15*time.Second)
	wg.Wait()
	if want := map[int]int{http.StatusUnauthorized: 9, http.StatusTooManyRequests: addrs*each - 9}; !equalCounts(statuses, want) {
		t.Errorf("600 guesses from 60 addresses: statuses %v, want %v", statuses, want)
	}
	if got := authFailures(t, g, "reviewer_password") - before; got != 9 {
		t.Errorf("airlock_auth_failures_total{credential=reviewer_password} rose by %v, want 9 (each failure once)", got)
	}
	// Refused by the name's schedule (the next slot 31 s away), or by the
	// loopback bucket while its budget is held by checks in flight.
	if retries["31"]+retries["1"] != addrs*each-9 || retries["31"] == 0 {
		t.Errorf("Retry-After of the refusals: %v, want 31 (or 1) on each", retries)
	}
	for _, part := range []string{"logins as alice are being slowed after 9 failed or pending logins from unknown devices", "a browser or CLI that logged in as alice before is not slowed", "try again in 31 s"} {
		if !strings.Contains(refusal, part) {
			t.Errorf("the refusal %q does not say %q", refusal, part)
		}
	}
}

func equalCounts(got, want map[int]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestRememberedDevicesAreNotSlowed: while guesses from elsewhere have
// spent the reviewer name's budget (and the loopback bucket's), the
// reviewer's CLI and browser, which logged in before, log in at once: an
// attempt with a remembered device proof is charged to that device alone.
// The proof is no credential, is bound to the name, and ends with a new
// password.
func TestRememberedDevicesAreNotSlowed(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	g := startGateway(t, sharedSSHD(t), gwOptions{options: func(o *Options) { o.clock = clk }})
	ctx := context.Background()
	first := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: testReviewer, Password: testkit.Password})
	proof := first.ok.Device
	if first.status != http.StatusOK || !strings.HasPrefix(proof, "v1."+testReviewer+".") ||
		first.ok.DeviceExpiresAt.Sub(clk.Now()) < 89*24*time.Hour {
		t.Fatalf("a password login: %d, device %q until %v; want a proof for 90 days", first.status, proof, first.ok.DeviceExpiresAt)
	}
	browser := uiClient(t, g.base)
	if !hasDeviceCookie(browser, g.base) {
		t.Fatal("the browser's login left no device cookie")
	}

	// Guesses from 20 addresses elsewhere spend the name's budget: 5
	// checked, 4 held for their slots, the rest refused.
	var ended atomic.Int32
	var wg sync.WaitGroup
	review := g.srv.eng.Review()
	for i := range 20 {
		wg.Go(func() {
			defer ended.Add(1)
			review.Login(ctx, testReviewer, fmt.Sprintf("guess %d", i), engine.Secret{}, fmt.Sprintf("198.51.100.%d:4000", i+1))
		})
	}
	testkit.Eventually(t, func() bool { return ended.Load() >= 16 }, "the guesses were not answered")
	_, err := review.Login(ctx, testReviewer, "one more guess", engine.Secret{}, "203.0.113.9:4000")
	if !errors.Is(err, engine.ErrRateLimited) || engine.RetryAfter(err) != 31*time.Second {
		t.Fatalf("a guess from a fresh address: %v (retry after %v), want slowed, 31 s", err, engine.RetryAfter(err))
	}
	// And guesses with names no reviewer has spend the loopback bucket.
	for i := range 10 {
		tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: fmt.Sprintf("nobody-%d", i), Password: "guess"})
	}
	if a := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: testReviewer, Password: testkit.Password}); a.status != http.StatusTooManyRequests || a.retryAfter == "" {
		t.Fatalf("the right password without the device: %d (Retry-After %q), want 429", a.status, a.retryAfter)
	}

	cli := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: testReviewer, Password: testkit.Password, Device: proof})
	if cli.status != http.StatusOK || cli.ok.Token == "" || cli.ok.Device == "" {
		t.Errorf("the CLI that logged in before: %d %+v, want logged in at once", cli.status, cli.err)
	}
	if a := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: testReviewer, Password: "a guess with a stolen proof", Device: proof}); a.status != http.StatusUnauthorized {
		t.Errorf("a wrong password with the proof: %d, want 401 (the proof is no credential)", a.status)
	}
	// Its session over (they last 12 hours), the browser keeps its
	// device cookie, and logs in at once.
	if st := uiLogin(t, withDeviceCookieOnly(t, browser, g.base), g.base); st != http.StatusSeeOther {
		t.Errorf("the browser that logged in before: status %d, want 303 (logged in at once)", st)
	}
	if a := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: "bob", Password: testkit.Password, Device: proof}); a.status != http.StatusTooManyRequests {
		t.Errorf("alice's proof presented for another name: %d, want 429 (charged to the address)", a.status)
	}
	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerPassword, testReviewer, engine.NewSecret("a brand new password"), "test"); err != nil {
		t.Fatal(err)
	}
	if a := tryLogin(t, http.DefaultClient, g.base, api.LoginRequest{Reviewer: testReviewer, Password: "a brand new password", Device: cli.ok.Device}); a.status != http.StatusTooManyRequests {
		t.Errorf("a proof from before the new password: %d, want 429 (no longer honoured)", a.status)
	}
	releaseHeld(t, clk, &ended, 20, 15*time.Second)
	wg.Wait()
}

// hasDeviceCookie reports whether c's jar holds a device cookie for the
// pages.
func hasDeviceCookie(c *http.Client, base string) bool {
	u, _ := url.Parse(base + "/ui/login")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "airlock_device" && ck.Value != "" {
			return true
		}
	}
	return false
}

// withDeviceCookieOnly is a browser with c's device cookie and no
// session.
func withDeviceCookieOnly(t *testing.T, c *http.Client, base string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(base + "/ui/login")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "airlock_device" {
			ck.Path = "/ui"
			jar.SetCookies(u, []*http.Cookie{ck})
		}
	}
	return &http.Client{Jar: jar, CheckRedirect: c.CheckRedirect}
}

// uiLogin logs testReviewer in through the login form again and returns
// the status.
func uiLogin(t *testing.T, c *http.Client, base string) int {
	t.Helper()
	tok := uiCSRF(t, c, base+"/ui/login")
	res, err := c.PostForm(base+"/ui/login", url.Values{"csrf": {tok}, "reviewer": {testReviewer}, "password": {testkit.Password}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestLoginGuessesFromOneIPv6PrefixShareABucket: guesses sprayed over
// many names from many addresses of one IPv6 /64 (one host usually holds
// the whole /64) share one budget; another /64 has its own.
func TestLoginGuessesFromOneIPv6PrefixShareABucket(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	before := authFailures(t, g, "reviewer_password")
	got := map[string]int{}
	for i := range 20 {
		_, err := g.srv.eng.Review().Login(ctx, fmt.Sprintf("spray-%d", i), "guess", engine.Secret{}, fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1))
		switch {
		case errors.Is(err, engine.ErrUnauthorized):
			got["checked"]++
		case errors.Is(err, engine.ErrRateLimited):
			got["refused"]++
		default:
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if got["checked"] != 10 || got["refused"] != 10 {
		t.Errorf("20 guesses from one /64: %v, want 10 checked and 10 refused", got)
	}
	if _, err := g.srv.eng.Review().Login(ctx, "spray-x", "guess", engine.Secret{}, "[2001:db8:1:3::1]:4000"); !errors.Is(err, engine.ErrUnauthorized) {
		t.Errorf("a guess from another /64: %v, want checked", err)
	}
	if got := authFailures(t, g, "reviewer_password") - before; got != 11 {
		t.Errorf("airlock_auth_failures_total{credential=reviewer_password} rose by %v after 11 failed logins, want 11", got)
	}
}

// TestRunCreationIsBudgetedPerAgentIdentity: one agent token creating
// runs from 60 loopback addresses at once creates 10 (the loopback
// bucket's budget); from 40 addresses elsewhere, 30 (the identity's
// budget), the rest refused with a message naming the identity's budget.
// Another agent is not held back by the first one's.
func TestRunCreationIsBudgetedPerAgentIdentity(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	created := func() int { return len(g.auditEntries("run.created", "")) }
	before := created()
	a, err := g.srv.eng.Admin().AddAgent(ctx, "ci", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var refused atomic.Int32
	for i := range 60 {
		c := api.NewHTTPClient(g.base, a.Token).WithHTTP(fromAddress(fmt.Sprintf("127.0.3.%d", i+1)))
		for range 5 {
			wg.Go(func() {
				var ae *api.Error
				if _, err := c.CreateRun(ctx); errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
					refused.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if n := created() - before; n != 10 || refused.Load() != 290 {
		t.Errorf("300 runs asked from 60 loopback addresses: %d created, %d refused with 429; want 10, 290", n, refused.Load())
	}

	fleet := verifiedAgent(t, g, "fleet")
	before = created()
	var last error
	for i := range 40 {
		if _, err := g.srv.eng.Runs().CreateRemote(ctx, fleet, fmt.Sprintf("198.51.100.%d:4000", i+1), 0); err != nil {
			last = err
		}
	}
	if n := created() - before; n != 30 {
		t.Errorf("40 runs asked by one identity from 40 addresses: %d created, want 30", n)
	}
	if !errors.Is(last, engine.ErrRateLimited) || engine.RetryAfter(last) <= 0 || !strings.Contains(last.Error(), "this agent identity, "+fleet.Subject()) {
		t.Errorf("the refusal: %v (retry after %v), want one naming the identity's budget and when to retry", last, engine.RetryAfter(last))
	}
	if _, err := g.srv.eng.Runs().CreateRemote(ctx, verifiedAgent(t, g, "other"), "198.51.100.200:4000", 0); err != nil {
		t.Errorf("another agent from a fresh address: %v", err)
	}
}

// verifiedAgent issues an agent token for name and returns the agent it
// proves, as a front end hands it to the engine.
func verifiedAgent(t *testing.T, g *testGateway, name string) engine.Agent {
	t.Helper()
	tok, err := g.srv.eng.Admin().AddAgent(context.Background(), name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := g.srv.eng.Identity().VerifyAgent(context.Background(), engine.NewSecret(tok.Token))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestGenuineTokensPassASpentAddress: wrong agent and run tokens from one
// loopback address spend the loopback bucket's token budget, and are
// refused with 429 from then on, from every loopback address; a genuine
// agent token and a genuine run token from loopback are still let in, so
// that no local user can lock the agents out on purpose.
func TestGenuineTokensPassASpentAddress(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	a, err := g.srv.eng.Admin().AddAgent(ctx, "ci", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	agent := api.NewHTTPClient(g.base, a.Token).WithHTTP(fromAddress("127.0.5.1"))
	run, err := agent.CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	status := func(c *api.Client) int {
		var ae *api.Error
		if _, err := c.Targets(ctx); errors.As(err, &ae) {
			return ae.Status
		} else if err != nil {
			t.Fatal(err)
		}
		return http.StatusOK
	}
	wrongAgent := "airlock_agent_" + strings.Repeat("0", len(strings.TrimPrefix(a.Token, "airlock_agent_")))
	for i := range 12 {
		tok := wrongAgent
		if i%2 == 1 {
			tok = "not-a-run-token-" + fmt.Sprint(i)
		}
		status(api.NewHTTPClient(g.base, tok).WithHTTP(fromAddress(fmt.Sprintf("127.0.5.%d", 10+i))))
	}
	if got := status(api.NewHTTPClient(g.base, wrongAgent).WithHTTP(fromAddress("127.0.5.99"))); got != http.StatusTooManyRequests {
		t.Fatalf("a wrong token once the loopback bucket is spent: %d, want 429", got)
	}
	if _, err := api.NewHTTPClient(g.base, a.Token).WithHTTP(fromAddress("127.0.5.2")).CreateRun(ctx); err != nil {
		t.Errorf("the genuine agent token from the spent bucket: %v", err)
	}
	if got := status(api.NewHTTPClient(g.base, run.Token).WithHTTP(fromAddress("127.0.5.3"))); got != http.StatusOK {
		t.Errorf("the genuine run token from the spent bucket: %d, want 200", got)
	}
}
