package approvals

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
)

// Reviewer is a verified reviewer: the only principal that can decide
// approval requests or revoke runs. The only ways to get one are
// Accounts.Verify (name and password) and Accounts.VerifyToken (a reviewer
// API token); no run, run token or process converts into one. The zero
// Reviewer decides nothing (ErrNotReviewer).
type Reviewer struct {
	name     string
	accounts *Accounts
	// epoch is the account's epoch when this reviewer was verified: a
	// new password or a disable moves it on, ending what was verified
	// before.
	epoch int64
}

// Name returns the reviewer's account name.
func (r Reviewer) Name() string { return r.name }

// Epoch returns the account's credential epoch when this reviewer was
// verified. A proof bound to it (a remembered login device) ends when a
// new password, a disable, a removal or a rename moves the epoch on.
func (r Reviewer) Epoch() int64 { return r.epoch }

// ReviewerInfo is an account as listed for operators.
type ReviewerInfo struct {
	Name      string    `json:"name"`
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"created_at"`
	// Source is how the reviewer logs in: "password", or "sso" (an
	// account made at its first single sign-on).
	Source string `json:"source"`
}

// maxNameLen bounds reviewer and agent names (ValidName).
const maxNameLen = 64

// The sources of reviewer accounts.
const (
	SourcePassword = "password"
	SourceSSO      = "sso"
)

// Accounts are the reviewer accounts in the state database: name, argon2id
// password hash with a per-user salt (PHC string format), enabled flag, and
// hashed API tokens. Passwords are never stored or logged.
type Accounts struct {
	db    *sqldb.DB
	pw    *passwords
	clock Clock
	owned bool // Close closes db
	// sink records each account change; nil (offline administration):
	// changes are queued in admin_events for the next gateway.
	sink EventSink

	// live holds the elapsed-time (Clock.Elapsed) deadlines of the API
	// tokens this process issued or has seen, by token id, so that setting
	// the system clock back does not lengthen a token.
	mu   sync.Mutex
	live map[string]time.Duration
}

// OpenAccounts opens the reviewer accounts of a state database without
// starting a Store, for offline administration (airlock reviewer add). It
// is safe to use while a gateway has the same file open.
func OpenAccounts(ctx context.Context, path string, params Argon2Params) (*Accounts, error) {
	db, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	return newAccounts(db, params, SystemClock{}, true), nil
}

// OpenAccountsDB is OpenAccounts for a PostgreSQL database (the storage
// block), which the caller closes after the Accounts.
func OpenAccountsDB(ctx context.Context, db *sqldb.DB, params Argon2Params) (*Accounts, error) {
	if err := migratePG(ctx, db); err != nil {
		return nil, err
	}
	return newAccounts(db, params, SystemClock{}, false), nil
}

func newAccounts(db *sqldb.DB, p Argon2Params, clock Clock, owned bool) *Accounts {
	return &Accounts{db: db, pw: newPasswords(p), clock: clock, owned: owned, live: make(map[string]time.Duration)}
}

// Close closes the database if OpenAccounts opened it; an Accounts from
// Store.Accounts is closed with its Store.
func (a *Accounts) Close() error {
	if a.owned {
		return a.db.Close()
	}
	return nil
}

// ValidName reports whether n may name a reviewer (and a remote run's
// agent): 1 to 64 of the letters A–Z and a–z, the digits, '.', '_' and
// '-'. A name that does not is refused before it reaches a limiter key, a
// log line or the audit log.
func ValidName(n string) bool {
	if n == "" || len(n) > maxNameLen {
		return false
	}
	for _, c := range []byte(n) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Add creates an enabled reviewer; by says who (recorded). Names are
// 1–64 characters of [A-Za-z0-9._-]; passwords at least MinPasswordLen
// bytes.
func (a *Accounts) Add(ctx context.Context, name string, password Secret, by string) error {
	if !ValidName(name) {
		return ErrBadReviewerName
	}
	if err := checkPassword(password); err != nil {
		return err
	}
	h := a.pw.hash(password)
	err := a.change(ctx, EventReviewerAdded, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
		// A random first epoch: a name removed and made again never
		// revives the sessions of the one before.
		return tx.ExecContext(ctx, `INSERT INTO reviewers (name, hash, enabled, created_at, epoch)
			VALUES (?, ?, 1, ?, ?) ON CONFLICT(name) DO NOTHING`, name, h, a.clock.Now().UnixNano(), firstEpoch())
	})
	if errors.Is(err, ErrUnknownReviewer) {
		return ErrReviewerExists
	}
	return err
}

// SetPassword replaces a reviewer's password (and salt), and ends every
// session and token the reviewer holds: whoever knew the old password is
// logged out.
func (a *Accounts) SetPassword(ctx context.Context, name string, password Secret, by string) error {
	if err := checkPassword(password); err != nil {
		return err
	}
	var source string
	if err := a.db.QueryRowContext(ctx, `SELECT source FROM reviewers WHERE name = ?`, name).Scan(&source); err == nil && source == SourceSSO {
		return ErrSSOAccount
	}
	h := a.pw.hash(password)
	return a.change(ctx, EventReviewerPassword, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
		return a.endSessions(ctx, tx, name, `UPDATE reviewers SET hash = ?, epoch = epoch + 1 WHERE name = ? AND source = 'password'`, h, name)
	})
}

// SetEnabled enables or disables a reviewer. A disabled reviewer cannot
// log in; its tokens are deleted and its sessions end at once (enabling
// it again brings none back), and a Reviewer it already holds can no
// longer decide.
func (a *Accounts) SetEnabled(ctx context.Context, name string, enabled bool, by string) error {
	kind := EventReviewerEnabled
	if !enabled {
		kind = EventReviewerDisabled
	}
	return a.change(ctx, kind, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
		if enabled {
			return tx.ExecContext(ctx, `UPDATE reviewers SET enabled = 1 WHERE name = ?`, name)
		}
		return a.endSessions(ctx, tx, name, `UPDATE reviewers SET enabled = 0, epoch = epoch + 1 WHERE name = ?`, name)
	})
}

// Remove deletes a reviewer account and its tokens; its sessions end at
// once. What it decided stays in the audit log under its name.
func (a *Accounts) Remove(ctx context.Context, name string, by string) error {
	return a.change(ctx, EventReviewerRemoved, name, by, func(tx *sqldb.Tx) (sql.Result, error) {
		return a.endSessions(ctx, tx, name, `DELETE FROM reviewers WHERE name = ?`, name)
	})
}

// Rename gives a reviewer account a new name, for the person whose
// identity provider now names them so (one identity is one account: the
// provider's new name claim is refused until the account has it). The
// reviewer's sessions and tokens end; what the account decided stays in
// the audit log under the old name. A name another account has, in any
// case, is ErrReviewerExists.
func (a *Accounts) Rename(ctx context.Context, name, newName, by string) error {
	if !ValidName(newName) {
		return ErrBadReviewerName
	}
	if newName == name {
		return ErrReviewerExists
	}
	ev := Event{Kind: EventReviewerRenamed, Reviewer: &ReviewerChange{Name: name, NewName: newName, By: by}}
	return a.changeEvent(ctx, ev, func(tx *sqldb.Tx) (sql.Result, error) {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM reviewers WHERE lower(name) = lower(?) AND name <> ?`, newName, name).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, ErrReviewerExists
		}
		return a.endSessions(ctx, tx, name, `UPDATE reviewers SET name = ?, epoch = epoch + 1 WHERE name = ?`, newName, name)
	})
}

