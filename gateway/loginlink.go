package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/airlockgw/airlock/approvals"
)

// maxLoginLinkTTL bounds how long a one-time login link works.
const maxLoginLinkTTL = 30 * time.Minute

// loginLinks are one-time reviewer login links: a random token in the URL,
// kept here only as its SHA-256, standing for a short-lived reviewer token
// that never leaves the gateway. A link works once.
type loginLinks struct {
	mu    sync.Mutex
	links map[[sha256.Size]byte]loginLink
}

type loginLink struct {
	reviewerToken approvals.Secret
	expires       time.Time
}

func (l *loginLinks) add(tok string, rt approvals.Secret, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.links == nil {
		l.links = map[[sha256.Size]byte]loginLink{}
	}
	for h, e := range l.links { // forget the expired ones
		if !e.expires.After(expires.Add(-maxLoginLinkTTL)) {
			delete(l.links, h)
		}
	}
	l.links[sha256.Sum256([]byte(tok))] = loginLink{rt, expires}
}

// consume returns the reviewer token behind a link and forgets the link.
// The lookup is by hash, so comparing tokens leaks nothing by timing.
func (l *loginLinks) consume(tok string, now time.Time) (approvals.Secret, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := sha256.Sum256([]byte(tok))
	e, ok := l.links[h]
	if !ok {
		return approvals.Secret{}, false
	}
	delete(l.links, h)
	return e.reviewerToken, now.Before(e.expires)
}

// LoginLink makes a one-time link to the reviewer pages that logs the
// reviewer in without a password, valid for ttl (at most 30 minutes). It is
// for `airlock demo`, and for an operator handing a reviewer a first login;
// anyone holding the link can use it once, so give it only to that person.
func (s *Server) LoginLink(ctx context.Context, reviewer string, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > maxLoginLinkTTL {
		return "", errors.New("gateway: a login link lives between 0 and 30 minutes")
	}
	if s.httpAddr == "" {
		return "", errors.New("gateway: no HTTP listener for the reviewer pages")
	}
	rt, err := s.store.Accounts().IssueToken(ctx, reviewer, ttl)
	if err != nil {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	s.links.add(tok, rt, time.Now().Add(ttl))
	scheme := "http"
	if s.cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + s.httpAddr + "/ui/login?link=" + url.QueryEscape(tok), nil
}
