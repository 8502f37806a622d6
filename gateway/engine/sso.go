package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
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
func newSSO(e *core, cfg *config.Config) (*SSO, error) {
	if cfg.SSO == nil {
		return nil, nil
	}
	d, err := newDiscovery(cfg.SSO.Issuer, cfg.SSO.CAFile)
	if err != nil {
		return nil, fmt.Errorf("sso.%w", err)
	}
	s := &SSO{e: e, cfg: cfg.SSO, discovery: d, devices: map[string]*deviceLogin{}}
	if s.secret, err = readClientSecret("client_secret_file", cfg.SSO.ClientSecretFile); err != nil {
		return nil, err
	}
	s.deviceSecret = s.secret
	if f := cfg.SSO.DeviceClientSecretFile; f != "" || cfg.SSO.DeviceClientID != cfg.SSO.ClientID {
		if s.deviceSecret, err = readClientSecret("device_client_secret_file", f); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readClientSecret reads an OAuth client secret from an owner-only file
// ("" for a public client).
func readClientSecret(attr, file string) (string, error) {
	if file == "" {
		return "", nil
	}
	if err := securefile.CheckSecret(file, nil, -1); err != nil {
		return "", fmt.Errorf("sso.%s: %w", attr, err)
	}
	b, err := os.ReadFile(file)
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

// maxDeviceLogins bounds the device logins waiting at once.
const maxDeviceLogins = 100

// deviceLogin is one device login in progress, by its handle.
type deviceLogin struct {
	expires time.Time
	done    chan struct{}
	// Set when done: the token (taken once), or why not.
	name    string
	token   approvals.Secret
	tokenAt time.Time
	err     error
}

// DeviceLogin begins a device login: the answer says where the reviewer
// approves it, and with which code.
func (s *SSO) DeviceLogin(ctx context.Context, remoteAddr string) (api.DeviceLogin, error) {
	if s.e.draining.Load() {
		return api.DeviceLogin{}, refuse(ErrDraining, "the gateway is stopping; log in again once it is back")
	}
	if s.e.count("device:" + Host(remoteAddr)) {
		return api.DeviceLogin{}, refuse(ErrRateLimited, "too many logins begun from this address; wait a minute")
	}
	s.sweepDevices(s.e.clock.Now())
	full := func() error {
		if len(s.devices) >= maxDeviceLogins {
			return refuse(ErrRateLimited, "too many logins are waiting for their reviewers; try again in a few minutes")
		}
		return nil
	}
	s.devMu.Lock()
	err := full()
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
	d := &deviceLogin{expires: expires, done: make(chan struct{})}
	// The cap is checked again where the login is kept (others may have
	// begun meanwhile), and a stopping engine starts no more work.
	s.devMu.Lock()
	if err := full(); err != nil {
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
		d.name = rv.Name()
		d.token, d.tokenAt, d.err = s.e.issueToken(wctx, rv)
	}()
	interval := int(resp.Interval)
	if interval <= 0 {
		interval = 5
	}
	return api.DeviceLogin{DeviceID: handle, UserCode: resp.UserCode, VerificationURI: resp.VerificationURI,
		VerificationURIComplete: resp.VerificationURIComplete, ExpiresAt: expires.UTC(), IntervalS: interval}, nil
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
		if now.After(d.expires.Add(time.Minute)) {
			delete(s.devices, h)
		}
	}
}