// endSessions deletes a reviewer's API tokens, then runs the account's
// update q (which bumps its epoch, or deletes it: sessions of the pages
// hold the epoch they logged in with).
func (a *Accounts) endSessions(ctx context.Context, tx *sqldb.Tx, name, q string, args ...any) (sql.Result, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM reviewer_tokens WHERE name = ?`, name); err != nil {
		return nil, err
	}
	return tx.ExecContext(ctx, q, args...)
}

// change applies one account change in a transaction that commits only
// once the change is recorded: through the sink when a gateway holds the
// database (the audit log), else queued in admin_events for the next
// gateway to record. A change that touches no row is ErrUnknownReviewer.
func (a *Accounts) change(ctx context.Context, kind EventKind, name, by string, apply func(*sqldb.Tx) (sql.Result, error)) error {
	return a.changeEvent(ctx, Event{Kind: kind, Reviewer: &ReviewerChange{Name: name, By: by}}, apply)
}

// changeEvent is change with the event to record given whole (its time is
// set here).
func (a *Accounts) changeEvent(ctx context.Context, ev Event, apply func(*sqldb.Tx) (sql.Result, error)) error {
	if !ValidName(ev.Reviewer.Name) {
		return ErrUnknownReviewer
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: update reviewer: %w", err)
	}
	defer tx.Rollback()
	res, err := apply(tx)
	if err != nil {
		return fmt.Errorf("state database: update reviewer: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrUnknownReviewer
	}
	ev.Time = a.clock.Now()
	if a.sink != nil {
		if err := a.sink.Record(ctx, ev); err != nil {
			return fmt.Errorf("%w: %w", ErrEventNotRecorded, err)
		}
	} else {
		ev.Reviewer.Offline = true
		body, err := json.Marshal(queuedChange{Kind: ev.Kind, Time: ev.Time, Reviewer: ev.Reviewer})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO admin_events (body) VALUES (?)`, string(body)); err != nil {
			return fmt.Errorf("state database: queue the change for the audit log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("state database: update reviewer: %w", err)
	}
	return nil
}

