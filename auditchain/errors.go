package auditchain

import (
	"errors"
)

// Sentinel errors a caller can decide on with errors.Is.
var (
	// ErrInvalidEntry means an entry given to Append breaks the encoding
	// rules (unknown kind, duplicate or malformed field name, unsupported
	// value type, a size limit). Nothing was written.
	ErrInvalidEntry = errors.New("invalid entry")

	// ErrClosed means the log was closed. Nothing was written.
	ErrClosed = errors.New("log closed")

	// ErrFailed means the log stopped accepting entries after a write or
	// integrity failure it could not recover from; the error also wraps
	// the cause. Reopen the log (and run Verify) before writing again.
	ErrFailed = errors.New("log failed")

	// ErrOutcomeUnknown means the caller's context ended after the writer
	// had taken the entry: it may or may not be durable. A caller that must
	// fail closed treats it as written-but-unconfirmed.
	ErrOutcomeUnknown = errors.New("append outcome unknown")

	// ErrInconsistent means the database does not match a checkpoint it
	// signed earlier (entries a checkpoint vouches for are missing or
	// different). Open refuses such a database; run Verify.
	ErrInconsistent = errors.New("database inconsistent with its checkpoints")

	// ErrMalformedLeaf means bytes are not a valid version 1 leaf.
	ErrMalformedLeaf = errors.New("malformed leaf")

	// ErrMalformedCheckpoint means bytes are not a valid checkpoint body
	// or signed checkpoint note.
	ErrMalformedCheckpoint = errors.New("malformed checkpoint")

	// ErrAlreadyFinished means an action.finished entry was refused
	// because the action already has one (on PostgreSQL, where another
	// replica may have finished it as interrupted). Nothing was written.
	ErrAlreadyFinished = errors.New("the action already has its outcome")

	// ErrNotFound means the requested entry, action or blob does not exist.
	ErrNotFound = errors.New("not found")
)
