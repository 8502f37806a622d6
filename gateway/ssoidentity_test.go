package gateway

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

// One identity at the provider is one reviewer account, found by its
// subject, whatever name claim it comes with: the review's attack — the
// subject u-erin logging in as erin, then, its preferred_username
// changed, as erin2 and erin3 — makes no second account; a disable holds
// under any name; an operator's rename lets the new name in as the same
// account and ends the old sessions; and an identity the provider puts
// outside the reviewer groups loses its open session at its next login.
func TestSSOIdentityIsKeyedBySubject(t *testing.T) {
	s := sharedSSHD(t)
	p := idp.Start(t)
	browser := webtest.Browser(t, chromedp.Flag("ignore-certificate-errors-spki-list", p.SPKI()))
	const group, pw = "airlock-reviewers", "erin's idp password"
	p.AddUser("u-erin", idp.User{Password: pw, Groups: []string{group}})
	p.Rename("u-erin", "erin")
	g := startSSOGateway(t, s, p, group, `
reviewer "erin" {
  agents = ["erins-bot"]
}
`)
	ctx := context.Background()
	accounts := func() string {
		list, err := g.srv.eng.Admin().Reviewers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range list {
			if r.Source == "sso" {
				names = append(names, fmt.Sprintf("%s:%v", r.Name, r.Enabled))
			}
		}
		return strings.Join(names, " ")
	}
	loggedInAs := func(tab context.Context, want string) {
		t.Helper()
		if err := webtest.WaitFor(tab, fmt.Sprintf(`location.pathname === '/ui/pending' && document.querySelector('.who') && document.querySelector('.who').textContent === %q`, want), testkit.Patience); err != nil {
			text, _ := webtest.Eval[string](tab, `location.href + ' ' + document.body.textContent.slice(0, 600)`)
			t.Fatalf("not logged in as %s: %q", want, text)
		}
	}
	loggedOut := func(tab context.Context) {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.Navigate(g.base+"/ui/pending")); err != nil {
			t.Fatal(err)
		}
		if err := webtest.WaitFor(tab, `location.pathname === '/ui/login'`, testkit.Patience); err != nil {
			text, _ := webtest.Eval[string](tab, `location.href + ' ' + document.body.textContent.slice(0, 300)`)
			t.Fatalf("a session that should have ended is still open: %q", text)
		}
	}

	first := webtest.Tab(t, browser)
	ssoLogin(t, first, g.base, "u-erin", pw)
	loggedInAs(first, "erin")

	for _, claim := range []string{"erin2", "erin3"} {
		p.Rename("u-erin", claim)
		tab := webtest.Tab(t, browser)
		ssoLogin(t, tab, g.base, "u-erin", pw)
		wantProblem(t, tab, "now names you "+claim+", but your reviewer account here is erin")
	}
	if got := accounts(); got != "erin:true" {
		t.Fatalf("single sign-on accounts %q, want erin alone", got)
	}

	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerDisable, "erin", engine.Secret{}, "test"); err != nil {
		t.Fatal(err)
	}
	var err error
	tab := webtest.Tab(t, browser)
	ssoLogin(t, tab, g.base, "u-erin", pw) // as erin3
	wantProblem(t, tab, "is disabled")
	if err := g.srv.eng.Admin().ChangeReviewer(ctx, engine.ReviewerEnable, "erin", engine.Secret{}, "test"); err != nil {
		t.Fatal(err)
	}

	// The reviewer block's links would be lost by the rename: refused.
	err = g.srv.eng.Admin().RenameReviewer(ctx, "erin", "erin3", "test")
	if err == nil || !strings.Contains(err.Error(), `copy that block as reviewer "erin3" first`) {
		t.Fatalf("a rename that drops the configuration's links: %v", err)
	}
	src, err := os.ReadFile(g.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	both := strings.Replace(string(src), `reviewer "erin" {`, "reviewer \"erin3\" {\n  agents = [\"erins-bot\"]\n}\nreviewer \"erin\" {", 1)
	if err := os.WriteFile(g.cfg.Path, []byte(both), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := g.srv.eng.Admin().RenameReviewer(ctx, "erin", "erin3", "test"); err != nil {
		t.Fatal(err)
	}
	loggedOut(first)
	renamed := webtest.Tab(t, browser)
	ssoLogin(t, renamed, g.base, "u-erin", pw)
	loggedInAs(renamed, "erin3")
	if got := accounts(); got != "erin3:true" {
		t.Fatalf("single sign-on accounts after the rename %q, want erin3 alone", got)
	}

	// The provider takes the identity out of the reviewer groups: its
	// next login is refused and ends the session it still has.
	p.SetGroups("u-erin", "staff")
	tab = webtest.Tab(t, browser)
	ssoLogin(t, tab, g.base, "u-erin", pw)
	wantProblem(t, tab, "in none of the reviewer groups")
	loggedOut(renamed)

	entries, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reviewer.renamed"`, `"new_name":"erin3"`, `"reviewer.sessions_ended"`, `"subject":"` + p.Issuer + ` u-erin"`} {
		if !strings.Contains(string(entries), want) {
			t.Errorf("the audit log has no %s", want)
		}
	}
}
