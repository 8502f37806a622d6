package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
)

func init() {
	commands["login"] = command{summary: "log in once as a reviewer (single sign-on, or --reviewer NAME and a password); the reviewer verbs use the saved session", run: runLogin}
	commands["logout"] = command{summary: "end the saved reviewer session at the gateway and forget it (remembered login devices stay)", run: runLogout}
}

// session is a reviewer's saved login: the reviewer verbs use it when no
// reviewer name is given.
type session struct {
	URL       string    `json:"url"`
	Reviewer  string    `json:"reviewer"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	// Devices are the remembered login device proofs password logins
	// gave this user, by gateway and reviewer (see deviceKey). They
	// outlive logout: alone a proof logs nobody in; sent with a password
	// login, it keeps this CLI out of the budget that guesses at the
	// name from elsewhere spend.
	Devices map[string]device `json:"devices,omitempty"`
}

// device is a remembered login device proof and when it ends.
type device struct {
	Proof     string    `json:"proof"`
	ExpiresAt time.Time `json:"expires_at"`
}

// maxDevices bounds the proofs a session file keeps.
const maxDevices = 16

// deviceKey is where a session file keeps the proof for reviewer at the
// gateway at url.
func deviceKey(url, reviewer string) string { return trimURL(url) + " " + reviewer }

// loadSession reads the session file, whatever it holds (the zero
// session when there is none or it cannot be read).
func loadSession() session {
	var s session
	if f, err := sessionFile(); err == nil {
		if b, err := os.ReadFile(f); err == nil {
			json.Unmarshal(b, &s)
		}
	}
	return s
}

// rememberDevice keeps the proof a password login of reviewer at url gave,
// next to the saved session, dropping expired proofs and, past
// maxDevices, those that end first.
func rememberDevice(url, reviewer string, d device) error {
	s := loadSession()
	if s.Devices == nil {
		s.Devices = map[string]device{}
	}
	s.Devices[deviceKey(url, reviewer)] = d
	for k, v := range s.Devices {
		if time.Now().After(v.ExpiresAt) {
			delete(s.Devices, k)
		}
	}
	for len(s.Devices) > maxDevices {
		first := ""
		for k, v := range s.Devices {
			if first == "" || v.ExpiresAt.Before(s.Devices[first].ExpiresAt) {
				first = k
			}
		}
		delete(s.Devices, first)
	}
	_, err := saveSession(s)
	return err
}

// sessionFile is where the session is saved: $AIRLOCK_SESSION_FILE, else
// airlock/session.json in the user's configuration directory.
func sessionFile() (string, error) {
	if f := os.Getenv("AIRLOCK_SESSION_FILE"); f != "" {
		return f, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no place to save the session (%v): set $AIRLOCK_SESSION_FILE", err)
	}
	return filepath.Join(dir, "airlock", "session.json"), nil
}

// savedSession is the saved session for the gateway at url, if there is
// one that has not expired.
func savedSession(url string) (session, bool) {
	f, err := sessionFile()
	if err != nil {
		return session{}, false
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return session{}, false
	}
	var s session
	if json.Unmarshal(b, &s) != nil || s.URL != url || s.Token == "" || time.Now().After(s.ExpiresAt) {
		return session{}, false
	}
	return s, true
}

func saveSession(s session) (string, error) {
	f, err := sessionFile()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	return f, securefile.WriteFile(f, append(b, '\n'), securefile.WriteOptions{Mode: 0o600, UID: -1, GID: -1})
}

const loginUsage = `airlock login [--url URL] [--config FILE] [--sso] --reviewer NAME

Logs you in as a reviewer and saves the session (owner-only, in
$AIRLOCK_SESSION_FILE or airlock/session.json in your configuration
directory); airlock approvals and airlock runs then use it until it
expires, without asking for a password. NAME defaults to
$AIRLOCK_REVIEWER.

A password login also leaves a remembered login device proof in that
file (it stays there after airlock logout). It is no credential: sent with
later password logins as the same reviewer, it charges a wrong password
to this CLI's own budget, so that guesses at the name from elsewhere,
which the gateway slows, never slow this CLI down.

With --sso, through the gateway's single sign-on (when its operator has
turned device login on): open the gateway's page it prints in any
browser, check where and when the login was begun, continue to your
identity provider and approve as NAME; this terminal needs no browser.
The gateway hands out the session only if the provider approved NAME.
Without --sso, with NAME's password (read from the terminal or
$AIRLOCK_PASSWORD_FILE).`

func runLogin(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock login", loginUsage, stderr)
	rf := addReviewerFlags(fs, false)
	sso := fs.Bool("sso", false, "log in through the gateway's single sign-on (device login) instead of with a password")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	ctx := context.Background()
	var err error
	if rf.gateway, rf.from, err = rf.resolveURL(); err != nil {
		return failf(stderr, "%v", err)
	}
	var l api.LoginResponse
	if *sso {
		if l, err = rf.deviceLogin(ctx, stderr); err != nil {
			return failf(stderr, "%v", err)
		}
	} else if *rf.name != "" || os.Getenv("AIRLOCK_REVIEWER") != "" {
		c, err := rf.passwordLogin(ctx, stderr)
		if err != nil {
			return failf(stderr, "%v", err)
		}
		l = c
	} else {
		return failf(stderr, "name the reviewer to log in as: airlock login --reviewer NAME (with its password), or airlock login --sso --reviewer NAME (through the identity provider)")
	}
	s := loadSession() // the remembered devices stay
	s.URL, s.Reviewer, s.Token, s.ExpiresAt = trimURL(rf.gateway), l.Reviewer, l.Token, l.ExpiresAt
	f, err := saveSession(s)
	if err != nil {
		return failf(stderr, "logged in, but the session could not be saved: %v", err)
	}
	fmt.Fprintf(stdout, "logged in to %s as %s until %s (session saved in %s)\n", rf.gateway, l.Reviewer, l.ExpiresAt.Local().Format(timeWithZone), f)
	return 0
}

func runLogout(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock logout", "airlock logout\n\nEnds the saved reviewer session at the gateway and deletes it. Remembered login\ndevices stay in the session file: alone they log nobody in (see airlock login -h).", stderr)
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	f, err := sessionFile()
	if err != nil {
		return failf(stderr, "%v", err)
	}
	b, err := os.ReadFile(f)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stdout, "not logged in")
		return 0
	}
	var s session
	if err != nil || json.Unmarshal(b, &s) != nil {
		return failf(stderr, "the session file %s cannot be read: delete it", f)
	}
	if s.Token == "" {
		fmt.Fprintln(stdout, "not logged in")
		return 0
	}
	err = api.NewHTTPClient(s.URL, s.Token).Do(context.Background(), http.MethodDelete, "/v1/login", nil, nil)
	var ae *api.Error
	switch {
	case err == nil, errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		// Ended now, or had ended already.
	default:
		return failf(stderr, "the gateway at %s did not end the session (%v); it stays saved: try again", s.URL, err)
	}
	if len(s.Devices) > 0 {
		// The remembered devices stay: alone they are no credential.
		if _, err := saveSession(session{Devices: s.Devices}); err != nil {
			return failf(stderr, "logged out, but the session file could not be rewritten without the session: %v (delete %s)", err, f)
		}
	} else if err := os.Remove(f); err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintf(stdout, "logged out of %s\n", s.URL)
	return 0
}

// passwordLogin logs the named reviewer in with a password.
func (rf *reviewerFlags) passwordLogin(ctx context.Context, stderr io.Writer) (api.LoginResponse, error) {
	if *rf.name == "" {
		*rf.name = os.Getenv("AIRLOCK_REVIEWER")
	}
	pass, err := readPassword(stderr, fmt.Sprintf("password for reviewer %s: ", *rf.name), false)
	if err != nil {
		return api.LoginResponse{}, err
	}
	key := deviceKey(rf.gateway, *rf.name)
	var l api.LoginResponse
	req := api.LoginRequest{Reviewer: *rf.name, Password: pass, Device: loadSession().Devices[key].Proof}
	if err := api.NewHTTPClient(rf.gateway, "").Do(ctx, http.MethodPost, "/v1/login", req, &l); err != nil {
		return api.LoginResponse{}, rf.explain(err)
	}
	if l.Reviewer == "" {
		l.Reviewer = *rf.name
	}
	if l.Device != "" {
		if err := rememberDevice(rf.gateway, *rf.name, device{Proof: l.Device, ExpiresAt: l.DeviceExpiresAt}); err != nil {
			fmt.Fprintf(stderr, "airlock: logged in, but this device could not be remembered (%v): later logins as %s are slowed like any other while someone guesses at its password\n", err, *rf.name)
		}
	}
	return l, nil
}

// trimURL is a gateway URL as sessions compare it.
func trimURL(u string) string { return strings.TrimRight(u, "/") }

// deviceLogin logs the named reviewer in through the gateway's single
// sign-on (the device authorization grant): it prints the gateway's page
// for the login and what that page shows, and waits for the approval.
func (rf *reviewerFlags) deviceLogin(ctx context.Context, stderr io.Writer) (api.LoginResponse, error) {
	if *rf.name == "" {
		*rf.name = os.Getenv("AIRLOCK_REVIEWER")
	}
	if *rf.name == "" {
		return api.LoginResponse{}, errors.New("name the reviewer you approve as at the identity provider: airlock login --sso --reviewer NAME")
	}
	anon := api.NewHTTPClient(rf.gateway, "")
	var d api.DeviceLogin
	if err := anon.Do(ctx, http.MethodPost, "/v1/login/device", api.DeviceLoginRequest{Reviewer: *rf.name}, &d); err != nil {
		return api.LoginResponse{}, rf.explain(err)
	}
	page := d.PageURL
	if page == "" {
		page = trimURL(rf.gateway) + "/ui/device/" + d.Page
	}
	fmt.Fprintf(stderr, "Device login for reviewer %s, begun from %s at %s; the code is %s.\n", d.Reviewer, d.From, d.StartedAt.Local().Format(timeWithZone), d.UserCode)
	fmt.Fprintf(stderr, "Open the gateway's page for it in a browser, check what it shows, and continue from there to the identity provider:\n  %s\n", page)
	fmt.Fprintf(stderr, "(Or open %s and enter the code %s.)\n", d.VerificationURI, d.UserCode)
	fmt.Fprintf(stderr, "Only continue if you started this login yourself, from that address, in the last minutes. Anyone who started it gets your reviewer session.\n")
	fmt.Fprintf(stderr, "Waiting until %s…\n", d.ExpiresAt.Local().Format(time.TimeOnly))
	interval := time.Duration(max(d.IntervalS, 1)) * time.Second
	for {
		var t api.DeviceTokenResponse
		if err := anon.Do(ctx, http.MethodPost, "/v1/login/device/token", api.DeviceTokenRequest{DeviceID: d.DeviceID}, &t); err != nil {
			return api.LoginResponse{}, rf.explain(err)
		}
		if t.Status == "ok" {
			return t.LoginResponse, nil
		}
		if time.Now().After(d.ExpiresAt.Add(time.Minute)) {
			return api.LoginResponse{}, errors.New("the login was not approved before it expired; run airlock login again")
		}
		time.Sleep(interval)
	}
}
