package approvals

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/sqldb"
	_ "github.com/mattn/go-sqlite3" // registers "sqlite3"
)

// schemaVersion is PRAGMA user_version; bump it with a migration, and
// add the same change to pgMigrations.
const schemaVersion = 11

// migrations bring a database of version i+1 to version i+2; a new
// database gets schema, which is the latest, at once.
var migrations = []string{
	`ALTER TABLE requests ADD COLUMN stdin_size INTEGER;
	 ALTER TABLE requests ADD COLUMN stdin_sha256 BLOB;
	 ALTER TABLE requests ADD COLUMN stdin_text TEXT;
	 ALTER TABLE requests ADD COLUMN agent_reason TEXT;`,
	agentsTable + `
	 ALTER TABLE runs ADD COLUMN agent_id TEXT;
	 ALTER TABLE runs ADD COLUMN limits TEXT;`,
	`ALTER TABLE reviewers ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
	 ALTER TABLE reviewers ADD COLUMN source TEXT NOT NULL DEFAULT 'password';
	 ALTER TABLE reviewers ADD COLUMN links TEXT;
	 ALTER TABLE reviewers ADD COLUMN sso_subject TEXT;` + adminEventsTable,
	`ALTER TABLE requests ADD COLUMN secret TEXT;
	 ALTER TABLE requests ADD COLUMN command_original TEXT;
	 ALTER TABLE requests ADD COLUMN redactions TEXT;`,
	`ALTER TABLE requests ADD COLUMN class TEXT;
	 ALTER TABLE requests ADD COLUMN class_reason TEXT;
	 ALTER TABLE requests ADD COLUMN escalation TEXT;`,
	`ALTER TABLE requests ADD COLUMN grant_until INTEGER;` + grantIndex + quotaTable,
	`ALTER TABLE requests ADD COLUMN transfer TEXT;`,
	`ALTER TABLE requests ADD COLUMN replica TEXT;
	 ALTER TABLE runs ADD COLUMN host TEXT;`,
	`ALTER TABLE reviewer_tokens ADD COLUMN epoch INTEGER;
	 UPDATE reviewer_tokens SET epoch = (SELECT r.epoch FROM reviewers r WHERE r.name = reviewer_tokens.name);
	 INSERT INTO admin_events (body) SELECT json_object('kind', 'reviewer.disabled',
		'time', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
		'reviewer', json_object('name', r.name, 'by', ` + ssoDuplicateBy + `, 'offline', json('true')))
		FROM reviewers r WHERE ` + ssoDuplicate + ` ORDER BY r.created_at, r.name;
	 DELETE FROM reviewer_tokens WHERE name IN (SELECT r.name FROM reviewers r WHERE ` + ssoDuplicate + `);
	 UPDATE reviewers SET enabled = 0, epoch = epoch + 1, links = NULL, sso_subject = NULL
		WHERE name IN (SELECT r.name FROM reviewers r WHERE ` + ssoDuplicate + `);` + ssoSubjectIndex,
	renewsColumns,
}

// renewsColumns name the run a run renews (and that its requests are
// for), and find a run's renewal.
const renewsColumns = `ALTER TABLE runs ADD COLUMN renews TEXT;
	 ALTER TABLE requests ADD COLUMN renews TEXT;` + renewsIndex

// renewsIndex finds the run that renews a run, and keeps it one: a run
// is renewed at most once, also by replicas acting at once.
const renewsIndex = `
CREATE UNIQUE INDEX IF NOT EXISTS runs_renews ON runs(renews) WHERE renews IS NOT NULL;`

// One identity at the provider is one account. Before schema 10 a
// changed name claim made a second account for the same identity; the
// upgrade keeps the identity's oldest account and disables the others
// (their tokens deleted, their binding to the identity dropped, the
// change queued for the audit log as reviewer.disabled by "upgrade: …").
// ssoDuplicate selects those others (as r).
const ssoDuplicate = `r.sso_subject IS NOT NULL AND EXISTS (SELECT 1 FROM reviewers o
		WHERE o.sso_subject = r.sso_subject AND (o.created_at < r.created_at OR o.created_at = r.created_at AND o.name < r.name))`

