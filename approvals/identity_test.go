package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const idp = "https://idp.example"

// One identity at the provider is one account, whatever its name claim
// says: a changed claim is refused (never a second account), a disabled
// identity stays disabled under any name, and an operator's rename lets
// the new name in as the same account, recorded.
func TestSSOIdentityIsOneAccount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	login := func(name string) (Reviewer, error) {
		return acc.SSOLogin(ctx, name, idp+" u-erin", "sso:"+idp, nil)
	}
	erin, err := login("erin")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.sink.accounts[0].Reviewer; got.Subject != idp+" u-erin" || got.Name != "erin" {
		t.Errorf("reviewer.added recorded %+v, want the identity", got)
	}
	for _, claim := range []string{"erin2", "erin3"} {
		_, err := login(claim)
		var nc *NameChangedError
		if !errors.As(err, &nc) || nc.Account != "erin" || nc.Claim != claim || !errors.Is(err, ErrNameChanged) {
			t.Fatalf("login as %s: %v, want the name change refused", claim, err)
		}
	}
	// Another case of the same name is the same person's account.
	if rv, err := login("Erin"); err != nil || rv.Name() != "erin" {
		t.Fatalf("login as Erin: %v %v", rv.Name(), err)
	}
	if list, _ := acc.List(ctx); len(list) != 1 {
		t.Fatalf("accounts %+v, want only erin", list)
	}

	// Disabled is disabled for the identity, whatever name it comes with.
	if err := acc.SetEnabled(ctx, "erin", false, "test"); err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"erin", "erin3"} {
		if _, err := login(claim); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("disabled identity as %s: %v, want refused", claim, err)
		}
	}
	if err := acc.SetEnabled(ctx, "erin", true, "test"); err != nil {
		t.Fatal(err)
	}

	// A rename to a name another account has, in any case, is refused.
	e.reviewer("rita")
	for _, taken := range []string{"rita", "RITA"} {
		if err := acc.Rename(ctx, "erin", taken, "test"); !errors.Is(err, ErrReviewerExists) {
			t.Errorf("rename erin to %s: %v, want ErrReviewerExists", taken, err)
		}
	}
	if err := acc.Rename(ctx, "nobody", "erin9", "test"); !errors.Is(err, ErrUnknownReviewer) {
		t.Errorf("rename of nobody: %v", err)
	}
	tok, err := acc.IssueTokenFor(ctx, erin, time.Hour)
	if err == nil {
		t.Fatal("a token for a Reviewer verified before a disable")
	}
	erin, _ = login("erin")
	tok, err = acc.IssueTokenFor(ctx, erin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Rename(ctx, "erin", "erin2", "operator:root"); err != nil {
		t.Fatal(err)
	}
	last := e.sink.accounts[len(e.sink.accounts)-1]
	if last.Kind != EventReviewerRenamed || last.Reviewer.Name != "erin" || last.Reviewer.NewName != "erin2" || last.Reviewer.By != "operator:root" {
		t.Errorf("the rename recorded %+v %+v", last.Kind, last.Reviewer)
	}
	if _, err := acc.VerifyToken(ctx, tok); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a token of erin works after the rename: %v", err)
	}
	if on, _ := acc.Active(ctx, erin); on {
		t.Error("a session of erin lives on after the rename")
	}
	if _, err := login("erin"); !errors.Is(err, ErrNameChanged) {
		t.Errorf("the old name after the rename: %v", err)
	}
	rv, err := login("erin2")
	if err != nil || rv.Name() != "erin2" {
		t.Fatalf("the new name after the rename: %v %v", rv.Name(), err)
	}
	// A second identity never takes the name.
	if _, err := acc.SSOLogin(ctx, "erin2", idp+" u-mallory", "sso:"+idp, nil); !errors.Is(err, ErrOtherIdentity) {
		t.Errorf("another identity as erin2: %v", err)
	}
}

