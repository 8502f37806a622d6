package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// ssoHash is the password hash of an SSO account: no password verifies
// against it.
const ssoHash = "!sso"

// NameChangedError: single sign-on came with a name claim other than the
// name of the account its identity already has. One identity is one
// account: the login is refused until an operator renames the account
// (Accounts.Rename) or the provider's claim is the account's name again.
type NameChangedError struct {
	// Account is the identity's account; Claim the name the provider
	// sent this time.
	Account, Claim string
}

func (e *NameChangedError) Error() string {
	return fmt.Sprintf("the identity's account is %q, the provider now names it %q", e.Account, e.Claim)
}

// Unwrap makes errors.Is(err, ErrNameChanged) hold.
func (e *NameChangedError) Unwrap() error { return ErrNameChanged }

// SSOLogin returns the reviewer an identity provider vouched for. The
// account is found by the identity — subject, the provider's issuer and
// the subject it gives the person, which never change — and never by the
// name claim, which may. The first login of an identity makes its account
// (source "sso", named by the claim, recorded as reviewer.added by by);
// the name is refused (ErrOtherIdentity, ErrPasswordAccount) when another
// account has it, in any case. Later logins come back to that account: a
// disabled one is ErrBadCredentials, and a name claim that differs from
// the account's name other than in case is a *NameChangedError, never a
// second account. The identities the provider links to the reviewer (Unix
// user names, "agent:NAME/" and "agent:NAME/SUBJECT"; see Options.Links)
// are kept until its next login.
func (a *Accounts) SSOLogin(ctx context.Context, name, subject, by string, links []string) (Reviewer, error) {
	if !ValidName(name) {
		return Reviewer{}, ErrBadReviewerName
	}
	if strings.TrimSpace(subject) == "" {
		return Reviewer{}, ErrOtherIdentity
	}
	for range 2 {
		var found string
		var on bool
		var epoch int64
		err := a.db.QueryRowContext(ctx, `SELECT name, enabled, epoch FROM reviewers WHERE sso_subject = ?`, subject).
			Scan(&found, &on, &epoch)
		switch {
		case err == nil && !on:
			return Reviewer{}, ErrBadCredentials
		case err == nil && !strings.EqualFold(found, name):
			return Reviewer{}, &NameChangedError{Account: found, Claim: name}
		case err == nil:
			if err := a.keepLinks(ctx, found, links); err != nil {
				return Reviewer{}, err
			}
			return Reviewer{name: found, accounts: a, epoch: epoch}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Reviewer{}, fmt.Errorf("state database: read reviewer: %w", err)
		}
		// A new identity: its name must be no other account's, in any
		// case ("Bob" is "bob").
		var source string
		err = a.db.QueryRowContext(ctx, `SELECT source FROM reviewers WHERE lower(name) = lower(?)`, name).Scan(&source)
		switch {
		case err == nil && source != SourceSSO:
			return Reviewer{}, ErrPasswordAccount
		case err == nil:
			return Reviewer{}, ErrOtherIdentity
		case !errors.Is(err, sql.ErrNoRows):
			return Reviewer{}, fmt.Errorf("state database: read reviewer: %w", err)
		}
		// Made only if neither the name nor the identity was taken
		// meanwhile (by another login, on another replica): then read
		// again.
		err = a.changeEvent(ctx, Event{Kind: EventReviewerAdded, Reviewer: &ReviewerChange{Name: name, By: by, Subject: subject}},
			func(tx *sqldb.Tx) (sql.Result, error) {
				return tx.ExecContext(ctx, `INSERT INTO reviewers (name, hash, enabled, created_at, source, epoch, sso_subject)
					VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, name, ssoHash, a.clock.Now().UnixNano(), SourceSSO, firstEpoch(), subject)
			})
		if err != nil && !errors.Is(err, ErrUnknownReviewer) {
			return Reviewer{}, err
		}
	}
	return Reviewer{}, fmt.Errorf("reviewer %q could not be made", name)
}

// keepLinks stores the identities the provider linked to an account at
// this login.
func (a *Accounts) keepLinks(ctx context.Context, name string, links []string) error {
	var stored sql.NullString
	if len(links) > 0 {
		b, _ := json.Marshal(links)
		stored = sql.NullString{String: string(b), Valid: true}
	}
	if _, err := a.db.ExecContext(ctx, `UPDATE reviewers SET links = ? WHERE name = ?`, stored, name); err != nil {
		return fmt.Errorf("state database: keep the reviewer's links: %w", err)
	}
	return nil
}

// EndSSOSessions ends every session and token of the account of an
// identity the provider no longer lets review (it came back outside the
// reviewer groups): the account stays, enabled, for when the provider
// admits it again. Recorded as reviewer.sessions_ended by by; no account
// for the identity is no error.
func (a *Accounts) EndSSOSessions(ctx context.Context, subject, by string) error {
	var name string
	err := a.db.QueryRowContext(ctx, `SELECT name FROM reviewers WHERE sso_subject = ?`, subject).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: read reviewer: %w", err)
	}
	err = a.change(ctx, EventReviewerSessionsEnded, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
		return a.endSessions(ctx, tx, name, `UPDATE reviewers SET epoch = epoch + 1 WHERE name = ? AND sso_subject = ?`, name, subject)
	})
	if errors.Is(err, ErrUnknownReviewer) { // removed or renamed meanwhile
		return nil
	}
	return err
}
