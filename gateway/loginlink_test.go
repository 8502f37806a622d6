package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/gateway/engine"
)

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestLoginLink: a one-time link logs a reviewer into the pages once, and
// never again; its making is recorded (reviewer.link_issued, without the
// token).
func TestLoginLink(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	link, err := g.srv.LoginLink(context.Background(), testReviewer, "test")
	if err != nil {
		t.Fatal(err)
	}
	if status, ok := useLink(t, g, link); !ok {
		t.Fatalf("the link did not log in (status %d)", status)
	}
	if status, ok := useLink(t, g, link); ok || status != http.StatusUnauthorized {
		t.Errorf("the link worked twice (status %d)", status)
	}
	issued := g.auditEntries("reviewer.link_issued", "")
	u, _ := url.Parse(link)
	if len(issued) != 1 || issued[0].Fields["name"] != testReviewer || issued[0].Fields["by"] != "test" || issued[0].Fields["expires_at"] == nil {
		t.Errorf("reviewer.link_issued entries %+v; want one for %s by test, with expires_at", issued, testReviewer)
	} else if b, _ := json.Marshal(issued[0].Fields); strings.Contains(string(b), u.Query().Get("link")) {
		t.Errorf("the audit entry holds the link's token: %s", b)
	}
}

// TestLoginLinkLifetime: a link not used within engine.LoginLinkTTL is
// refused (the gateway's clock moved, no sleep), and a disabled
// reviewer gets no link at all.
func TestLoginLinkLifetime(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now())
	g := startGateway(t, sharedSSHD(t), gwOptions{options: func(o *Options) { o.clock = clk }})
	ctx := context.Background()
	stale, err := g.srv.LoginLink(ctx, testReviewer, "test")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(engine.LoginLinkTTL - time.Second)
	fresh, err := g.srv.LoginLink(ctx, testReviewer, "test")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if status, ok := useLink(t, g, stale); ok || status != http.StatusUnauthorized {
		t.Errorf("a link used %s after it was made logged in (status %d)", engine.LoginLinkTTL, status)
	}
	if status, ok := useLink(t, g, fresh); !ok {
		t.Errorf("a link used within its lifetime did not log in (status %d)", status)
	}
	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerDisable, testReviewer, engine.Secret{}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.LoginLink(ctx, testReviewer, "test"); !errors.Is(err, engine.ErrForbidden) {
		t.Errorf("a link for a disabled reviewer: %v; want it refused as forbidden", err)
	}
}

// useLink follows link in a new browser-like client and posts its form;
// it reports the login's status and whether the pages then know the
// reviewer.
func useLink(t *testing.T, g *testGateway, link string) (status int, loggedIn bool) {
	t.Helper()
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
	if !strings.Contains(string(body), engine.LoginLinkLifetime) {
		t.Errorf("the link page does not state the link's lifetime, %s:\n%s", engine.LoginLinkLifetime, body)
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
