package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
)

// A flood of anonymous /ui/sso/start, from one loopback address and from
// many, while a reviewer is at the provider's login page: the starts that
// find no place are refused (429, saying when to try again), and the
// reviewer's login, begun before, still completes. A full table never
// drops a login in progress for a new one.
func TestSSOStartFloodLeavesLoginsInProgress(t *testing.T) {
	t.Parallel()
	p := idp.Start(t)
	p.AddUser("sofia", idp.User{Password: "sofia's idp password", Groups: []string{"airlock-reviewers"}})
	g := startSSOGateway(t, sharedSSHD(t), p, "airlock-reviewers", "")

	// The reviewer begins: the gateway sends the browser to the provider,
	// whose login page waits for the password.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: p.Client().Transport, Jar: jar}
	res, err := browser.Get(g.base + "/ui/sso/start")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	authRequest := res.Request.URL.Query().Get("authRequestID")
	if res.StatusCode != http.StatusOK || authRequest == "" {
		t.Fatalf("the login did not reach the provider's login page: %s %s", res.Status, res.Request.URL)
	}

	// The flood: 500 starts from 127.0.0.1, 500 from 127.0.0.2 to
	// 127.0.0.251, four at a time.
	var refused, other int
	var refusal string
	var mu sync.Mutex
	var wg sync.WaitGroup
	from := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range from {
				ip := net.IPv4(127, 0, 0, 1)
				if i%2 == 1 {
					ip = net.IPv4(127, 0, 0, byte(2+i%250))
				}
				status, body, retry := startFrom(t, g.base, ip)
				mu.Lock()
				switch {
				case status == http.StatusTooManyRequests && retry != "":
					refused++
					refusal = body
				case status != http.StatusSeeOther:
					other++
				}
				mu.Unlock()
			}
		})
	}
	for i := range 1000 {
		from <- i
	}
	close(from)
	wg.Wait()
	if other != 0 || refused < 990 {
		t.Errorf("of 1000 starts from loopback, %d were refused with a Retry-After and %d answered otherwise", refused, other)
	}
	if !strings.Contains(refusal, "Try again after") || !strings.Contains(refusal, "left to finish") {
		t.Errorf("the refusal does not say the logins in progress finish and when to try again:\n%s", refusal)
	}

	// The reviewer logs in at the provider, which sends the browser back
	// to the gateway: logged in.
	res, err = browser.PostForm(p.Issuer+"/login/username", url.Values{"id": {authRequest}, "username": {"sofia"}, "password": {"sofia's idp password"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "Logged in as sofia") {
		t.Fatalf("the reviewer's login after the flood: %s at %s: %.600s", res.Status, res.Request.URL, body)
	}
	res, err = browser.Get(g.base + "/ui/pending")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `class="who">sofia<`) {
		t.Errorf("the pending page after the login: %s", res.Status)
	}
}

// startFrom asks base for /ui/sso/start from the local address ip, as an
// anonymous caller would, and returns the status, the page and its
// Retry-After.
func startFrom(t *testing.T, base string, ip net.IP) (int, string, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	c := &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/ui/sso/start", nil)
	res, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header.Get("Retry-After")
}
