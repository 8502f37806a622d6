package approvals

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReviewerPasswords(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	pw := NewSecret("a long enough password")
	if err := acc.Add(ctx, "rita", pw); err != nil {
		t.Fatal(err)
	}
	if err := acc.Add(ctx, "sam", NewSecret("another long password")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user string
		pw         Secret
		want       error
	}{
		{"right password", "rita", pw, nil},
		{"wrong password", "rita", NewSecret("a long enough passwore"), ErrBadCredentials},
		{"another user's password", "sam", pw, ErrBadCredentials},
		{"unknown user", "nobody", pw, ErrBadCredentials},
		{"invalid name", "rita; drop table", pw, ErrBadCredentials},
		{"empty password", "rita", NewSecret(""), ErrBadCredentials},
		{"case differs", "Rita", pw, ErrBadCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv, err := acc.Verify(ctx, tc.user, tc.pw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: err = %v, want %v", err, tc.want)
			}
			if err == nil && rv.Name() != tc.user {
				t.Errorf("reviewer %q, want %q", rv.Name(), tc.user)
			}
		})
	}
	if err := acc.SetEnabled(ctx, "rita", false); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Verify(ctx, "rita", pw); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("disabled reviewer: err = %v, want ErrBadCredentials", err)
	}
	acc.SetEnabled(ctx, "rita", true)
	newPW := NewSecret("a brand new password")
	if err := acc.SetPassword(ctx, "rita", newPW); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Verify(ctx, "rita", pw); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("old password after change: err = %v", err)
	}
	if _, err := acc.Verify(ctx, "rita", newPW); err != nil {
		t.Errorf("new password: %v", err)
	}
}

func TestReviewerAdminErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	acc.Add(ctx, "rita", NewSecret("a long enough password"))
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"duplicate", func() error { return acc.Add(ctx, "rita", NewSecret("a long enough password")) }, ErrReviewerExists},
		{"empty name", func() error { return acc.Add(ctx, "", NewSecret("a long enough password")) }, ErrBadReviewerName},
		{"name with space", func() error { return acc.Add(ctx, "a b", NewSecret("a long enough password")) }, ErrBadReviewerName},
		{"name too long", func() error { return acc.Add(ctx, strings.Repeat("a", 65), NewSecret("a long enough password")) }, ErrBadReviewerName},
		{"short password", func() error { return acc.Add(ctx, "sam", NewSecret("short")) }, ErrWeakPassword},
		{"huge password", func() error { return acc.Add(ctx, "sam", NewSecret(strings.Repeat("x", 2000))) }, ErrWeakPassword},
		{"disable unknown", func() error { return acc.SetEnabled(ctx, "nobody", false) }, ErrUnknownReviewer},
		{"password of unknown", func() error { return acc.SetPassword(ctx, "nobody", NewSecret("a long enough password")) }, ErrUnknownReviewer},
		{"token for unknown", func() error { _, err := acc.IssueToken(ctx, "nobody", time.Hour); return err }, ErrUnknownReviewer},
		{"token with zero ttl", func() error { _, err := acc.IssueToken(ctx, "rita", 0); return err }, ErrBadTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	list, _ := acc.List(ctx)
	if len(list) != 1 || list[0].Name != "rita" || !list[0].Enabled {
		t.Errorf("List = %+v", list)
	}
}

// TestNoPlaintextStored: the database holds an argon2id PHC string with a
// per-user salt, never the password.
func TestNoPlaintextStored(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const pw = "the same password twice"
	e.s.Accounts().Add(ctx, "a", NewSecret(pw))
	e.s.Accounts().Add(ctx, "b", NewSecret(pw))
	e.s.Close()
	db, err := sql.Open("sqlite3", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ha, hb string
	db.QueryRow(`SELECT hash FROM reviewers WHERE name = 'a'`).Scan(&ha)
	db.QueryRow(`SELECT hash FROM reviewers WHERE name = 'b'`).Scan(&hb)
	if strings.Contains(ha, pw) || !strings.HasPrefix(ha, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("stored hash %q", ha)
	}
	_, saltA, _, _ := parsePHC(ha)
	_, saltB, _, _ := parsePHC(hb)
	if ha == hb || string(saltA) == string(saltB) {
		t.Errorf("two users with one password share a hash or salt")
	}
}

func TestDefaultArgon2Hash(t *testing.T) {
	h := hashPassword([]byte("pw"), DefaultArgon2)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("default hash %q", h)
	}
	if !verifyPassword([]byte("pw"), h) || verifyPassword([]byte("pW"), h) {
		t.Error("default-parameter hash does not verify correctly")
	}
}

func TestReviewerTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	acc.Add(ctx, "rita", NewSecret("a long enough password"))
	tok, err := acc.IssueToken(ctx, "rita", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := acc.VerifyToken(ctx, tok)
	if err != nil || rv.Name() != "rita" {
		t.Fatalf("VerifyToken = %q, %v", rv.Name(), err)
	}
	run, runTok := e.remoteRun()
	q, _ := e.authorize(ctx, run.ID, act("call-box", "ls"))
	if _, err := e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Deny}); err != nil {
		t.Errorf("token reviewer cannot decide: %v", err)
	}
	wrong := []byte(tok.Reveal())
	if i := len(reviewerTokenPrefix) + idHexLen + 1; wrong[i] == 'A' {
		wrong[i] = 'B'
	} else {
		wrong[i] = 'A'
	}
	for _, tc := range []struct {
		name string
		tok  Secret
		want error
	}{
		{"a run token is not a reviewer token", runTok, ErrMalformedToken},
		{"wrong secret", NewSecret(string(wrong)), ErrBadCredentials},
		{"garbage", NewSecret("Bearer xyz"), ErrMalformedToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := acc.VerifyToken(ctx, tc.tok); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A reviewer token is not a run token either.
	if _, err := e.s.ResolveRemote(ctx, tok); !errors.Is(err, ErrMalformedToken) {
		t.Errorf("reviewer token as run token: err = %v", err)
	}
	acc.SetEnabled(ctx, "rita", false)
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("token of a disabled reviewer: err = %v", err)
	}
	acc.SetEnabled(ctx, "rita", true)
	e.clock.Advance(time.Hour)
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("expired token: err = %v", err)
	}
}

func TestOpenAccountsOffline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	acc, err := OpenAccounts(ctx, path, cheapArgon)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Add(ctx, "rita", NewSecret("a long enough password")); err != nil {
		t.Fatal(err)
	}
	acc.Close()
	s, err := Open(ctx, Options{Path: path, Sink: &recorder{}, Argon2: cheapArgon})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Accounts().Verify(ctx, "rita", NewSecret("a long enough password")); err != nil {
		t.Errorf("reviewer added offline: %v", err)
	}
}

func TestStateFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: path, Sink: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Path: path, Sink: &recorder{}}); err == nil {
		t.Error("opened a world-readable state database")
	}
}

func FuzzParsePHC(f *testing.F) {
	f.Add(hashPassword([]byte("x"), cheapArgon))
	f.Add("$argon2id$v=19$m=0,t=0,p=0$$")
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := parsePHC(s)
		if err != nil {
			return
		}
		if p.MemoryKiB > maxArgonMemoryKiB || p.Time == 0 || p.Time > maxArgonTime || p.Threads == 0 || len(salt) < 8 || len(key) < 16 {
			t.Errorf("parsePHC(%q) accepted %+v salt %d key %d", s, p, len(salt), len(key))
		}
	})
}

// A hash made with other parameters (the earlier default) keeps verifying:
// parameters travel in the PHC string.
func TestOlderParametersStillVerify(t *testing.T) {
	h := hashPassword([]byte("an older password"), Argon2Params{Time: 3, MemoryKiB: 64 * 1024, Threads: 4})
	if !verifyPassword([]byte("an older password"), h) || verifyPassword([]byte("an older passworD"), h) {
		t.Error("a hash with other parameters does not verify correctly")
	}
}