// queuedChange is an account change in admin_events.
type queuedChange struct {
	Kind     EventKind       `json:"kind"`
	Time     time.Time       `json:"time"`
	Reviewer *ReviewerChange `json:"reviewer"`
}

// recordQueued records the changes made while no gateway ran, in order,
// each deleted once recorded. Called by Open: a change that cannot be
// recorded stops the start.
func (a *Accounts) recordQueued(ctx context.Context) error {
	for {
		var seq int64
		var body string
		err := a.db.QueryRowContext(ctx, `SELECT seq, body FROM admin_events ORDER BY seq LIMIT 1`).Scan(&seq, &body)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("state database: read queued changes: %w", err)
		}
		var q queuedChange
		if err := json.Unmarshal([]byte(body), &q); err != nil || q.Reviewer == nil {
			return fmt.Errorf("state database: queued audit change %d is unreadable", seq)
		}
		if err := a.sink.Record(ctx, Event{Kind: q.Kind, Time: q.Time, Reviewer: q.Reviewer}); err != nil {
			return fmt.Errorf("%w: %w", ErrEventNotRecorded, err)
		}
		if _, err := a.db.ExecContext(ctx, `DELETE FROM admin_events WHERE seq = ?`, seq); err != nil {
			return fmt.Errorf("state database: delete a recorded change: %w", err)
		}
	}
}

