package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestLoginLink: a one-time link logs a reviewer into the pages once, and
// never again.
func TestLoginLink(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	link, err := g.srv.LoginLink(context.Background(), testReviewer, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	use := func() (status int, loggedIn bool) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := csrfInput.FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("no form on the link page (status %d)", res.StatusCode)
		}
		u, _ := url.Parse(link)
		res, err = c.PostForm(g.base+"/ui/login", url.Values{"csrf": {m[1]}, "link": {u.Query().Get("link")}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		page, err := c.Get(g.base + "/ui/pending")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(page.Body)
		page.Body.Close()
		return res.StatusCode, page.StatusCode == http.StatusOK && strings.Contains(string(b), testReviewer)
	}
	if status, ok := use(); !ok {
		t.Fatalf("the link did not log in (status %d)", status)
	}
	if status, ok := use(); ok || status != http.StatusUnauthorized {
		t.Errorf("the link worked twice (status %d)", status)
	}
	if _, err := g.srv.LoginLink(context.Background(), testReviewer, time.Hour); err == nil {
		t.Error("a login link for an hour was made")
	}
}
