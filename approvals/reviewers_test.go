package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/google/go-cmp/cmp"
)

func TestReviewerPasswords(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	pw := NewSecret("a long enough password")
	if err := acc.Add(ctx, "rita", pw, "test"); err != nil {
		t.Fatal(err)
	}
	if err := acc.Add(ctx, "sam", NewSecret("another long password"), "test"); err != nil {
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
	if err := acc.SetEnabled(ctx, "rita", false, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Verify(ctx, "rita", pw); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("disabled reviewer: err = %v, want ErrBadCredentials", err)
	}
	acc.SetEnabled(ctx, "rita", true, "test")
	newPW := NewSecret("a brand new password")
	if err := acc.SetPassword(ctx, "rita", newPW, "test"); err != nil {
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
	acc.Add(ctx, "rita", NewSecret("a long enough password"), "test")
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"duplicate", func() error { return acc.Add(ctx, "rita", NewSecret("a long enough password"), "test") }, ErrReviewerExists},
		{"empty name", func() error { return acc.Add(ctx, "", NewSecret("a long enough password"), "test") }, ErrBadReviewerName},
		{"name with space", func() error { return acc.Add(ctx, "a b", NewSecret("a long enough password"), "test") }, ErrBadReviewerName},
		{"name too long", func() error {
			return acc.Add(ctx, strings.Repeat("a", 65), NewSecret("a long enough password"), "test")
		}, ErrBadReviewerName},
		{"short password", func() error { return acc.Add(ctx, "sam", NewSecret("short"), "test") }, ErrWeakPassword},
		{"huge password", func() error { return acc.Add(ctx, "sam", NewSecret(strings.Repeat("x", 2000)), "test") }, ErrWeakPassword},
		{"disable unknown", func() error { return acc.SetEnabled(ctx, "nobody", false, "test") }, ErrUnknownReviewer},
		{"password of unknown", func() error { return acc.SetPassword(ctx, "nobody", NewSecret("a long enough password"), "test") }, ErrUnknownReviewer},
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
	e.s.Accounts().Add(ctx, "a", NewSecret(pw), "test")
	e.s.Accounts().Add(ctx, "b", NewSecret(pw), "test")
	e.s.Close()
	db := e.opts.DB
	if db == nil {
		raw, err := sql.Open("sqlite3", e.path)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		db = sqldb.Wrap(raw, sqldb.SQLite)
	}
	var ha, hb string
	db.QueryRowContext(ctx, `SELECT hash FROM reviewers WHERE name = 'a'`).Scan(&ha)
	db.QueryRowContext(ctx, `SELECT hash FROM reviewers WHERE name = 'b'`).Scan(&hb)
	if strings.Contains(ha, pw) || !strings.HasPrefix(ha, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("stored hash %q", ha)
	}
	_, saltA, _, _ := parsePHC(ha)
	_, saltB, _, _ := parsePHC(hb)
	if ha == hb || string(saltA) == string(saltB) {
		t.Errorf("two users with one password share a hash or salt")
	}
}

func TestReviewerTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	acc.Add(ctx, "rita", NewSecret("a long enough password"), "test")
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
	acc.SetEnabled(ctx, "rita", false, "test")
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("token of a disabled reviewer: err = %v", err)
	}
	acc.SetEnabled(ctx, "rita", true, "test")
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
	if err := acc.Add(ctx, "rita", NewSecret("a long enough password"), "test"); err != nil {
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

// Changes made while no gateway ran are recorded, in order and once, by
// the next store to open the database; a store that cannot record them
// does not open.
func TestOfflineChangesAreRecordedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	acc, err := OpenAccounts(ctx, path, cheapArgon)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		acc.Add(ctx, "rita", NewSecret("a long enough password"), "unix:root"),
		acc.SetEnabled(ctx, "rita", false, "unix:root"),
		acc.SetEnabled(ctx, "nobody", false, "unix:root"), // no change: nothing queued
	} {
		if err != nil && !errors.Is(err, ErrUnknownReviewer) {
			t.Fatal(err)
		}
	}
	acc.Close()
	if _, err := Open(ctx, Options{Path: path, Sink: &recorder{fail: errSinkDown}, Argon2: cheapArgon}); !errors.Is(err, ErrEventNotRecorded) {
		t.Fatalf("a store whose sink refuses the queued changes opened: %v", err)
	}
	rec := &recorder{}
	s, err := Open(ctx, Options{Path: path, Sink: rec, Argon2: cheapArgon})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.accounts {
		got = append(got, fmt.Sprintf("%s %s by %s offline=%v", e.Kind, e.Reviewer.Name, e.Reviewer.By, e.Reviewer.Offline))
	}
	want := []string{"reviewer.added rita by unix:root offline=true", "reviewer.disabled rita by unix:root offline=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded at start (-want +got):\n%s", diff)
	}
	s.Close()
	rec = &recorder{}
	s, err = Open(ctx, Options{Path: path, Sink: rec, Argon2: cheapArgon})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(rec.accounts) != 0 {
		t.Errorf("recorded twice: %+v", rec.accounts)
	}
}

