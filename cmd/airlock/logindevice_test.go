package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// TestPasswordLoginRemembersTheDevice: a password login keeps a
// remembered login device proof in the owner-only session file, logout
// keeps it (alone it is no credential), and later password logins send
// it: while the loopback bucket is spent by guesses, this CLI still logs
// in, and one without the proof is refused.
func TestPasswordLoginRemembersTheDevice(t *testing.T) {
	dir := t.TempDir()
	d := gatewaytest.NewDaemon(t, dir, gatewaytest.Config{StateDir: filepath.Join(dir, "state")}, gatewaytest.DaemonOptions{})
	sessionFile := filepath.Join(t.TempDir(), "session.json")
	env := map[string]string{"AIRLOCK_URL": d.HTTPURL, "AIRLOCK_SESSION_FILE": sessionFile, "AIRLOCK_PASSWORD_FILE": writePW(t), "AIRLOCK_REVIEWER": "", "AIRLOCK_CONFIG": ""}
	read := func() session {
		t.Helper()
		var s session
		b, err := os.ReadFile(sessionFile)
		if err != nil || json.Unmarshal(b, &s) != nil {
			t.Fatalf("the session file: %v", err)
		}
		return s
	}
	if _, errs, code := runCLIEnv(t, env, "login", "--reviewer", gatewaytest.Reviewer); code != 0 {
		t.Fatalf("login: exit %d: %s", code, errs)
	}
	key := deviceKey(d.HTTPURL, gatewaytest.Reviewer)
	first := read().Devices[key]
	if !strings.HasPrefix(first.Proof, "v1."+gatewaytest.Reviewer+".") || first.ExpiresAt.IsZero() {
		t.Fatalf("the session file keeps %+v for %q, want a proof", read().Devices, key)
	}
	if out, errs, code := runCLIEnv(t, env, "logout"); code != 0 {
		t.Fatalf("logout: exit %d: %s %s", code, out, errs)
	}
	if s := read(); s.Token != "" || s.Devices[key].Proof != first.Proof {
		t.Fatalf("after logout: token %t, devices %v; want no session and the proof kept", s.Token != "", s.Devices)
	}
	// Guesses with names no reviewer has spend the loopback bucket.
	anon := api.NewHTTPClient(d.HTTPURL, "")
	for i := range 10 {
		anon.Login(context.Background(), fmt.Sprintf("nobody-%d", i), "guess")
	}
	if _, errs, code := runCLIEnv(t, env, "login", "--reviewer", gatewaytest.Reviewer); code != 0 {
		t.Fatalf("login with the remembered device while the address is spent: exit %d: %s", code, errs)
	}
	if s := read(); s.Token == "" || s.Devices[key].Proof == first.Proof {
		t.Errorf("after the second login: token %t, proof renewed %t", s.Token != "", s.Devices[key].Proof != first.Proof)
	}
	env["AIRLOCK_SESSION_FILE"] = filepath.Join(t.TempDir(), "other.json")
	if _, errs, code := runCLIEnv(t, env, "login", "--reviewer", gatewaytest.Reviewer); code == 0 || !strings.Contains(errs, "too many failed logins from this address") {
		t.Errorf("login without the proof: exit %d: %s; want refused by the address's budget", code, errs)
	}
}
