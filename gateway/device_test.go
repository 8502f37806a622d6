package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest/idp"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

// deviceGateway starts a gateway whose sso block uses p, with device
// login on or off, for the reviewer group "airlock-reviewers".
func deviceGateway(t *testing.T, p *idp.Provider, deviceLogin bool) *testGateway {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "cli-secret")
	if err := os.WriteFile(secret, []byte("cli secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	on := ""
	if deviceLogin {
		on = "device_login = true"
	}
	return startGateway(t, sharedSSHD(t), gwOptions{extraConfig: fmt.Sprintf(`
sso {
  issuer                    = %q
  client_id                 = "airlock-web"
  reviewer_groups           = ["airlock-reviewers"]
  ca_file                   = %q
  device_client_id          = "airlock-cli"
  device_client_secret_file = %q
  %s
}
`, p.Issuer, p.CAFile, secret, on)})
}

// beginDevice begins a device login for reviewer over the HTTP API, as
// airlock login --sso does.
func beginDevice(g *testGateway, reviewer string) (api.DeviceLogin, error) {
	var d api.DeviceLogin
	err := api.NewHTTPClient(g.base, "").Do(context.Background(), http.MethodPost, "/v1/login/device", api.DeviceLoginRequest{Reviewer: reviewer}, &d)
	return d, err
}

// pollDevice polls a device login until it is done.
func pollDevice(t *testing.T, g *testGateway, d api.DeviceLogin) (api.LoginResponse, error) {
	t.Helper()
	for {
		var r api.DeviceTokenResponse
		if err := api.NewHTTPClient(g.base, "").Do(context.Background(), http.MethodPost, "/v1/login/device/token", api.DeviceTokenRequest{DeviceID: d.DeviceID}, &r); err != nil {
			return api.LoginResponse{}, err
		}
		if r.Status == "ok" {
			return r.LoginResponse, nil
		}
		if err := context.Cause(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the provider's answer is awaited, not timed
	}
}

// The device grant hands a reviewer session to whoever began it, so it is
// off unless the operator turns it on, and then bound to the reviewer its
// starter names: a login begun for sofia and approved at the provider by
// olga hands out nothing (recorded as a failed login); the gateway's page
// of the login, the one link to the provider's page with the code in it,
// shows where, when and for whom it was begun.
func TestDeviceLoginOptInAndBoundToTheReviewerNamed(t *testing.T) {
	t.Parallel()
	p := idp.Start(t, idp.DeviceClient{ID: "airlock-cli", Secret: "cli secret"})
	p.AddUser("sofia", idp.User{Password: "sofia's idp password", Groups: []string{"airlock-reviewers"}})
	p.AddUser("olga", idp.User{Password: "olga's idp password", Groups: []string{"airlock-reviewers"}})

	t.Run("off unless device_login is set", func(t *testing.T) {
		g := deviceGateway(t, p, false)
		_, err := beginDevice(g, "sofia")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Err.Message, "device_login = true") {
			t.Fatalf("a device login with device_login unset: %v", err)
		}
	})

	g := deviceGateway(t, p, true)
	t.Run("a login names its reviewer", func(t *testing.T) {
		_, err := beginDevice(g, "")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Err.Message, "--reviewer NAME") {
			t.Fatalf("a device login for no one: %v", err)
		}
	})

	t.Run("the gateway's page shows where, when and for whom", func(t *testing.T) {
		var raw map[string]any
		if err := api.NewHTTPClient(g.base, "").Do(t.Context(), http.MethodPost, "/v1/login/device", api.DeviceLoginRequest{Reviewer: "sofia"}, &raw); err != nil {
			t.Fatal(err)
		}
		if _, ok := raw["verification_uri_complete"]; ok {
			t.Errorf("the answer leads past the gateway's page to the provider's with the code: %v", raw)
		}
		page, _ := raw["page_url"].(string)
		if !strings.HasPrefix(page, g.base+"/ui/device/") {
			t.Fatalf("page_url %q is not the gateway's page", page)
		}
		res, err := g.httpc.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, want := range []string{"127.0.0.1", "sofia", raw["user_code"].(string),
			"Only continue if you started this login yourself, from that address, in the last minutes.",
			"Anyone who started it gets your reviewer session.", `href="` + p.Issuer + `/device`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the device page (status %d) does not show %q:\n%s", res.StatusCode, want, body)
			}
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Error("the device page has no CSP")
		}
		// In a browser: the page runs nothing (its CSP stands), and its
		// link leads on to the provider's page for the code.
		tab := webtest.Tab(t, webtest.Browser(t, chromedp.Flag("ignore-certificate-errors-spki-list", p.SPKI())))
		if err := chromedp.Do(tab, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("device-warning"))); err != nil {
			t.Fatal(err)
		}
		if from, _ := webtest.Eval[string](tab, `document.getElementById('device-from').textContent`); from != "127.0.0.1" {
			t.Errorf("the page says the login was begun from %q", from)
		}
		webtest.Screenshot(t, tab, "", "device-page.png", "")
		if hits, err := webtest.Hits(tab); err != nil || len(hits) != 0 {
			t.Errorf("the device page ran or tried to run something: %q %v", hits, err)
		}
		if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("device-continue"))); err != nil {
			t.Fatal(err)
		}
		if err := webtest.WaitFor(tab, fmt.Sprintf(`location.href.startsWith(%q)`, p.Issuer+"/device"), testkit.Patience); err != nil {
			t.Error(err)
		}

		res, err = g.httpc.Get(g.base + "/ui/device/NOSUCHPAGE")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("an unknown device page: %s", res.Status)
		}
	})

	t.Run("approved by another reviewer: no token", func(t *testing.T) {
		d, err := beginDevice(g, "sofia")
		if err != nil {
			t.Fatal(err)
		}
		p.ApproveDevice(t, d.UserCode, "olga", "olga's idp password", true)
		l, err := pollDevice(t, g, d)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(ae.Err.Message, "approved at the identity provider as olga") {
			t.Fatalf("a login for sofia approved by olga: token handed out %t, reviewer %q, error %v", l.Token != "", l.Reviewer, err)
		}
		var failed bool
		for _, e := range g.auditEntries("auth.failed", "") {
			failed = failed || e.Fields["credential"] == "sso" && e.Fields["subject"] == "login-addr:loopback"
		}
		if !failed {
			t.Error("the refused device login is not recorded as a failed login")
		}
	})

	t.Run("approved by the reviewer named: a token", func(t *testing.T) {
		d, err := beginDevice(g, "sofia")
		if err != nil {
			t.Fatal(err)
		}
		p.ApproveDevice(t, d.UserCode, "sofia", "sofia's idp password", true)
		l, err := pollDevice(t, g, d)
		if err != nil || l.Token == "" || l.Reviewer != "sofia" {
			t.Fatalf("sofia's own device login: token handed out %t, reviewer %q, error %v", l.Token != "", l.Reviewer, err)
		}
	})
}