// Disable, a new password and removal end what the reviewer holds at
// once — tokens and verified sessions — and enabling again brings none of
// it back. Each change is recorded before it takes effect: with the sink
// down, nothing changes.
func TestReviewerLifecycleEndsSessions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	pw := NewSecret("a long enough password")
	if err := acc.Add(ctx, "rita", pw, "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	login := func() (Reviewer, Secret) {
		t.Helper()
		rv, err := acc.Verify(ctx, "rita", pw)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := acc.IssueToken(ctx, "rita", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return rv, tok
	}
	ended := func(what string, rv Reviewer, tok Secret) {
		t.Helper()
		if on, err := acc.Active(ctx, rv); on || err != nil {
			t.Errorf("%s: a session verified before is still active (%v)", what, err)
		}
		if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s: a token issued before still works (%v)", what, err)
		}
	}

	rv, tok := login()
	if on, _ := acc.Active(ctx, rv); !on {
		t.Fatal("a fresh session is not active")
	}
	e.sink.setFail(errSinkDown)
	if err := acc.SetEnabled(ctx, "rita", false, "operator:airlock"); !errors.Is(err, ErrEventNotRecorded) {
		t.Errorf("disable with the audit log down: %v", err)
	}
	e.sink.setFail(nil)
	if on, _ := acc.Active(ctx, rv); !on {
		t.Error("a disable that was not recorded took effect")
	}

	if err := acc.SetEnabled(ctx, "rita", false, "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	ended("disabled", rv, tok)
	if _, err := acc.Verify(ctx, "rita", pw); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a disabled reviewer logged in: %v", err)
	}
	if err := acc.SetEnabled(ctx, "rita", true, "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	ended("enabled again", rv, tok)

	rv, tok = login()
	newPW := NewSecret("another long password")
	if err := acc.SetPassword(ctx, "rita", newPW, "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	ended("new password", rv, tok)
	if _, err := acc.Verify(ctx, "rita", pw); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("the old password still works: %v", err)
	}
	pw = newPW

	rv, tok = login()
	if err := acc.Remove(ctx, "rita", "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	ended("removed", rv, tok)
	if err := acc.Remove(ctx, "rita", "operator:airlock"); !errors.Is(err, ErrUnknownReviewer) {
		t.Errorf("removing twice: %v", err)
	}
	// A new account of the same name revives nothing of the old one's.
	if err := acc.Add(ctx, "rita", pw, "operator:airlock"); err != nil {
		t.Fatal(err)
	}
	ended("removed and made again", rv, tok)
	var got []string
	for _, ev := range e.sink.accounts {
		got = append(got, ev.Kind.String()+" "+ev.Reviewer.Name+" by "+ev.Reviewer.By)
	}
	want := []string{"reviewer.added rita by operator:airlock", "reviewer.disabled rita by operator:airlock",
		"reviewer.enabled rita by operator:airlock", "reviewer.password_changed rita by operator:airlock",
		"reviewer.removed rita by operator:airlock", "reviewer.added rita by operator:airlock"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
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
