package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

const (
	// sessionCookie names the reviewer's session; loginCookie carries the
	// login form's CSRF token before there is a session.
	sessionCookie = "airlock_session"
	loginCookie   = "airlock_login"
	// maxSessions bounds memory; the oldest sessions go first.
	maxSessions = 10000
)

// newToken returns 256 bits from the OS CSPRNG, URL-safe.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails: it crashes the program rather than return weak bytes
	return base64.RawURLEncoding.EncodeToString(b)
}

// equalTokens compares two tokens in constant time; empty never matches.
func equalTokens(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// session is one logged-in reviewer in one browser. Sessions live in
// memory: a gateway restart logs everyone out, which is the safe side.
type session struct {
	reviewer Reviewer
	csrf     string
	created  time.Time
	seen     time.Time
	flash    *flash
}

// flash is a message shown once on the next page.
type flash struct {
	OK      bool
	Message string
	// Detail is attacker-influenced text (a command), shown revealed;
	// Cut says what of it was left out ("" for nothing).
	Detail, Cut string
}

// sessions holds the sessions by the SHA-256 of their cookie value, so the
// map never holds a usable credential and a lookup's timing says nothing
// about stored tokens.
type sessions struct {
	mu   sync.Mutex
	m    map[[32]byte]*session
	idle time.Duration
	max  time.Duration
	now  func() time.Time
}

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, idle: idle, max: max, now: now}
}

// create starts a session for rv and returns its cookie value.
func (ss *sessions) create(rv Reviewer) (string, *session) {
	tok := newToken()
	now := ss.now()
	s := &session{reviewer: rv, csrf: newToken(), created: now, seen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions {
		ss.sweepLocked(now)
		for len(ss.m) >= maxSessions {
			var oldestKey [32]byte
			var oldest *session
			for k, v := range ss.m {
				if oldest == nil || v.created.Before(oldest.created) {
					oldestKey, oldest = k, v
				}
			}
			delete(ss.m, oldestKey)
		}
	}
	ss.m[sha256.Sum256([]byte(tok))] = s
	return tok, s
}

// get returns the live session of a cookie value. touch counts the request
// as the reviewer's activity; background polling must not, or an open tab
// would never go idle.
func (ss *sessions) get(tok string, touch bool) (*session, bool) {
	if tok == "" {
		return nil, false
	}
	key := sha256.Sum256([]byte(tok))
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[key]
	if !ok {
		return nil, false
	}
	if ss.expiredLocked(s, now) {
		delete(ss.m, key)
		return nil, false
	}
	if touch {
		s.seen = now
	}
	return s, true
}

func (ss *sessions) expiredLocked(s *session, now time.Time) bool {
	return now.Sub(s.seen) >= ss.idle || now.Sub(s.created) >= ss.max
}

func (ss *sessions) sweepLocked(now time.Time) {
	for k, s := range ss.m {
		if ss.expiredLocked(s, now) {
			delete(ss.m, k)
		}
	}
}

// end deletes a session.
func (ss *sessions) end(tok string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sha256.Sum256([]byte(tok)))
}

// setFlash and takeFlash pass a message to the next page.
func (ss *sessions) setFlash(s *session, f *flash) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.flash = f
}

func (ss *sessions) takeFlash(s *session) *flash {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}
