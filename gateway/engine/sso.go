package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// SSO is the reviewers' single sign-on: OpenID Connect's authorization
// code flow with PKCE against the sso block's provider. A reviewer is
// admitted by the groups claim, named by the name claim, and gets an
// account of source "sso" at the first login (recorded), which the
// operator disables and removes like any other.
type SSO struct {
	e      *core
	cfg    *config.SSO
	secret string
	// deviceSecret is the device client's secret (the web client's when
	// they are one client).
	deviceSecret string
	*discovery

	devMu   sync.Mutex
	devices map[string]*deviceLogin
}

// newSSO makes the sso block's login, nil without one.
func newSSO(e *core, cfg *config.Config) (*SSO, error) { return newSSOAs(e, cfg, -1) }

// newSSOAs is newSSO with the client secret files checked as files of
// account uid (-1: whoever runs this), as config check run by root checks
// them for the gateway's service user.
func newSSOAs(e *core, cfg *config.Config, uid int) (*SSO, error) {
	if cfg.SSO == nil {
		return nil, nil
	}
	d, err := newDiscovery(cfg.SSO.Issuer, cfg.SSO.CAFile)
	if err != nil {
		return nil, fmt.Errorf("sso.%w", err)
	}
	s := &SSO{e: e, cfg: cfg.SSO, discovery: d, devices: map[string]*deviceLogin{}}
	if s.secret, err = readClientSecret("client_secret_file", cfg.SSO.ClientSecretFile, uid); err != nil {
		return nil, err
	}
	s.deviceSecret = s.secret
	if f := cfg.SSO.DeviceClientSecretFile; f != "" || cfg.SSO.DeviceClientID != cfg.SSO.ClientID {
		if s.deviceSecret, err = readClientSecret("device_client_secret_file", f, uid); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readClientSecret reads an OAuth client secret from a file only account
// uid (-1: whoever runs this) may read ("" for a public client).
func readClientSecret(attr, file string, uid int) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := securefile.ReadSecretFor(file, config.MaxSecretFile, uid)
	if err != nil {
		return "", fmt.Errorf("sso.%s: %w", attr, err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("sso.%s %s is empty", attr, file)
	}
	return secret, nil
}

// SSO returns the reviewers' single sign-on, nil when none is configured.
func (e *Review) SSO() *SSO { return e.conf().sso }

// Issuer is the provider's issuer URL.
func (s *SSO) Issuer() string { return s.cfg.Issuer }

// oauth is the OAuth client for redirectURL, once the provider is known.
func (s *SSO) oauth(ctx context.Context, redirectURL string) (*oauth2.Config, *oidc.Provider, error) {
	p, err := s.get(ctx, s.e.clock.Now())
	if err != nil {
		s.e.log.Warn("sso discovery failed", "issuer", s.cfg.Issuer, "error", err)
		return nil, nil, refuse(ErrUnavailable, "the identity provider cannot be reached; try again, or log in with a password")
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.secret, Endpoint: p.Endpoint(),
		RedirectURL: redirectURL, Scopes: s.cfg.Scopes}, p, nil
}

// AuthCodeURL is where a reviewer's browser goes to log in: the
// provider's authorization endpoint with state, nonce and the PKCE
// challenge of verifier.
func (s *SSO) AuthCodeURL(ctx context.Context, redirectURL, state, nonce, verifier string) (string, error) {
	oc, _, err := s.oauth(ctx, redirectURL)
	if err != nil {
		return "", err
	}
	return oc.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Finish exchanges the code the provider sent back (with the PKCE
// verifier), verifies the ID token (issuer, audience, expiry, nonce), and
// returns the reviewer it names, if one of the reviewer groups is in its
// groups claim. A refusal says why, for the page to show.
func (s *SSO) Finish(ctx context.Context, redirectURL, code, verifier, nonce, remoteAddr string) (Reviewer, error) {
	oc, p, err := s.oauth(ctx, redirectURL)
	if err != nil {
		return Reviewer{}, err
	}
	key := loginAddr(Bucket(remoteAddr))
	if s.e.blocked(key) {
		d := s.e.limiter.retry(key)
		return Reviewer{}, refuseFor(d, "too many failed logins from this address; "+retryText(d))
	}
	fail := func(why string) (approvals.Reviewer, error) {
		s.e.authFailed(ctx, "sso", key)
		s.e.log.Warn("single sign-on refused", "issuer", s.cfg.Issuer, "why", why, "addr", Host(remoteAddr))
		return approvals.Reviewer{}, refuse(ErrUnauthorized, why)
	}
	tok, err := oc.Exchange(s.context(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		rv, err := fail("the identity provider did not accept the login: " + err.Error())
		return Reviewer{rv}, err
	}
	rv, err := s.admit(ctx, p, s.cfg.ClientID, tok, nonce, fail)
	return Reviewer{rv}, err
}

// admit verifies the ID token of tok for clientID (and nonce, when one
// was sent) and returns the reviewer it names if it is in a reviewer
// group; fail says why not.
func (s *SSO) admit(ctx context.Context, p *oidc.Provider, clientID string, tok *oauth2.Token, nonce string, fail func(string) (approvals.Reviewer, error)) (approvals.Reviewer, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return fail("the identity provider sent no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(s.context(ctx), raw)
	if err != nil {
		return fail("the ID token is not valid: " + strings.TrimPrefix(err.Error(), "oidc: "))
	}
	if nonce != "" && idt.Nonce != nonce {
		return fail("the ID token is not the one this login asked for (nonce)")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return fail("the ID token's claims cannot be read")
	}
	// Providers that keep profile claims out of the ID token serve them
	// at the userinfo endpoint, for the access token just issued.
	if claims[s.cfg.NameClaim] == nil || claims[s.cfg.GroupsClaim] == nil || s.cfg.LinksClaim != "" && claims[s.cfg.LinksClaim] == nil {
		if ui, err := p.UserInfo(s.context(ctx), oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			var more map[string]any
			if ui.Claims(&more) == nil {
				for k, v := range more {
					if claims[k] == nil {
						claims[k] = v
					}
				}
			}
		}
	}
	name, _ := claims[s.cfg.NameClaim].(string)
	if !approvals.ValidName(name) {
		return fail(fmt.Sprintf("the %q claim (%q) is not a reviewer name (1 to 64 letters, digits, '.', '_' or '-'); an operator can pick another claim with sso.name_claim", s.cfg.NameClaim, clip(name, maxNameLen)))
	}
	identity := s.cfg.Issuer + " " + idt.Subject
	if !slices.ContainsFunc(s.cfg.Groups, func(g string) bool { return claimHas(claims[s.cfg.GroupsClaim], g) }) {
		// The provider no longer lets this identity review: what it
		// still holds here ends now, not when its sessions run out.
		if err := s.e.store.Accounts().EndSSOSessions(ctx, identity, "sso:"+s.cfg.Issuer); err != nil {
			s.e.log.Error("ending the sessions of an identity outside the reviewer groups", "error", err)
		}
		return fail(fmt.Sprintf("%s is in none of the reviewer groups (%s)", name, strings.Join(s.cfg.Groups, ", ")))
	}
	links := LinksFromClaim(claims[s.cfg.LinksClaim])
	if s.cfg.LinksClaim == "" {
		links = nil
	}
	rv, err := s.e.store.Accounts().SSOLogin(ctx, name, identity, "sso:"+s.cfg.Issuer, links)
	var renamed *approvals.NameChangedError
	switch {
	case errors.As(err, &renamed):
		return fail(fmt.Sprintf("the identity provider now names you %s, but your reviewer account here is %s: one identity is one account, never a second. "+
			"Ask an operator to rename it (airlock reviewer rename %s %s), or have the provider's %q claim say %s again",
			name, renamed.Account, renamed.Account, name, s.cfg.NameClaim, renamed.Account))
	case errors.Is(err, approvals.ErrOtherIdentity):
		return fail(fmt.Sprintf("the reviewer account %s belongs to another identity at the provider (or differs only in case): it is never taken over; an operator can rename one of them (airlock reviewer rename)", name))
	case errors.Is(err, approvals.ErrPasswordAccount):
		return fail(fmt.Sprintf("a password account is named %s: log in with its password (an operator removes it to let %s log in through the identity provider)", name, name))
	case errors.Is(err, approvals.ErrBadCredentials):
		return fail(fmt.Sprintf("the reviewer account %s is disabled", name))
	case err != nil:
		return approvals.Reviewer{}, classify(err)
	}
	s.e.log.Info("reviewer logged in through single sign-on", "reviewer", rv.Name(), "issuer", s.cfg.Issuer, "subject", idt.Subject)
	return rv, nil
}

// LinksFromClaim reads the identities a links claim ties to a reviewer:
// "unix:NAME" (a local user), "agent:NAME" (every identity of an agent)
// and "agent:NAME/SUBJECT" (one verified subject), as a list or one
// string. Entries it cannot read are left out.
func LinksFromClaim(v any) []string {
	var items []string
	switch v := v.(type) {
	case string:
		items = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				items = append(items, s)
			}
		}
	}
	var out []string
	for _, it := range items {
		switch kind, rest, _ := strings.Cut(strings.TrimSpace(it), ":"); kind {
		case "unix":
			if approvals.ValidName(rest) {
				out = append(out, rest)
			}
		case "agent":
			name, subject, hasSubject := strings.Cut(rest, "/")
			switch {
			case !approvals.ValidName(name):
			case !hasSubject:
				out = append(out, "agent:"+name+"/")
			case approvals.ValidSubject(subject):
				out = append(out, "agent:"+name+"/"+subject)
			}
		}
	}
	return out
}

// Device logins: the reviewer CLI (airlock login) on a machine without
// a browser. The gateway is the provider's client: it starts the device
// authorization, shows the CLI the code to enter, polls the provider, and
// hands the CLI a reviewer token once the reviewer has approved.
//
// Whoever starts a device login gets the session of whoever approves it,
// so the grant is off unless sso.device_login is set; the starter names
// the reviewer it logs in as, and the token is handed over only when the
// provider approved that very reviewer; and the reviewer is sent to the
// gateway's own page first (DeviceInfo), which says where and when the
// login was started, before the provider's.

const (
	// maxDeviceLogins bounds the device logins waiting at once, and
	// maxBucketDeviceLogins those begun from one address bucket (see
	// Bucket): anonymous callers from one bucket cannot take every slot.
	// All of loopback is one bucket, so a local user can take loopback's
	// share; others still find room.
	maxDeviceLogins       = 100
	maxBucketDeviceLogins = 5
	// deviceGrace is how long a finished device login waits for its
	// CLI's next poll before it is forgotten.
	deviceGrace = time.Minute
)

// deviceLogin is one device login in progress, by its handle.
type deviceLogin struct {
	DeviceInfo
	// page names the login's page at the gateway (not its handle: the
	// page's link goes to the reviewer, the handle stays with the CLI).
	page   string
	bucket string
	done   chan struct{}
	// Set when done: the token (taken once), or why not.
	name    string
	token   approvals.Secret
	tokenAt time.Time
	err     error
}

// DeviceInfo is what the gateway's page of a device login shows the
// reviewer before sending them on to the provider.
type DeviceInfo struct {
	// Reviewer is the reviewer the starter asked to log in as.
	Reviewer string
	// From is the address the login was started from.
	From string
	// Started and Expires bound the login.
	Started, Expires time.Time
	// UserCode is the code to enter at the provider's VerificationURI;
	// VerificationURIComplete carries it already ("" when the provider
	// has none).
	UserCode                                 string
	VerificationURI, VerificationURIComplete string
}

// DeviceLogin begins a device login as the reviewer named, started from
// remoteAddr: the answer says which page of the gateway the reviewer
// opens (by its id) and with which code.
func (s *SSO) DeviceLogin(ctx context.Context, reviewer, remoteAddr string) (api.DeviceLogin, error) {
	if !s.cfg.DeviceLogin {
		return api.DeviceLogin{}, refuse(ErrForbidden, "device login is off at this gateway (an operator turns it on with device_login = true in the sso block); "+
			"log in with airlock login --reviewer NAME and a password, or in a browser on the gateway's /ui/login page")
	}
	if !approvals.ValidName(reviewer) {
		return api.DeviceLogin{}, refuse(ErrInvalid, "name the reviewer to log in as (airlock login --sso --reviewer NAME): 1 to 64 letters, digits, '.', '_' or '-'")
	}
	if s.e.draining.Load() {
		return api.DeviceLogin{}, refuse(ErrDraining, "the gateway is stopping; log in again once it is back")
	}
	bucket := Bucket(remoteAddr)
	if s.e.count("device:" + bucket) {
		return api.DeviceLogin{}, refuse(ErrRateLimited, "too many logins begun from this address; wait a minute")
	}
	now := s.e.clock.Now()
	s.sweepDevices(now)
	s.devMu.Lock()
	err := s.room(bucket, now)
	s.devMu.Unlock()
	if err != nil {
		return api.DeviceLogin{}, err
	}
	oc, p, err := s.oauth(ctx, "")
	if err != nil {
		return api.DeviceLogin{}, err
	}
	oc.ClientID, oc.ClientSecret = s.cfg.DeviceClientID, s.deviceSecret
	resp, err := oc.DeviceAuth(s.context(ctx))
	if err != nil {
		s.e.log.Warn("device authorization refused", "issuer", s.cfg.Issuer, "error", err)
		return api.DeviceLogin{}, refuse(ErrUnavailable, "the identity provider did not start a device login: "+err.Error())
	}
	handle := rand.Text()
	expires := resp.Expiry
	if expires.IsZero() {
		expires = s.e.clock.Now().Add(10 * time.Minute)
	}
	d := &deviceLogin{page: rand.Text(), bucket: bucket, done: make(chan struct{}), DeviceInfo: DeviceInfo{
		Reviewer: reviewer, From: Host(remoteAddr), Started: now, Expires: expires,
		UserCode: resp.UserCode, VerificationURI: resp.VerificationURI, VerificationURIComplete: resp.VerificationURIComplete}}
	// The caps are checked again where the login is kept (others may have
	// begun meanwhile), and a stopping engine starts no more work.
	s.devMu.Lock()
	if err := s.room(bucket, now); err != nil {
		s.devMu.Unlock()
		return api.DeviceLogin{}, err
	}
	if s.e.draining.Load() {
		s.devMu.Unlock()
		return api.DeviceLogin{}, refuse(ErrDraining, "the gateway is stopping; log in again once it is back")
	}
	s.devices[handle] = d
	s.e.background.Add(1)
	s.devMu.Unlock()
	go func() {
		defer s.e.background.Done()
		defer close(d.done)
		wctx, cancel := context.WithDeadline(s.e.base, expires)
		defer cancel()
		tok, err := oc.DeviceAccessToken(s.context(wctx), resp)
		if err != nil {
			d.err = refuse(ErrUnauthorized, "the device login was not approved in time, or was denied: "+err.Error())
			return
		}
		rv, err := s.admit(wctx, p, oc.ClientID, tok, "", func(why string) (approvals.Reviewer, error) {
			s.e.authFailed(wctx, "sso", loginAddr(Bucket(remoteAddr)))
			s.e.log.Warn("single sign-on refused", "issuer", s.cfg.Issuer, "why", why, "via", "device")
			return approvals.Reviewer{}, refuse(ErrUnauthorized, why)
		})
		if err != nil {
			d.err = err
			return
		}
		if d.err = s.sameReviewer(wctx, d, rv.Name(), remoteAddr); d.err != nil {
			return
		}
		d.name = rv.Name()
		d.token, d.tokenAt, d.err = s.e.issueToken(wctx, rv)
	}()
	interval := int(resp.Interval)
	if interval <= 0 {
		interval = 5
	}
	return api.DeviceLogin{DeviceID: handle, Page: d.page, Reviewer: reviewer, From: d.From, StartedAt: now.UTC(),
		UserCode: resp.UserCode, VerificationURI: resp.VerificationURI, ExpiresAt: expires.UTC(), IntervalS: interval}, nil
}

// room refuses a new device login from bucket when that bucket or the
// gateway holds as many as it may, saying when the first of them
// expires. The logins in progress are never dropped for a new one.
// devMu is held.
func (s *SSO) room(bucket string, now time.Time) error {
	var mine int
	var first, firstMine time.Time
	for _, d := range s.devices {
		end := d.Expires.Add(deviceGrace)
		if first.IsZero() || end.Before(first) {
			first = end
		}
		if d.bucket == bucket {
			mine++
			if firstMine.IsZero() || end.Before(firstMine) {
				firstMine = end
			}
		}
	}
	switch {
	case mine >= maxBucketDeviceLogins:
		return refuse(ErrRateLimited, fmt.Sprintf("%d device logins begun from this address are waiting for their reviewers, the most at once; "+
			"the first of them expires at %s: try again then", mine, firstMine.UTC().Format(time.TimeOnly+" UTC")))
	case len(s.devices) >= maxDeviceLogins:
		return refuse(ErrRateLimited, fmt.Sprintf("%d device logins are waiting for their reviewers, the most at once; "+
			"the first of them expires at %s: try again then", len(s.devices), first.UTC().Format(time.TimeOnly+" UTC")))
	}
	return nil
}

// sameReviewer refuses a device login the provider approved for another
// reviewer than the one its starter named: an approver who did not start
// the login may not hand their session to whoever did. The refusal is a
// failed login of the starter's address, recorded as such.
func (s *SSO) sameReviewer(ctx context.Context, d *deviceLogin, approved, remoteAddr string) error {
	if strings.EqualFold(approved, d.Reviewer) {
		return nil
	}
	s.e.authFailed(ctx, "sso", loginAddr(Bucket(remoteAddr)))
	s.e.log.Warn("device login refused: approved by another reviewer than the one named", "issuer", s.cfg.Issuer,
		"asked", d.Reviewer, "approved", approved, "addr", d.From)
	return refuse(ErrUnauthorized, fmt.Sprintf("the device login was begun for reviewer %s but approved at the identity provider as %s: no session is handed out "+
		"(a device login is approved only by the reviewer it names; the refusal is recorded as a failed login)", d.Reviewer, approved))
}

// DeviceInfo is the device login whose page is page, while it waits for
// its reviewer; false once it is done, gone, or was never begun.
func (s *SSO) DeviceInfo(page string) (DeviceInfo, bool) {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	for _, d := range s.devices {
		if d.page != page {
			continue
		}
		select {
		case <-d.done:
			return DeviceInfo{}, false
		default:
			return d.DeviceInfo, !s.e.clock.Now().After(d.Expires)
		}
	}
	return DeviceInfo{}, false
}

// DeviceToken is a device login's outcome: pending (no error, no
// token), the reviewer's token (once), or why not.
func (s *SSO) DeviceToken(handle string) (api.LoginResponse, bool, error) {
	// Looked up and taken under one lock: the token goes to one poll.
	s.devMu.Lock()
	d, ok := s.devices[handle]
	if !ok {
		s.devMu.Unlock()
		return api.LoginResponse{}, false, refuse(ErrUnauthorized, "no such device login (it finished, expired, or was never begun): run airlock login again")
	}
	select {
	case <-d.done:
		delete(s.devices, handle)
	default:
		s.devMu.Unlock()
		return api.LoginResponse{}, false, nil
	}
	s.devMu.Unlock()
	if d.err != nil {
		return api.LoginResponse{}, true, d.err
	}
	return api.LoginResponse{Token: d.token.Reveal(), ExpiresAt: d.tokenAt, Reviewer: d.name}, true, nil
}

// sweepDevices forgets device logins nobody came back for.
func (s *SSO) sweepDevices(now time.Time) {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	for h, d := range s.devices {
		if now.After(d.Expires.Add(deviceGrace)) {
			delete(s.devices, h)
		}
	}
}
