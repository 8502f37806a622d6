package approvals

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/crypto/argon2"
)

// Argon2Params are argon2id parameters (RFC 9106).
type Argon2Params struct {
	Time      uint32 // passes
	MemoryKiB uint32
	Threads   uint8
}

// DefaultArgon2 is the OWASP Password Storage Cheat Sheet's argon2id
// configuration (m=19 MiB, t=2, p=1), tens of milliseconds per
// verification. RFC 9106's 64 MiB option was the first choice, but every
// verification (and the decoy for unknown names) then holds 64 MiB, and
// the garbage collector doubles it: a gateway's memory would be set by its
// login rate, not its actions. Verifying still costs its memory for that
// time, so Accounts lets at most maxConcurrentVerify run at once. Stored
// hashes carry their parameters, so older hashes keep verifying.
var DefaultArgon2 = Argon2Params{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}

const (
	argonSaltLen = 16 // RFC 9106 §3.1: 128 bits
	argonKeyLen  = 32

	// MinPasswordLen and maxPasswordLen bound reviewer passwords (bytes).
	MinPasswordLen = 12
	maxPasswordLen = 1024
	maxNameLen     = 64

	maxConcurrentVerify = 2
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

// ReviewerInfo is an account as listed for operators.
type ReviewerInfo struct {
	Name      string    `json:"name"`
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"created_at"`
	// Source is how the reviewer logs in: "password", or "sso" (an
	// account made at its first single sign-on).
	Source string `json:"source"`
}

// The sources of reviewer accounts.
const (
	SourcePassword = "password"
	SourceSSO      = "sso"
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

// Accounts are the reviewer accounts in the state database: name, argon2id
// password hash with a per-user salt (PHC string format), enabled flag, and
// hashed API tokens. Passwords are never stored or logged.
type Accounts struct {
	db     *sqldb.DB
	params Argon2Params
	clock  Clock
	owned  bool   // Close closes db
	dummy  string // a hash to verify unknown names against
	sem    chan struct{}
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
	if p == (Argon2Params{}) {
		p = DefaultArgon2
	}
	a := &Accounts{db: db, params: p, clock: clock, owned: owned, sem: make(chan struct{}, maxConcurrentVerify),
		live: make(map[string]time.Duration)}
	a.dummy = hashPassword([]byte("airlock dummy password"), p)
	return a
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

func checkPassword(p Secret) error {
	if len(p.s) < MinPasswordLen {
		return ErrWeakPassword
	}
	if len(p.s) > maxPasswordLen {
		return fmt.Errorf("approvals: password longer than %d bytes: %w", maxPasswordLen, ErrWeakPassword)
	}
	return nil
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
	h := hashPassword([]byte(password.s), a.params)
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
	h := hashPassword([]byte(password.s), a.params)
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
	if !ValidName(name) {
		return ErrUnknownReviewer
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("approvals: update reviewer: %w", err)
	}
	defer tx.Rollback()
	res, err := apply(tx)
	if err != nil {
		return fmt.Errorf("approvals: update reviewer: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrUnknownReviewer
	}
	ev := Event{Kind: kind, Time: a.clock.Now(), Reviewer: &ReviewerChange{Name: name, By: by}}
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
			return fmt.Errorf("approvals: queue the change for the audit log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("approvals: update reviewer: %w", err)
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
			return fmt.Errorf("approvals: read queued changes: %w", err)
		}
		var q queuedChange
		if err := json.Unmarshal([]byte(body), &q); err != nil || q.Reviewer == nil {
			return fmt.Errorf("approvals: queued change %d is unreadable", seq)
		}
		if err := a.sink.Record(ctx, Event{Kind: q.Kind, Time: q.Time, Reviewer: q.Reviewer}); err != nil {
			return fmt.Errorf("%w: %w", ErrEventNotRecorded, err)
		}
		if _, err := a.db.ExecContext(ctx, `DELETE FROM admin_events WHERE seq = ?`, seq); err != nil {
			return fmt.Errorf("approvals: delete a recorded change: %w", err)
		}
	}
}

// List returns every reviewer account by name.
func (a *Accounts) List(ctx context.Context) ([]ReviewerInfo, error) {
	rows, err := a.db.QueryContext(ctx, `SELECT name, enabled, created_at, source FROM reviewers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("approvals: list reviewers: %w", err)
	}
	defer rows.Close()
	var out []ReviewerInfo
	for rows.Next() {
		var ri ReviewerInfo
		var created int64
		if err := rows.Scan(&ri.Name, &ri.Enabled, &created, &ri.Source); err != nil {
			return nil, fmt.Errorf("approvals: list reviewers: %w", err)
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
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return Reviewer{}, ctx.Err()
	}
	defer func() { <-a.sem }()
	stored, enabled := a.dummy, false
	var known bool
	var epoch int64
	if ValidName(name) {
		err := a.db.QueryRowContext(ctx, `SELECT hash, enabled, epoch FROM reviewers WHERE name = ?`, name).Scan(&stored, &enabled, &epoch)
		switch {
		case err == nil:
			known = true
		case errors.Is(err, sql.ErrNoRows):
			stored = a.dummy
		default:
			return Reviewer{}, fmt.Errorf("approvals: read reviewer: %w", err)
		}
	}
	ok := verifyPassword([]byte(password.s), stored)
	if !known || !enabled || !ok {
		return Reviewer{}, ErrBadCredentials
	}
	return Reviewer{name: name, accounts: a, epoch: epoch}, nil
}

// IssueToken creates an API token for a reviewer (for scripts and the
// reviewer CLI), valid for ttl. It is returned once and stored hashed.
func (a *Accounts) IssueToken(ctx context.Context, name string, ttl time.Duration) (Secret, error) {
	if ttl <= 0 {
		return Secret{}, ErrBadTTL
	}
	id := newID("")
	tok, hash := newToken(reviewerTokenPrefix, id)
	now, el := a.clock.Now(), a.clock.Elapsed()
	_, err := a.db.ExecContext(ctx, `INSERT INTO reviewer_tokens (id, name, hash, created_at, expires_at)
		SELECT ?, name, ?, ?, ? FROM reviewers WHERE name = ? AND enabled = 1`,
		id, hash[:], now.UnixNano(), now.Add(ttl).UnixNano(), name)
	if err != nil {
		return Secret{}, fmt.Errorf("approvals: issue token: %w", err)
	}
	var n int
	if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM reviewer_tokens WHERE id = ?`, id).Scan(&n); err != nil || n == 0 {
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
	)
	err = a.db.QueryRowContext(ctx, `SELECT t.name, t.hash, t.created_at, t.expires_at, r.enabled, r.epoch
		FROM reviewer_tokens t JOIN reviewers r ON r.name = t.name WHERE t.id = ?`, id).
		Scan(&name, &stored, &created, &expires, &enabled, &epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return Reviewer{}, ErrBadCredentials
	}
	if err != nil {
		return Reviewer{}, fmt.Errorf("approvals: read token: %w", err)
	}
	if !equalHash(stored, hash[:]) || !enabled || a.tokenDue(ctx, id, time.Unix(0, created), time.Unix(0, expires)) {
		return Reviewer{}, ErrBadCredentials
	}
	return Reviewer{name: name, accounts: a, epoch: epoch}, nil
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
		return nil, fmt.Errorf("approvals: read the reviewer's links: %w", err)
	}
	var links []string
	if err := json.Unmarshal([]byte(stored.String), &links); err != nil {
		return nil, fmt.Errorf("approvals: the reviewer's links are unreadable: %w", err)
	}
	return links, nil
}

// RevokeToken deletes a reviewer API token (a logout); a token that is
// not one, or is gone already, is no error.
func (a *Accounts) RevokeToken(ctx context.Context, token Secret) error {
	id, _, err := parseToken(reviewerTokenPrefix, token)
	if err != nil {
		return nil
	}
	if _, err := a.db.ExecContext(ctx, `DELETE FROM reviewer_tokens WHERE id = ?`, id); err != nil {
		return fmt.Errorf("approvals: revoke token: %w", err)
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
		return fmt.Errorf("approvals: read tokens: %w", err)
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
			return fmt.Errorf("approvals: read tokens: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("approvals: read tokens: %w", err)
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
func (s *Store) checkReviewer(ctx context.Context, rv Reviewer) error {
	if rv.accounts != s.accounts || rv.name == "" {
		return ErrNotReviewer
	}
	on, err := s.accounts.Active(ctx, rv)
	if err != nil {
		return fmt.Errorf("approvals: read reviewer: %w", err)
	}
	if !on {
		return ErrNotReviewer
	}
	return nil
}

// hashPassword returns the PHC string
// $argon2id$v=19$m=MEM,t=TIME,p=THREADS$SALT$HASH (unpadded base64).
func hashPassword(pw []byte, p Argon2Params) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	key := argon2.IDKey(pw, salt, p.Time, p.MemoryKiB, p.Threads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verifyPassword recomputes the hash with the stored parameters and salt
// and compares in constant time.
func verifyPassword(pw []byte, phc string) bool {
	p, salt, key, err := parsePHC(phc)
	if err != nil {
		return false
	}
	got := argon2.IDKey(pw, salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}

// Bounds a stored hash must respect, so a damaged or hostile row cannot
// make verification allocate without limit.
const (
	maxArgonMemoryKiB = 4 << 20 // 4 GiB
	maxArgonTime      = 64
)

var errBadPHC = errors.New("approvals: malformed password hash")

// parsePHC parses what hashPassword writes, and nothing else.
func parsePHC(s string) (Argon2Params, []byte, []byte, error) {
	var p Argon2Params
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errBadPHC
	}
	var m, t, th uint64
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return p, nil, nil, errBadPHC
	}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		want := [...]string{"m", "t", "p"}[i]
		if !ok || k != want || v == "" || v[0] == '0' || v[0] == '+' {
			return p, nil, nil, errBadPHC
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p, nil, nil, errBadPHC
		}
		switch i {
		case 0:
			m = n
		case 1:
			t = n
		case 2:
			th = n
		}
	}
	if m > maxArgonMemoryKiB || t > maxArgonTime || th > 255 || th == 0 || m < 8*th {
		return p, nil, nil, errBadPHC
	}
	b64 := base64.RawStdEncoding.Strict()
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, errBadPHC
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errBadPHC
	}
	return Argon2Params{Time: uint32(t), MemoryKiB: uint32(m), Threads: uint8(th)}, salt, key, nil
}

// firstEpoch is a new account's epoch: random (below 2^62, so that it can
// count up), never the epoch of an account of that name before.
func firstEpoch() int64 {
	var b [8]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 2)
}