// A login racing a new password leaves no token that works: the token
// is bound to the credential epoch the password was verified at, and
// made only while the account still has it. The interleaving that let a
// token survive (verify, new password, issue) is played out, then 200
// logins race the change.
func TestTokensDieWithTheirCredential(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	old := NewSecret("correct horse battery rita")
	rv := e.reviewer("rita")
	var err error
	if err = acc.SetPassword(ctx, "rita", NewSecret("a brand new password"), "test"); err != nil {
		t.Fatal(err)
	}
	if tok, err := acc.IssueTokenFor(ctx, rv, time.Hour); err == nil {
		_, verr := acc.VerifyToken(ctx, tok)
		t.Fatalf("a login verified before the new password got a token (it works: %v)", verr == nil)
	}
	if err := acc.SetPassword(ctx, "rita", old, "test"); err != nil {
		t.Fatal(err)
	}

	// 200 logins verified at the old password; their tokens are issued
	// while the password changes.
	verified := make([]Reviewer, 200)
	for i := range verified {
		if verified[i], err = acc.Verify(ctx, "rita", old); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		issued []Secret
	)
	start := make(chan struct{})
	for _, rv := range verified {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if tok, err := acc.IssueTokenFor(ctx, rv, time.Hour); err == nil {
				mu.Lock()
				issued = append(issued, tok)
				mu.Unlock()
			}
		}()
	}
	close(start)
	if err := acc.SetPassword(ctx, "rita", NewSecret("the password after the race"), "test"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	alive := 0
	for _, tok := range issued {
		if _, err := acc.VerifyToken(ctx, tok); err == nil {
			alive++
		}
	}
	t.Logf("%d of 200 logins got a token before or during the change", len(issued))
	if alive != 0 {
		t.Fatalf("%d of %d tokens issued under the old password still work", alive, len(issued))
	}
}

// Disabling or removing a reviewer ends every token it holds, those
// issued by logins racing the change included, and neither enabling it
// again nor adding the name back revives one.
func TestTokensDieWithDisableAndRemove(t *testing.T) {
	for _, end := range []struct {
		name string
		end  func(*Accounts) error
		back func(*Accounts) error
	}{
		{"disable",
			func(a *Accounts) error { return a.SetEnabled(context.Background(), "rita", false, "test") },
			func(a *Accounts) error { return a.SetEnabled(context.Background(), "rita", true, "test") }},
		{"remove",
			func(a *Accounts) error { return a.Remove(context.Background(), "rita", "test") },
			func(a *Accounts) error {
				return a.Add(context.Background(), "rita", NewSecret("correct horse battery rita"), "test")
			}},
	} {
		t.Run(end.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			acc := e.s.Accounts()
			rv := e.reviewer("rita")
			before, err := acc.IssueTokenFor(ctx, rv, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			issued := []Secret{before}
			var (
				wg sync.WaitGroup
				mu sync.Mutex
			)
			start := make(chan struct{})
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if tok, err := acc.IssueTokenFor(ctx, rv, time.Hour); err == nil {
						mu.Lock()
						issued = append(issued, tok)
						mu.Unlock()
					}
				}()
			}
			close(start)
			if err := end.end(acc); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if err := end.back(acc); err != nil {
				t.Fatal(err)
			}
			for i, tok := range issued {
				if _, err := acc.VerifyToken(ctx, tok); err == nil {
					t.Errorf("token %d of %d, issued before or during the %s, works after the account came back", i, len(issued), end.name)
				}
			}
			if _, err := acc.IssueTokenFor(ctx, rv, time.Hour); err == nil {
				t.Errorf("a login verified before the %s got a token after it", end.name)
			}
		})
	}
}

