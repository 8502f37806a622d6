package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
	"github.com/airlockgw/airlock/gateway/web/webtest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Reviewers log in to the pages through a real OpenID provider in a real
// Chromium: authorization code with PKCE, admitted by their group, named
// by their preferred_username. The first login makes an "sso" account
// (recorded); a member of no reviewer group, the owner of a name a
// password account holds, and a disabled account are refused, each
// saying why; the signed-in reviewer approves and logs out.
func TestSSOReviewersInChromium(t *testing.T) {
	s := sharedSSHD(t)
	p := idp.Start(t)
	browser := webtest.Browser(t, chromedp.Flag("ignore-certificate-errors-spki-list", p.SPKI()))
	const group = "airlock-reviewers"
	p.AddUser("sofia", idp.User{Password: "sofia's idp password", Email: "sofia@example.com", Groups: []string{"staff", group}})
	p.AddUser("mallory", idp.User{Password: "mallory's idp password", Groups: []string{"staff"}})
	p.AddUser(testReviewer, idp.User{Password: "the namesake's password", Groups: []string{group}})

	g := startSSOGateway(t, s, p, group, "")
	ctx := context.Background()

	t.Run("a group member logs in, approves and logs out", func(t *testing.T) {
		tab := webtest.Tab(t, browser)
		ssoLogin(t, tab, g.base, "sofia", "sofia's idp password")
		if err := webtest.WaitFor(tab, `location.pathname === '/ui/pending' && document.title.includes('Pending approvals')`, testkit.Patience); err != nil {
			text, _ := webtest.Eval[string](tab, `location.href + ' ' + document.body.textContent.slice(0, 600)`)
			t.Fatalf("after the provider's login: %v; the page: %q", err, text)
		}
		if who, _ := webtest.Eval[string](tab, `document.querySelector('.who').textContent`); who != "sofia" {
			t.Errorf("logged in as %q", who)
		}
		agent, _ := g.remoteAgent("sso-test-bot")
		cmd := "echo approved-by-sso"
		res := make(chan *api.Action, 1)
		go func() {
			a, _ := agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: cmd}, api.Events{})
			res <- a
		}()
		q := g.pendingFor(cmd)
		if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q) !== null`, q.ID), testkit.Patience); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("approve-"+string(q.ID)))); err != nil {
			t.Fatal(err)
		}
		if a := <-res; a == nil || !a.Success() || a.Approval.DecidedBy != "sofia" {
			t.Errorf("the action approved through SSO: %+v", a)
		}
		if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("logout"))); err != nil {
			t.Fatal(err)
		}
		if err := webtest.WaitFor(tab, `location.pathname === '/ui/login' && document.body.textContent.includes('You are logged out')`, testkit.Patience); err != nil {
			t.Fatal(err)
		}
		list, err := g.srv.eng.Admin().Reviewers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, r := range list {
			found = found || r.Name == "sofia" && r.Source == approvals.SourceSSO && r.Enabled
		}
		if !found {
			t.Errorf("no sso account for sofia: %+v", list)
		}
		if hits, err := webtest.Hits(tab); err != nil || len(hits) != 0 {
			t.Errorf("the page ran or tried to run something: %q %v", hits, err)
		}
	})

	t.Run("a member of no reviewer group is refused", func(t *testing.T) {
		tab := webtest.Tab(t, browser)
		ssoLogin(t, tab, g.base, "mallory", "mallory's idp password")
		wantProblem(t, tab, "mallory is in none of the reviewer groups")
	})

	t.Run("a password account's name is not taken over", func(t *testing.T) {
		tab := webtest.Tab(t, browser)
		ssoLogin(t, tab, g.base, testReviewer, "the namesake's password")
		wantProblem(t, tab, "a password account is named "+testReviewer)
	})

	t.Run("a disabled account is refused", func(t *testing.T) {
		if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerDisable, "sofia", engine.Secret{}, "test"); err != nil {
			t.Fatal(err)
		}
		tab := webtest.Tab(t, browser)
		ssoLogin(t, tab, g.base, "sofia", "sofia's idp password")
		wantProblem(t, tab, "the reviewer account sofia is disabled")
	})

	t.Run("a callback this browser did not begin is refused", func(t *testing.T) {
		tab := webtest.Tab(t, browser)
		if err := chromedp.Do(tab, chromedp.Navigate(g.base+"/ui/sso/callback?state=forged&code=forged")); err != nil {
			t.Fatal(err)
		}
		wantProblem(t, tab, "did not begin in this browser")
	})

	entries, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(entries), `"reviewer.added"`) || !strings.Contains(string(entries), "sso:"+p.Issuer) {
		t.Error("the sso account's making is not in the audit log")
	}
}

// startSSOGateway starts a gateway whose reviewers sign on through p as
// the web client "airlock-web", admitted by group; extra is more
// configuration.
func startSSOGateway(t *testing.T, s *sshtest.SSHD, p *idp.Provider, group, extra string) *testGateway {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "sso-secret")
	if err := os.WriteFile(secret, []byte("web client secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{extraConfig: fmt.Sprintf(`
sso {
  issuer             = %q
  client_id          = "airlock-web"
  client_secret_file = %q
  reviewer_groups    = [%q]
  ca_file            = %q
}
`, p.Issuer, secret, group, p.CAFile) + extra})
	p.AddWebClient("airlock-web", "web client secret", g.base+"/ui/sso/callback")
	return g
}

// ssoLogin logs user in to the pages at base through the provider's own
// login form, as a reviewer would.
func ssoLogin(t *testing.T, tab context.Context, base, user, password string) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.ID("sso-button")),
		chromedp.Click(chromedp.ID("sso-button")), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password"))); err != nil {
		t.Fatal(err)
	}
}

// wantProblem waits for the page in tab to say want where it reports a
// problem, and fails t with what the page says instead.
func wantProblem(t *testing.T, tab context.Context, want string) {
	t.Helper()
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById('problem') && document.getElementById('problem').textContent.includes(%q)`, want), testkit.Patience); err != nil {
		text, _ := webtest.Eval[string](tab, `document.body.textContent.slice(0, 600)`)
		t.Fatalf("the page does not say %q; it says %q", want, text)
	}
}
