package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

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

// useLink logs in with link (gatewaytest.UseLoginLink) and reports the
// login's status and whether the pages then know the reviewer; the link
// page must state the links' lifetime.
func useLink(t *testing.T, g *testGateway, link string) (status int, loggedIn bool) {
	t.Helper()
	c, body, status := gatewaytest.UseLoginLink(t, link)
	if !strings.Contains(body, engine.LoginLinkLifetime) {
		t.Errorf("the link page does not state the link's lifetime, %s:\n%s", engine.LoginLinkLifetime, body)
	}
	page, err := c.Get(g.base + "/ui/pending")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(page.Body)
	page.Body.Close()
	return status, page.StatusCode == http.StatusOK && strings.Contains(string(b), testReviewer)
}