// ssoDuplicateBy is the reviewer.disabled entry's "by" of such an account.
const ssoDuplicateBy = `'upgrade: the same single sign-on identity has the older account ' ||
		(SELECT o.name FROM reviewers o WHERE o.sso_subject = r.sso_subject ORDER BY o.created_at, o.name LIMIT 1)`

// ssoSubjectIndex keeps one account per identity at the provider, also
// when two replicas make it at once.
const ssoSubjectIndex = `
CREATE UNIQUE INDEX IF NOT EXISTS reviewers_sso_subject ON reviewers(sso_subject);`

// grantIndex finds a run's granted approvals of one digest.
const grantIndex = `
CREATE INDEX IF NOT EXISTS requests_grant ON requests(run_id, digest) WHERE grant_until IS NOT NULL;`

// quotaTable holds one row per action a quota counted (TakeQuota): the
// rolling windows are counted from it, across restarts.
const quotaTable = `
CREATE TABLE IF NOT EXISTS quota_uses (
	target  TEXT NOT NULL,
	account TEXT NOT NULL,
	run_id  TEXT NOT NULL,
	at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS quota_uses_account ON quota_uses(target, account, at);
CREATE INDEX IF NOT EXISTS quota_uses_run ON quota_uses(run_id, target, account);`

// adminEventsTable holds the reviewer changes made while no gateway ran
// (airlock reviewer add before the first start): the next gateway to
// open the database records them in the audit log, in order, and deletes
// them.
const adminEventsTable = `CREATE TABLE IF NOT EXISTS admin_events (
	seq  INTEGER PRIMARY KEY AUTOINCREMENT,
	body TEXT NOT NULL
);`

