-- The state tables on PostgreSQL, version 1: the SQLite schema at its
-- version 9 in PostgreSQL's types. Fixed: a change is a new step in
-- pgMigrations (and a SQLite migration).

CREATE TABLE IF NOT EXISTS runs (
	id               TEXT PRIMARY KEY,
	state            TEXT NOT NULL,
	requester        TEXT NOT NULL,
	created_at       BIGINT NOT NULL,
	anchor_pid       BIGINT,
	anchor_start     BIGINT,
	anchor           TEXT,
	explicit         BIGINT NOT NULL DEFAULT 0,
	anchor_gone      BIGINT NOT NULL DEFAULT 0,
	token_hash       BYTEA,
	token_expires_at BIGINT,
	approval_id      TEXT,
	decided_by       TEXT,
	decided_at       BIGINT,
	reason           TEXT,
	expires_at       BIGINT,
	max_actions      BIGINT NOT NULL DEFAULT 0,
	scope            TEXT,
	actions          BIGINT NOT NULL DEFAULT 0,
	ended_at         BIGINT,
	end_reason       TEXT,
	ended_by         TEXT,
	end_note         TEXT,
	agent_id         TEXT,
	limits           TEXT,
	host             TEXT
);
CREATE INDEX IF NOT EXISTS runs_live_anchor ON runs(anchor_gone, anchor_pid);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE TABLE IF NOT EXISTS requests (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL,
	run_id       TEXT NOT NULL REFERENCES runs(id),
	target       TEXT NOT NULL,
	account      TEXT NOT NULL,
	command      TEXT NOT NULL,
	timeout_ns   BIGINT NOT NULL,
	digest       BYTEA NOT NULL,
	requester    TEXT NOT NULL,
	requested_at BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	status       TEXT NOT NULL,
	decided_by   TEXT,
	decided_at   BIGINT,
	reason       TEXT,
	consumed_at  BIGINT,
	stdin_size   BIGINT,
	stdin_sha256 BYTEA,
	stdin_text   TEXT,
	agent_reason TEXT,
	secret       TEXT,
	command_original TEXT,
	redactions   TEXT,
	class        TEXT,
	class_reason TEXT,
	escalation   TEXT,
	grant_until  BIGINT,
	transfer     TEXT,
	replica      TEXT
);
CREATE INDEX IF NOT EXISTS requests_status ON requests(status);
CREATE INDEX IF NOT EXISTS requests_grant ON requests(run_id, digest) WHERE grant_until IS NOT NULL;
CREATE TABLE IF NOT EXISTS quota_uses (
	target  TEXT NOT NULL,
	account TEXT NOT NULL,
	run_id  TEXT NOT NULL,
	at      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS quota_uses_account ON quota_uses(target, account, at);
CREATE INDEX IF NOT EXISTS quota_uses_run ON quota_uses(run_id, target, account);
CREATE TABLE IF NOT EXISTS reviewers (
	name       TEXT PRIMARY KEY,
	hash       TEXT NOT NULL,
	enabled    BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	epoch      BIGINT NOT NULL DEFAULT 0,
	source     TEXT NOT NULL DEFAULT 'password',
	links      TEXT,
	sso_subject TEXT
);
CREATE TABLE IF NOT EXISTS reviewer_tokens (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL REFERENCES reviewers(name),
	hash       BYTEA NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	hash       BYTEA NOT NULL,
	limits     TEXT,
	created_at BIGINT NOT NULL,
	expires_at BIGINT,
	revoked_at BIGINT,
	revoked_by TEXT
);CREATE TABLE IF NOT EXISTS admin_events (
	seq  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	body TEXT NOT NULL
);
