package main

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
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
	if out, errs, code := runCLIEnv(t, nil, "reviewer", "link", "alice", "--config", cfgFile); code == 0 || out != "" || !strings.Contains(errs, "airlock serve") {
		t.Errorf("a link with no gateway running: exit %d: %q %q; want refused, saying to start the gateway", code, out, errs)
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
	if _, _, status := gatewaytest.UseLoginLink(t, link); status != http.StatusSeeOther {
		t.Errorf("the link's first use: status %d; want %d (logged in)", status, http.StatusSeeOther)
	}
	if _, _, status := gatewaytest.UseLoginLink(t, link); status != http.StatusUnauthorized {
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
