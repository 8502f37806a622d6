package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// IssueToken creates an API token for the reviewer account name at its
// credential epoch now (a login link an operator makes), valid for ttl.
// It is returned once and stored hashed.
func (a *Accounts) IssueToken(ctx context.Context, name string, ttl time.Duration) (Secret, error) {
	return a.issueToken(ctx, name, nil, ttl)
}

// IssueTokenFor creates an API token for a verified reviewer (a login),
// valid for ttl, bound to the credential epoch rv was verified at: the
// token is made in the same statement that checks the account still has
// that epoch, and every check of it compares the epoch again, so a
// password change, disable or removal racing the login leaves no token
// that works.
func (a *Accounts) IssueTokenFor(ctx context.Context, rv Reviewer, ttl time.Duration) (Secret, error) {
	if rv.accounts != a || rv.name == "" {
		return Secret{}, ErrNotReviewer
	}
	return a.issueToken(ctx, rv.name, &rv.epoch, ttl)
}

func (a *Accounts) issueToken(ctx context.Context, name string, epoch *int64, ttl time.Duration) (Secret, error) {
	if ttl <= 0 {
		return Secret{}, ErrBadTTL
	}
	id := newID("")
	tok, hash := newToken(reviewerTokenPrefix, id)
	now, el := a.clock.Now(), a.clock.Elapsed()
	q := `INSERT INTO reviewer_tokens (id, name, hash, created_at, expires_at, epoch)
		SELECT ?, name, ?, ?, ?, epoch FROM reviewers WHERE name = ? AND enabled = 1`
	args := []any{id, hash[:], now.UnixNano(), now.Add(ttl).UnixNano(), name}
	if epoch != nil {
		q += ` AND epoch = ?`
		args = append(args, *epoch)
	}
	res, err := a.db.ExecContext(ctx, q, args...)
	if err != nil {
		return Secret{}, fmt.Errorf("state database: issue reviewer token: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if epoch != nil {
			return Secret{}, ErrBadCredentials
		}
		return Secret{}, ErrUnknownReviewer
	}
	a.mu.Lock()
	a.live[id] = el + ttl
	var out []string
	for k, at := range a.live {
		if el >= at {
			out = append(out, k)
		}
	}
	a.mu.Unlock()
	for _, k := range out { // tokens nobody presented since they ran out
		a.retire(ctx, k)
	}
	return tok, nil
}

// VerifyToken checks a reviewer API token: ErrMalformedToken if it is not
// one (a run token is not), ErrBadCredentials if it does not match, is
// expired, or its account is disabled.
func (a *Accounts) VerifyToken(ctx context.Context, token Secret) (Reviewer, error) {
	id, hash, err := parseToken(reviewerTokenPrefix, token)
	if err != nil {
		return Reviewer{}, err
	}
	var (
		name             string
		stored           []byte
		created, expires int64
		enabled          bool
		epoch            int64
		issuedAt         sql.NullInt64
	)
	err = a.db.QueryRowContext(ctx, `SELECT t.name, t.hash, t.created_at, t.expires_at, r.enabled, r.epoch, t.epoch
		FROM reviewer_tokens t JOIN reviewers r ON r.name = t.name WHERE t.id = ?`, id).
		Scan(&name, &stored, &created, &expires, &enabled, &epoch, &issuedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Reviewer{}, ErrBadCredentials
	}
	if err != nil {
		return Reviewer{}, fmt.Errorf("state database: read reviewer token: %w", err)
	}
	// A token issued under an earlier credential epoch (a password,
	// disable or rename since) is dead, even if it escaped the delete.
	if !equalHash(stored, hash[:]) || !enabled || !issuedAt.Valid || issuedAt.Int64 != epoch || a.tokenDue(ctx, id, time.Unix(0, created), time.Unix(0, expires)) {
		return Reviewer{}, ErrBadCredentials
	}
	return Reviewer{name: name, accounts: a, epoch: epoch}, nil
}

// RevokeToken deletes a reviewer API token (a logout); a token that is
// not one, or is gone already, is no error.
func (a *Accounts) RevokeToken(ctx context.Context, token Secret) error {
	id, _, err := parseToken(reviewerTokenPrefix, token)
	if err != nil {
		return nil
	}
	if _, err := a.db.ExecContext(ctx, `DELETE FROM reviewer_tokens WHERE id = ?`, id); err != nil {
		return fmt.Errorf("state database: revoke reviewer token: %w", err)
	}
	a.mu.Lock()
	delete(a.live, id)
	a.mu.Unlock()
	return nil
}

// armTokens fixes the elapsed-time deadlines of every unexpired API token
// at start-up, so that a token issued before a restart has at most the
// rest of its lifetime from now on.
func (a *Accounts) armTokens(ctx context.Context) error {
	rows, err := a.db.QueryContext(ctx, `SELECT id, created_at, expires_at FROM reviewer_tokens WHERE expires_at > ?`,
		a.clock.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("state database: read reviewer tokens: %w", err)
	}
	defer rows.Close()
	type token struct {
		id               string
		created, expires int64
	}
	var ts []token
	for rows.Next() {
		var t token
		if err := rows.Scan(&t.id, &t.created, &t.expires); err != nil {
			return fmt.Errorf("state database: read reviewer tokens: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("state database: read reviewer tokens: %w", err)
	}
	rows.Close()
	for _, t := range ts {
		a.tokenDue(ctx, t.id, time.Unix(0, t.created), time.Unix(0, t.expires))
	}
	return nil
}

// tokenDue reports whether token id, issued at created and valid until
// expires by the wall clock, has run out: by the wall clock, or in elapsed
// time since this process issued or first saw it. A token issued before a
// restart gets at most the rest of its wall-clock lifetime and never more
// than its whole lifetime, even if the clock was set back meanwhile. A
// token that ran out in elapsed time while its wall-clock deadline is
// still ahead is deleted, so that nothing arms it again.
func (a *Accounts) tokenDue(ctx context.Context, id string, created, expires time.Time) bool {
	now, el := a.clock.Now(), a.clock.Elapsed()
	if !now.Before(expires) {
		return true
	}
	a.mu.Lock()
	at, ok := a.live[id]
	if !ok {
		at = el + min(expires.Sub(now), expires.Sub(created))
		a.live[id] = at
	}
	a.mu.Unlock()
	if el < at {
		return false
	}
	a.retire(ctx, id)
	return true
}

// retire deletes a token that ran out in elapsed time and then forgets its
// deadline. If the delete fails, the deadline stays and keeps refusing it.
func (a *Accounts) retire(ctx context.Context, id string) {
	if _, err := a.db.ExecContext(ctx, `DELETE FROM reviewer_tokens WHERE id = ?`, id); err != nil {
		return
	}
	a.mu.Lock()
	delete(a.live, id)
	a.mu.Unlock()
}
