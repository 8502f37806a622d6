package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// ssoHash is the password hash of an SSO account: no password verifies
// against it.
const ssoHash = "!sso"

// SSOLogin returns the reviewer an identity provider vouched for, making
// its account (source "sso", recorded as reviewer.added by by) at its
// first login, and keeps the identities the provider links to it (Unix
// user names, "agent:NAME/" and "agent:NAME/SUBJECT"; see Options.Links)
// until its next login. A disabled account is ErrBadCredentials; a
// password account of the same name is ErrPasswordAccount.
func (a *Accounts) SSOLogin(ctx context.Context, name, subject, by string, links []string) (Reviewer, error) {
	if !ValidName(name) {
		return Reviewer{}, ErrBadReviewerName
	}
	for range 2 {
		var on bool
		var epoch int64
		var source, found string
		var sub sql.NullString
		// Names are people: "Bob" is "bob" (an account of either case).
		err := a.db.QueryRowContext(ctx, `SELECT name, enabled, epoch, source, sso_subject FROM reviewers WHERE lower(name) = lower(?)`, name).
			Scan(&found, &on, &epoch, &source, &sub)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			err := a.change(ctx, EventReviewerAdded, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
				return tx.ExecContext(ctx, `INSERT INTO reviewers (name, hash, enabled, created_at, source, epoch, sso_subject)
					VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING`, name, ssoHash, a.clock.Now().UnixNano(), SourceSSO, firstEpoch(), subject)
			})
			if err != nil && !errors.Is(err, ErrUnknownReviewer) { // made meanwhile: read it again
				return Reviewer{}, err
			}
			continue
		case err != nil:
			return Reviewer{}, fmt.Errorf("approvals: read reviewer: %w", err)
		case source != SourceSSO:
			return Reviewer{}, ErrPasswordAccount
		case found != name || sub.Valid && sub.String != subject:
			// Another identity at the provider (or the same name in
			// another case) never takes over an account.
			return Reviewer{}, ErrOtherIdentity
		case !on:
			return Reviewer{}, ErrBadCredentials
		}
		var stored sql.NullString
		if len(links) > 0 {
			b, _ := json.Marshal(links)
			stored = sql.NullString{String: string(b), Valid: true}
		}
		if _, err := a.db.ExecContext(ctx, `UPDATE reviewers SET links = ? WHERE name = ?`, stored, name); err != nil {
			return Reviewer{}, fmt.Errorf("approvals: keep the reviewer's links: %w", err)
		}
		return Reviewer{name: name, accounts: a, epoch: epoch}, nil
	}
	return Reviewer{}, fmt.Errorf("approvals: reviewer %q could not be made", name)
}