// Anonymous device logins from one address bucket (all of loopback, from
// any of its addresses) take at most that bucket's share of the places: a
// login from another address still begins, and the refusal says when to
// try again.
func TestDeviceLoginFloodLeavesRoomForOthers(t *testing.T) {
	t.Parallel()
	p := idp.Start(t, idp.DeviceClient{ID: "airlock-cli", Secret: "cli secret"})
	g := deviceGateway(t, p, true)
	sso := g.srv.eng.Review().SSO()
	ctx := t.Context()
	var begun int
	var firstRefusal error
	for i := range 120 {
		_, err := sso.DeviceLogin(ctx, "sofia", fmt.Sprintf("127.0.%d.%d:40000", i/250, 1+i%250))
		switch {
		case err == nil:
			begun++
		case errors.Is(err, engine.ErrRateLimited):
			if firstRefusal == nil {
				firstRefusal = err
			}
		default:
			t.Fatalf("device login %d: %v", i, err)
		}
	}
	if begun == 0 || begun > 5 {
		t.Errorf("%d device logins from loopback began, want 1 to 5", begun)
	}
	if firstRefusal == nil || !strings.Contains(firstRefusal.Error(), "try again then") {
		t.Errorf("the first refusal does not say when to try again: %v", firstRefusal)
	}
	if _, err := sso.DeviceLogin(ctx, "sofia", "192.0.2.10:50000"); err != nil {
		t.Fatalf("after a flood from loopback, a device login from another address: %v", err)
	}
	if _, err := sso.DeviceLogin(ctx, "sofia", "[2001:db8::1]:50000"); err != nil {
		t.Fatalf("after a flood from loopback, a device login over IPv6: %v", err)
	}
	_, err := beginDevice(g, "sofia")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Errorf("one more from loopback: %v", err)
	}
}