const agentsTable = `CREATE TABLE IF NOT EXISTS agents (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	hash       BLOB NOT NULL,
	limits     TEXT,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	revoked_at INTEGER,
	revoked_by TEXT
);`

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	id               TEXT PRIMARY KEY,
	state            TEXT NOT NULL,
	requester        TEXT NOT NULL,
	created_at       INTEGER NOT NULL,
	anchor_pid       INTEGER,
	anchor_start     INTEGER,
	anchor           TEXT,
	explicit         INTEGER NOT NULL DEFAULT 0,
	anchor_gone      INTEGER NOT NULL DEFAULT 0,
	token_hash       BLOB,
	token_expires_at INTEGER,
	approval_id      TEXT,
	decided_by       TEXT,
	decided_at       INTEGER,
	reason           TEXT,
	expires_at       INTEGER,
	max_actions      INTEGER NOT NULL DEFAULT 0,
	scope            TEXT,
	actions          INTEGER NOT NULL DEFAULT 0,
	ended_at         INTEGER,
	end_reason       TEXT,
	ended_by         TEXT,
	end_note         TEXT,
	agent_id         TEXT,
	limits           TEXT,
	host             TEXT,
	renews           TEXT
);
CREATE INDEX IF NOT EXISTS runs_live_anchor ON runs(anchor_gone, anchor_pid);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);` + renewsIndex + `
CREATE TABLE IF NOT EXISTS requests (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL,
	run_id       TEXT NOT NULL REFERENCES runs(id),
	target       TEXT NOT NULL,
	account      TEXT NOT NULL,
	command      TEXT NOT NULL,
	timeout_ns   INTEGER NOT NULL,
	digest       BLOB NOT NULL,
	requester    TEXT NOT NULL,
	requested_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       TEXT NOT NULL,
	decided_by   TEXT,
	decided_at   INTEGER,
	reason       TEXT,
	consumed_at  INTEGER,
	stdin_size   INTEGER,
	stdin_sha256 BLOB,
	stdin_text   TEXT,
	agent_reason TEXT,
	secret       TEXT,
	command_original TEXT,
	redactions   TEXT,
	class        TEXT,
	class_reason TEXT,
	escalation   TEXT,
	grant_until  INTEGER,
	transfer     TEXT,
	replica      TEXT,
	renews       TEXT
);
CREATE INDEX IF NOT EXISTS requests_status ON requests(status);` + grantIndex + quotaTable + `
CREATE TABLE IF NOT EXISTS reviewers (
	name       TEXT PRIMARY KEY,
	hash       TEXT NOT NULL,
	enabled    INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	epoch      INTEGER NOT NULL DEFAULT 0,
	source     TEXT NOT NULL DEFAULT 'password',
	links      TEXT,
	sso_subject TEXT
);` + ssoSubjectIndex + `
CREATE TABLE IF NOT EXISTS reviewer_tokens (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL REFERENCES reviewers(name),
	hash       BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	epoch      INTEGER
);
`

// pgMigrations are the state tables' versions on PostgreSQL
// (sqldb.Migrate): the first is the SQLite schema at version 9 in
// PostgreSQL's types (BIGINT, BYTEA, an identity column); each SQLite
// migration after it has its step here (TestSchemasMatch holds them
// together).
var pgMigrations = []string{
	pgSchemaV1,
	`ALTER TABLE reviewer_tokens ADD COLUMN epoch BIGINT;
	 UPDATE reviewer_tokens SET epoch = (SELECT r.epoch FROM reviewers r WHERE r.name = reviewer_tokens.name);
	 INSERT INTO admin_events (body) SELECT json_build_object('kind', 'reviewer.disabled',
		'time', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		'reviewer', json_build_object('name', r.name, 'by', ` + ssoDuplicateBy + `, 'offline', true))::text
		FROM reviewers r WHERE ` + ssoDuplicate + ` ORDER BY r.created_at, r.name;
	 DELETE FROM reviewer_tokens WHERE name IN (SELECT r.name FROM reviewers r WHERE ` + ssoDuplicate + `);
	 UPDATE reviewers SET enabled = 0, epoch = epoch + 1, links = NULL, sso_subject = NULL
		WHERE name IN (SELECT r.name FROM reviewers r WHERE ` + ssoDuplicate + `);` + ssoSubjectIndex,
	renewsColumns,
}

//go:embed pgschema_v1.sql
var pgSchemaV1 string

// MigratePostgres brings the state tables on PostgreSQL to this build's
// schema (Open does it too).
func MigratePostgres(ctx context.Context, db *sqldb.DB) error { return migratePG(ctx, db) }

// migratePG brings the state tables on PostgreSQL to this build's schema.
func migratePG(ctx context.Context, db *sqldb.DB) error {
	return db.Migrate(ctx, "state", pgMigrations)
}

// openDB opens (creating if needed) the state database: owner-only file
// mode, WAL, synchronous=FULL (a consumed call approval or a decision must
// survive power loss), foreign keys, one connection (the store serialises
// its writes anyway, and one connection makes transactions simple).
func openDB(ctx context.Context, path string) (*sqldb.DB, error) {
	if path == "" {
		return nil, errors.New("no state database path")
	}
	// The path goes into an SQLite URI; keep it free of URI syntax.
	if strings.ContainsAny(path, "?#%") {
		return nil, fmt.Errorf("state database path %q has one of ?#%%", path)
	}
	// It holds reviewer password hashes: refuse to use a file others can read.
	if err := securefile.CreatePrivate(path); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "5000")
	q.Set("_txlock", "immediate")
	// What is deleted is zeroed, not left in free space: an original
	// command is erased when its request ends.
	q.Set("_secure_delete", "on")
	raw, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open state database: %w", err)
	}
	db := sqldb.Wrap(raw, sqldb.SQLite)
	db.SetMaxOpenConns(1)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func migrate(ctx context.Context, db *sqldb.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("state database schema %d is newer than this gateway's %d", v, schemaVersion)
	}
	// The schema (or the migrations) and the version commit together.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	defer tx.Rollback()
	if v == 0 {
		if _, err := tx.ExecContext(ctx, schema+agentsTable+adminEventsTable); err != nil {
			return fmt.Errorf("state database: create schema: %w", err)
		}
		v = schemaVersion
	}
	for i := v; i < schemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i-1]); err != nil {
			return fmt.Errorf("migrate the state database from schema %d: %w", i, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("state database: set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate the state database: %w", err)
	}
	return nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// handle is a database or a connection of it that starts transactions.
type handle interface {
	querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sqldb.Tx, error)
}

// flag stores a bool as 0 or 1: an INTEGER on SQLite, a BIGINT on
// PostgreSQL (which does not take a bool for one).
func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Times are stored as Unix nanoseconds; NULL is the zero time.
func ns(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func fromNS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const runColumns = `id, state, requester, created_at, anchor_pid, anchor_start, anchor, explicit,
	anchor_gone, token_hash, token_expires_at, approval_id, decided_by, decided_at, reason,
	expires_at, max_actions, scope, actions, ended_at, end_reason, ended_by, end_note,
	agent_id, limits, host, renews`

func upsertRun(ctx context.Context, q querier, r *Run) error {
	var pid, start, anchor, scope any
	if r.Anchor != nil {
		b, err := json.Marshal(r.Anchor)
		if err != nil {
			return fmt.Errorf("state database: encode anchor: %w", err)
		}
		pid, start, anchor = r.Anchor.ID.PID, int64(r.Anchor.ID.StartTime), string(b)
	}
	if len(r.Scope) > 0 {
		b, err := json.Marshal(r.Scope)
		if err != nil {
			return fmt.Errorf("state database: encode scope: %w", err)
		}
		scope = string(b)
	}
	var endReason, limits any
	if r.EndReason != 0 {
		endReason = r.EndReason.String()
	}
	if len(r.Limits) > 0 {
		b, err := json.Marshal(r.Limits)
		if err != nil {
			return fmt.Errorf("state database: encode limits: %w", err)
		}
		limits = string(b)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET state=excluded.state, anchor_gone=excluded.anchor_gone,
			approval_id=excluded.approval_id, decided_by=excluded.decided_by,
			decided_at=excluded.decided_at, reason=excluded.reason, expires_at=excluded.expires_at,
			max_actions=excluded.max_actions, scope=excluded.scope, actions=excluded.actions,
			ended_at=excluded.ended_at, end_reason=excluded.end_reason,
			ended_by=excluded.ended_by, end_note=excluded.end_note`,
		string(r.ID), r.State.String(), r.Requester, ns(r.CreatedAt), pid, start, anchor, flag(r.Explicit),
		flag(r.anchorGone), r.tokenHash, ns(r.TokenExpiresAt), nullStr(string(r.ApprovalID)),
		nullStr(r.DecidedBy), ns(r.DecidedAt), nullStr(r.Reason), ns(r.ExpiresAt), r.MaxActions,
		scope, r.Actions, ns(r.EndedAt), endReason, nullStr(r.EndedBy), nullStr(r.EndNote),
		nullStr(string(r.AgentID)), limits, nullStr(r.host), nullStr(string(r.Renews)))
	if err != nil {
		return fmt.Errorf("state database: write run %s: %w", r.ID, err)
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (*Run, error) {
	var (
		r                                                  Run
		id, state                                          string
		pid, start                                         sql.NullInt64
		anchor, approvalID, decidedBy, reason, scope       sql.NullString
		endReason, endedBy, endNote, agentID, limits, host sql.NullString
		renews                                             sql.NullString
		createdAt, tokenExp, decidedAt, expiresAt, endedAt sql.NullInt64
	)
	err := sc.Scan(&id, &state, &r.Requester, &createdAt, &pid, &start, &anchor, &r.Explicit,
		&r.anchorGone, &r.tokenHash, &tokenExp, &approvalID, &decidedBy, &decidedAt, &reason,
		&expiresAt, &r.MaxActions, &scope, &r.Actions, &endedAt, &endReason, &endedBy, &endNote,
		&agentID, &limits, &host, &renews)
	if err != nil {
		return nil, err
	}
	r.ID = RunID(id)
	if r.State, err = ParseRunState(state); err != nil {
		return nil, err
	}
	if anchor.Valid {
		r.Anchor = new(Process)
		if err := json.Unmarshal([]byte(anchor.String), r.Anchor); err != nil {
			return nil, fmt.Errorf("state database: decode anchor of %s: %w", id, err)
		}
	}
	if scope.Valid {
		if err := json.Unmarshal([]byte(scope.String), &r.Scope); err != nil {
			return nil, fmt.Errorf("state database: decode scope of %s: %w", id, err)
		}
	}
	if limits.Valid {
		if err := json.Unmarshal([]byte(limits.String), &r.Limits); err != nil {
			return nil, fmt.Errorf("state database: decode limits of %s: %w", id, err)
		}
	}
	r.AgentID, r.host, r.Renews = AgentID(agentID.String), host.String, RunID(renews.String)
	if endReason.Valid {
		if r.EndReason, err = ParseEndReason(endReason.String); err != nil {
			return nil, err
		}
	}
	r.CreatedAt, r.TokenExpiresAt = fromNS(createdAt), fromNS(tokenExp)
	r.DecidedAt, r.ExpiresAt, r.EndedAt = fromNS(decidedAt), fromNS(expiresAt), fromNS(endedAt)
	r.ApprovalID, r.DecidedBy, r.Reason = RequestID(approvalID.String), decidedBy.String, reason.String
	r.EndedBy, r.EndNote = endedBy.String, endNote.String
	return &r, nil
}

func loadRun(ctx context.Context, q querier, id RunID) (*Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnknownRun
	}
	if err != nil {
		return nil, fmt.Errorf("state database: read run %s: %w", id, err)
	}
	return r, nil
}