// List returns every reviewer account by name.
func (a *Accounts) List(ctx context.Context) ([]ReviewerInfo, error) {
	rows, err := a.db.QueryContext(ctx, `SELECT name, enabled, created_at, source FROM reviewers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("state database: list reviewers: %w", err)
	}
	defer rows.Close()
	var out []ReviewerInfo
	for rows.Next() {
		var ri ReviewerInfo
		var created int64
		if err := rows.Scan(&ri.Name, &ri.Enabled, &created, &ri.Source); err != nil {
			return nil, fmt.Errorf("state database: list reviewers: %w", err)
		}
		ri.CreatedAt = time.Unix(0, created)
		out = append(out, ri)
	}
	return out, rows.Err()
}

// Verify checks a reviewer's name and password. Every failure — unknown
// name, wrong password, disabled account — is ErrBadCredentials and costs
// one argon2id computation, so timing does not tell which.
func (a *Accounts) Verify(ctx context.Context, name string, password Secret) (Reviewer, error) {
	release, err := a.pw.acquire(ctx)
	if err != nil {
		return Reviewer{}, err
	}
	defer release()
	var stored string // "": verified against the decoy
	var known, enabled bool
	var epoch int64
	if ValidName(name) {
		err := a.db.QueryRowContext(ctx, `SELECT hash, enabled, epoch FROM reviewers WHERE name = ?`, name).Scan(&stored, &enabled, &epoch)
		switch {
		case err == nil:
			known = true
		case errors.Is(err, sql.ErrNoRows):
			stored = ""
		default:
			return Reviewer{}, fmt.Errorf("state database: read reviewer: %w", err)
		}
	}
	ok := a.pw.verify(password, stored)
	if !known || !enabled || !ok {
		return Reviewer{}, ErrBadCredentials
	}
	return Reviewer{name: name, accounts: a, epoch: epoch}, nil
}

// Epoch returns a reviewer account's credential epoch now and whether it
// is enabled; ErrUnknownReviewer when there is no such account.
func (a *Accounts) Epoch(ctx context.Context, name string) (epoch int64, enabled bool, err error) {
	if !ValidName(name) {
		return 0, false, ErrUnknownReviewer
	}
	err = a.db.QueryRowContext(ctx, `SELECT epoch, enabled FROM reviewers WHERE name = ?`, name).Scan(&epoch, &enabled)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, ErrUnknownReviewer
	}
	if err != nil {
		return 0, false, fmt.Errorf("state database: read reviewer: %w", err)
	}
	return epoch, enabled, nil
}

// Active reports whether a verified reviewer's account still exists, is
// enabled, and has had no new password and no disable since.
func (a *Accounts) Active(ctx context.Context, rv Reviewer) (bool, error) {
	var on bool
	var epoch int64
	err := a.db.QueryRowContext(ctx, `SELECT enabled, epoch FROM reviewers WHERE name = ?`, rv.name).Scan(&on, &epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return on && epoch == rv.epoch, err
}

// checkReviewer accepts only a Reviewer verified by this store's accounts
// and still enabled. Called with s.mu held.
// CheckReviewer returns ErrNotReviewer unless rv is an enabled reviewer
// of this store now: for what a reviewer does to an action rather than to
// a request or a run (cancelling it).
func (s *Store) CheckReviewer(ctx context.Context, rv Reviewer) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	return s.checkReviewer(ctx, rv)
}

func (s *Store) checkReviewer(ctx context.Context, rv Reviewer) error {
	if rv.accounts != s.accounts || rv.name == "" {
		return ErrNotReviewer
	}
	on, err := s.accounts.Active(ctx, rv)
	if err != nil {
		return fmt.Errorf("state database: read reviewer: %w", err)
	}
	if !on {
		return ErrNotReviewer
	}
	return nil
}

// linksOf returns the identities an identity provider linked to a
// reviewer at its last login. A failure to read them links everything:
// the decision is refused, never let through.
func (a *Accounts) linksOf(ctx context.Context, name string) ([]string, error) {
	var stored sql.NullString
	err := a.db.QueryRowContext(ctx, `SELECT links FROM reviewers WHERE name = ?`, name).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !stored.Valid {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: read the reviewer's links: %w", err)
	}
	var links []string
	if err := json.Unmarshal([]byte(stored.String), &links); err != nil {
		return nil, fmt.Errorf("the reviewer's links are unreadable: %w", err)
	}
	return links, nil
}

// firstEpoch is a new account's epoch: random (below 2^62, so that it can
// count up), never the epoch of an account of that name before.
func firstEpoch() int64 {
	var b [8]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 2)
}