// A state database made before one identity was one account, holding
// three accounts of one identity (its name claim changed twice), is
// upgraded to one: the oldest stays, the others are disabled, lose their
// tokens and their binding, and the change reaches the audit log.
func TestUpgradeMergesAnIdentitysAccounts(t *testing.T) {
	ctx := context.Background()
	e := &env{t: t}
	var db *sql.DB
	var opts func(*Options)
	if onPostgres() {
		pg := pgDB(t)
		if err := pg.Migrate(ctx, "state", pgMigrations[:1]); err != nil {
			t.Fatal(err)
		}
		db, opts = pg.DB, func(o *Options) { o.DB = pg }
	} else {
		path := filepath.Join(t.TempDir(), "state.db")
		v9 := strings.Replace(schema, ssoSubjectIndex, "", 1)
		v9 = strings.Replace(v9, "expires_at INTEGER NOT NULL,\n\tepoch      INTEGER\n", "expires_at INTEGER NOT NULL\n", 1)
		// Schema 11's renewals.
		v9 = strings.Replace(v9, "host             TEXT,\n\trenews           TEXT\n", "host             TEXT\n", 1)
		v9 = strings.Replace(v9, "replica      TEXT,\n\trenews       TEXT\n", "replica      TEXT\n", 1)
		v9 = strings.Replace(v9, renewsIndex, "", 1)
		if v9 == schema {
			t.Fatal("cannot make the schema 9 tables")
		}
		lite, err := sql.Open("sqlite3", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer lite.Close()
		if _, err := lite.ExecContext(ctx, v9+agentsTable+adminEventsTable+"PRAGMA user_version = 9;"); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o600)
		db, opts = lite, func(o *Options) { o.Path = path; o.DB = nil }
	}
	for i, name := range []string{"erin", "erin2", "erin3", "sofia"} {
		subject := idp + " u-erin"
		if name == "sofia" {
			subject = idp + " u-sofia"
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO reviewers (name, hash, enabled, created_at, epoch, source, sso_subject)
			VALUES ('%s', '!sso', 1, %d, 7, 'sso', '%s')`, name, i+1, subject)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO reviewer_tokens (id, name, hash, created_at, expires_at)
			VALUES ('tok-%s', '%s', 'x', 1, 4102444800000000000)`, name, name)); err != nil {
			t.Fatal(err)
		}
	}
	if !onPostgres() {
		db.Close()
	}
	*e = *newEnv(t, opts)
	acc := e.s.Accounts()
	list, err := acc.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]bool{}
	for _, r := range list {
		state[r.Name] = r.Enabled
	}
	if want := map[string]bool{"erin": true, "erin2": false, "erin3": false, "sofia": true}; fmt.Sprint(state) != fmt.Sprint(want) {
		t.Errorf("after the upgrade %v, want %v", state, want)
	}
	var kept []string
	rows, err := e.s.db.QueryContext(ctx, `SELECT name FROM reviewer_tokens ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		kept = append(kept, n)
	}
	rows.Close()
	if fmt.Sprint(kept) != "[erin sofia]" {
		t.Errorf("tokens kept for %v, want erin's and sofia's", kept)
	}
	var disabled []string
	for _, ev := range e.sink.accounts {
		if ev.Kind == EventReviewerDisabled && ev.Reviewer.Offline && strings.Contains(ev.Reviewer.By, "older account erin") {
			disabled = append(disabled, ev.Reviewer.Name)
		}
	}
	if fmt.Sprint(disabled) != "[erin2 erin3]" {
		t.Errorf("recorded the upgrade's disables of %v (events %+v)", disabled, e.sink.accounts)
	}
	if rv, err := acc.SSOLogin(ctx, "erin3", idp+" u-erin", "sso:"+idp, nil); !errors.Is(err, ErrNameChanged) {
		t.Errorf("the identity as erin3 after the upgrade: %v %v", rv.Name(), err)
	}
	if rv, err := acc.SSOLogin(ctx, "erin", idp+" u-erin", "sso:"+idp, nil); err != nil || rv.Name() != "erin" {
		t.Errorf("the identity as erin after the upgrade: %v %v", rv.Name(), err)
	}
	// The unbound accounts are never taken by a login of their name.
	if err := acc.SetEnabled(ctx, "erin2", true, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.SSOLogin(ctx, "erin2", idp+" u-other", "sso:"+idp, nil); !errors.Is(err, ErrOtherIdentity) {
		t.Errorf("a new identity took the unbound erin2: %v", err)
	}
}

// Two logins of one new identity at once, under two names (two replicas,
// two tabs), make one account.
func TestOneAccountWhenAnIdentityLogsInTwiceAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	var wg sync.WaitGroup
	for _, name := range []string{"ana", "ana2", "ana3", "ana4"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc.SSOLogin(ctx, name, idp+" u-ana", "sso:"+idp, nil)
		}()
	}
	wg.Wait()
	if list, _ := acc.List(ctx); len(list) != 1 {
		t.Fatalf("one identity has accounts %+v", list)
	}
}
