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
	end_note         TEXT
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
	timeout_ns   INTEGER NOT NULL,
	digest       BLOB NOT NULL,
	requester    TEXT NOT NULL,
	requested_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       TEXT NOT NULL,
	decided_by   TEXT,
	decided_at   INTEGER,
	reason       TEXT,
	consumed_at  INTEGER
);
CREATE INDEX IF NOT EXISTS requests_status ON requests(status);
CREATE TABLE IF NOT EXISTS reviewers (
	name       TEXT PRIMARY KEY,
	hash       TEXT NOT NULL,
	enabled    INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reviewer_tokens (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL REFERENCES reviewers(name),
	hash       BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
