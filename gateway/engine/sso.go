package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/config"
)

// SSO is the reviewers' single sign-on: OpenID Connect's authorization
// code flow with PKCE against the sso block's provider. A reviewer is
// admitted by the groups claim, named by the name claim, and gets an
// account of source "sso" at the first login (recorded), which the
// operator disables and removes like any other.
type SSO struct {
	e      *Engine
	cfg    *config.SSO
	secret string
	*discovery
}

// newSSO makes the sso block's login, nil without one.
func newSSO(e *Engine, cfg *config.Config) (*SSO, error) {
	if cfg.SSO == nil {
		return nil, nil
	}
	d, err := newDiscovery(cfg.SSO.Issuer, cfg.SSO.CAFile)
	if err != nil {
		return nil, fmt.Errorf("sso.%w", err)
	}
	s := &SSO{e: e, cfg: cfg.SSO, discovery: d}
	if f := cfg.SSO.ClientSecretFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("sso.client_secret_file: %w", err)
		}
		s.secret = strings.TrimSpace(string(b))
		if s.secret == "" {
			return nil, fmt.Errorf("sso.client_secret_file %s is empty", f)
		}
	}
	return s, nil
}

// SSO returns the reviewers' single sign-on, nil when none is configured.
func (e *Engine) SSO() *SSO { return e.sso }

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
func (s *SSO) Finish(ctx context.Context, redirectURL, code, verifier, nonce, remoteAddr string) (approvals.Reviewer, error) {
	oc, p, err := s.oauth(ctx, redirectURL)
	if err != nil {
		return approvals.Reviewer{}, err
	}
	key := loginAddr(Host(remoteAddr))
	if s.e.Blocked(key) {
		return approvals.Reviewer{}, refuse(ErrRateLimited, "too many failed logins from this address; wait a minute")
	}
	fail := func(why string) (approvals.Reviewer, error) {
		s.e.AuthFailed(ctx, "sso", key)
		s.e.log.Warn("single sign-on refused", "issuer", s.cfg.Issuer, "why", why, "addr", Host(remoteAddr))
		return approvals.Reviewer{}, refuse(ErrUnauthorized, why)
	}
	tok, err := oc.Exchange(s.context(ctx), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return fail("the identity provider did not accept the login: " + err.Error())
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return fail("the identity provider sent no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}).Verify(s.context(ctx), raw)
	if err != nil {
		return fail("the ID token is not valid: " + strings.TrimPrefix(err.Error(), "oidc: "))
	}
	if idt.Nonce != nonce {
		return fail("the ID token is not the one this login asked for (nonce)")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return fail("the ID token's claims cannot be read")
	}
	// Providers that keep profile claims out of the ID token serve them
	// at the userinfo endpoint, for the access token just issued.
	if claims[s.cfg.NameClaim] == nil || claims[s.cfg.GroupsClaim] == nil {
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
	if !slices.ContainsFunc(s.cfg.Groups, func(g string) bool { return claimHas(claims[s.cfg.GroupsClaim], g) }) {
		return fail(fmt.Sprintf("%s is in none of the reviewer groups (%s)", name, strings.Join(s.cfg.Groups, ", ")))
	}
	rv, err := s.e.store.Accounts().SSOLogin(ctx, name, "sso:"+s.cfg.Issuer)
	switch {
	case errors.Is(err, approvals.ErrPasswordAccount):
		return fail(fmt.Sprintf("a password account is named %s: log in with its password (an operator removes it to let %s log in through the identity provider)", name, name))
	case errors.Is(err, approvals.ErrBadCredentials):
		return fail(fmt.Sprintf("the reviewer account %s is disabled", name))
	case err != nil:
		return approvals.Reviewer{}, classify(err)
	}
	s.e.log.Info("reviewer logged in through single sign-on", "reviewer", name, "issuer", s.cfg.Issuer, "subject", idt.Subject)
	return rv, nil
}
