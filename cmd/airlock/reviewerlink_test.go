package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestReviewerLinkCLI: airlock reviewer link, run by the gateway's user
// against the running airlock serve, prints a link and its one lifetime;
// the link logs the reviewer into the pages once and never again, its
// making is in the audit log, and a disabled reviewer gets none. (That a
// link stops working after its lifetime is TestLoginLinkLifetime's, in
// package gateway, whose clock a test moves.)
func TestReviewerLinkCLI(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "run")
	if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	d := startDaemon(t, cfgFile, state)
	out, errs, code := d.cli("reviewer", "link", "alice")
	if code != 0 {
		t.Fatalf("reviewer link: exit %d: %s", code, errs)
	}
	link := strings.TrimSpace(out)
	if !strings.HasPrefix(link, d.HTTPURL+"/ui/login?link=") {
		t.Fatalf("reviewer link printed %q; want a link to %s/ui/login", out, d.HTTPURL)
	}
	if want := "it works once, for " + engine.LoginLinkLifetime; !strings.Contains(errs, want) {
		t.Errorf("reviewer link said %q; want it to say %q", errs, want)
	}
	if status := loginWithLink(t, link); status != http.StatusSeeOther {
		t.Errorf("the link's first use: status %d; want %d (logged in)", status, http.StatusSeeOther)
	}
	if status := loginWithLink(t, link); status != http.StatusUnauthorized {
		t.Errorf("the link's second use: status %d; want %d", status, http.StatusUnauthorized)
	}
	exported, _, _ := d.cli("audit", "export")
	if !regexp.MustCompile(`"reviewer\.link_issued"[^\n]*"name":"alice"`).MatchString(exported) {
		t.Errorf("the audit log has no reviewer.link_issued for alice:\n%s", exported)
	}
	u, _ := url.Parse(link)
	if strings.Contains(exported, u.Query().Get("link")) {
		t.Error("the audit log holds the link's token")
	}
	if _, errs, code := d.cli("reviewer", "disable", "alice"); code != 0 {
		t.Fatalf("reviewer disable: %s", errs)
	}
	if out, errs, code := d.cli("reviewer", "link", "alice"); code == 0 || out != "" || !strings.Contains(errs, "disabled") || !strings.Contains(errs, "airlock reviewer enable alice") {
		t.Errorf("a link for a disabled reviewer: exit %d: %q %q; want refused, saying how to enable it", code, out, errs)
	}
	if _, errs, code := d.cli("reviewer", "link", "nobody"); code == 0 || !strings.Contains(errs, `no reviewer "nobody"`) {
		t.Errorf("a link for no reviewer: exit %d: %s", code, errs)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// loginWithLink opens link as a browser would and submits its form; the
// login's HTTP status.
func loginWithLink(t *testing.T, link string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfField.FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("no form on the link page (status %d)", res.StatusCode)
	}
	u, _ := url.Parse(link)
	res, err = c.PostForm(u.Scheme+"://"+u.Host+"/ui/login", url.Values{"csrf": {m[1]}, "link": {u.Query().Get("link")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