func loadRuns(ctx context.Context, q querier, where string, args ...any) ([]*Run, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("state database: read runs: %w", err)
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("state database: read runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

const requestColumns = `id, kind, run_id, target, account, command, timeout_ns, digest, requester,
	requested_at, expires_at, status, decided_by, decided_at, reason, consumed_at,
	stdin_size, stdin_sha256, stdin_text, agent_reason, secret, redactions, class, class_reason, escalation, grant_until, transfer, renews`

// upsertRequest writes r; replica (the gateway replica whose agent waits
// for it) is written when the row is made, never changed.
func upsertRequest(ctx context.Context, q querier, r *Request, replica string) error {
	var stdinSize, stdinSum, stdinText, redactions, original, transfer any
	if r.Transfer != nil {
		b, err := json.Marshal(r.Transfer)
		if err != nil {
			return err
		}
		transfer = string(b)
	}
	if in := r.Stdin; in != nil {
		stdinSize, stdinSum = in.Size, in.SHA256[:]
	}
	if r.Status == StatusPending && r.Stdin != nil {
		// Kept for reviewers only while they decide: see dropStdinText.
		stdinText = nullStr(r.Stdin.Text)
	}
	if len(r.Redactions) > 0 {
		b, err := json.Marshal(r.Redactions)
		if err != nil {
			return err
		}
		redactions = string(b)
	}
	if r.Status == StatusPending {
		original = nullStr(r.Original)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO requests (`+requestColumns+`, command_original, replica)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET status=excluded.status, decided_by=excluded.decided_by,
			decided_at=excluded.decided_at, reason=excluded.reason, consumed_at=excluded.consumed_at,
			command_original=excluded.command_original, stdin_text=excluded.stdin_text,
			grant_until=excluded.grant_until`,
		string(r.ID), r.Kind.String(), string(r.RunID), r.Target, r.Account, r.Command,
		int64(r.Timeout), r.Digest[:], r.Requester, ns(r.RequestedAt), ns(r.ExpiresAt),
		r.Status.String(), nullStr(r.DecidedBy), ns(r.DecidedAt), nullStr(r.Reason), ns(r.ConsumedAt),
		stdinSize, stdinSum, stdinText, nullStr(r.AgentReason), nullStr(r.Secret), redactions,
		nullStr(r.Class), nullStr(r.ClassReason), nullStr(r.Escalation), ns(r.GrantUntil), transfer, nullStr(string(r.Renews)), original, nullStr(replica))
	if err != nil {
		return fmt.Errorf("state database: write request %s: %w", r.ID, err)
	}
	return nil
}

func scanRequest(sc scanner) (*Request, error) {
	var (
		r                                          Request
		id, kind, runID, status                    string
		timeout                                    int64
		digest                                     []byte
		decidedBy, reason, stdinText, agentReason  sql.NullString
		secret, redactions, transfer, renews       sql.NullString
		class, classReason, escalation             sql.NullString
		requestedAt, expiresAt, decidedAt, consume sql.NullInt64
		grantUntil                                 sql.NullInt64
		stdinSize                                  sql.NullInt64
		stdinSum                                   []byte
	)
	err := sc.Scan(&id, &kind, &runID, &r.Target, &r.Account, &r.Command, &timeout, &digest,
		&r.Requester, &requestedAt, &expiresAt, &status, &decidedBy, &decidedAt, &reason, &consume,
		&stdinSize, &stdinSum, &stdinText, &agentReason, &secret, &redactions, &class, &classReason, &escalation, &grantUntil, &transfer, &renews)
	if err != nil {
		return nil, err
	}
	if stdinSize.Valid {
		in := &Stdin{Size: stdinSize.Int64, Text: stdinText.String}
		if len(stdinSum) != len(in.SHA256) {
			return nil, fmt.Errorf("state database: request %s has a %d-byte stdin digest", id, len(stdinSum))
		}
		copy(in.SHA256[:], stdinSum)
		r.Stdin = in
	}
	r.AgentReason, r.Secret = agentReason.String, secret.String
	r.Class, r.ClassReason, r.Escalation = class.String, classReason.String, escalation.String
	if transfer.Valid {
		r.Transfer = &Transfer{}
		if err := json.Unmarshal([]byte(transfer.String), r.Transfer); err != nil {
			return nil, fmt.Errorf("state database: request %s: transfer: %w", id, err)
		}
	}
	if redactions.Valid {
		if err := json.Unmarshal([]byte(redactions.String), &r.Redactions); err != nil {
			return nil, fmt.Errorf("state database: request %s: redactions: %w", id, err)
		}
	}
	r.ID, r.RunID, r.Timeout, r.Renews = RequestID(id), RunID(runID), time.Duration(timeout), RunID(renews.String)
	if r.Kind, err = ParseKind(kind); err != nil {
		return nil, err
	}
	if r.Status, err = ParseStatus(status); err != nil {
		return nil, err
	}
	if len(digest) != len(r.Digest) {
		return nil, fmt.Errorf("state database: request %s has a %d-byte digest", id, len(digest))
	}
	copy(r.Digest[:], digest)
	r.RequestedAt, r.ExpiresAt = fromNS(requestedAt), fromNS(expiresAt)
	r.DecidedAt, r.ConsumedAt, r.GrantUntil = fromNS(decidedAt), fromNS(consume), fromNS(grantUntil)
	r.DecidedBy, r.Reason = decidedBy.String, reason.String
	return &r, nil
}

func loadRequest(ctx context.Context, q querier, id RequestID) (*Request, error) {
	r, err := scanRequest(q.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM requests WHERE id = ?`, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrUnknownRequest
	}
	if err != nil {
		return nil, fmt.Errorf("state database: read request %s: %w", id, err)
	}
	return r, nil
}

func loadRequests(ctx context.Context, q querier, where string, args ...any) ([]*Request, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+requestColumns+` FROM requests WHERE `+where+` ORDER BY requested_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("state database: read requests: %w", err)
	}
	defer rows.Close()
	var out []*Request
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("state database: read requests: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
