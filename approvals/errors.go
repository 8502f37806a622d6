package approvals

import (
	"errors"
	"fmt"
)

// Errors a caller decides on. Each is distinct, each leaves the store
// unchanged, and the gateway audits each one; compare with errors.Is.
var (
	// ErrUnknownValue: a closed-set name (mode, state, kind, …) is not one we know.
	ErrUnknownValue = errors.New("unknown value")

	// ErrUnknownRun: no run with that id (or token) exists.
	ErrUnknownRun = errors.New("unknown run")
	// ErrRunEnded: the run ended (anchor exited, closed or revoked).
	ErrRunEnded = errors.New("run ended")
	// ErrRunExpired: the run's approval or token expired, or its action
	// budget is used up; an *ExpiredError says which.
	ErrRunExpired = errors.New("run expired")
	// ErrRunDenied: a reviewer denied the run.
	ErrRunDenied = errors.New("run denied")
	// ErrOutOfScope: the run is approved only for other targets/accounts.
	ErrOutOfScope = errors.New("action outside the run's approved scope")

	// ErrMalformedToken: the string is not a run or reviewer token at all.
	ErrMalformedToken = errors.New("malformed token")
	// ErrWrongToken: a well-formed token that does not match.
	ErrWrongToken = errors.New("wrong token")
	// ErrTokenExpired: the token matched but has expired.
	ErrTokenExpired = errors.New("token expired")

	// ErrUnknownRequest: no approval request with that id exists.
	ErrUnknownRequest = errors.New("unknown approval request")
	// ErrAlreadyDecided: the request was already approved, denied or expired.
	ErrAlreadyDecided = errors.New("approval request already decided")
	// ErrWithdrawn: the request's action was cancelled (its agent went
	// away) before a decision; there is nothing left to decide.
	ErrWithdrawn = errors.New("approval request withdrawn: its action was cancelled before a decision")
	// ErrRequestExpired: the decision arrived after the request's deadline.
	ErrRequestExpired = errors.New("approval request expired")
	// ErrDigestMismatch: an approval was presented for another action than
	// the one it is bound to.
	ErrDigestMismatch = errors.New("action does not match the approved digest")

	// ErrBadTTL: a TTL is zero or negative.
	ErrBadTTL = errors.New("ttl must be positive")
	// ErrTTLOverCap: a TTL exceeds the configured maximum.
	ErrTTLOverCap = errors.New("ttl over the maximum")
	// ErrTTLForCall: a TTL, an action budget or a scope — a run
	// approval's limits — was given for a call approval, which is used
	// once.
	ErrTTLForCall = errors.New("run limits given for a call approval")
	// ErrBadScope: a run approval's limits are invalid (negative max
	// actions, empty target in the scope).
	ErrBadScope = errors.New("invalid run approval limits")
	// ErrGrantNotAllowed: a grant on a run approval or a denial, on an
	// account whose policy allows none, longer than it allows, or on an
	// action that uses a gateway-held secret.
	ErrGrantNotAllowed = errors.New("grant not allowed")
	// ErrQuota: a quota on the account's actions is spent (QuotaError).
	ErrQuota = errors.New("quota spent")
	// ErrBadAction: an action has an empty target, account or command, or a
	// non-positive timeout.
	ErrBadAction = errors.New("invalid action")

	// ErrNotReviewer: the decision does not come from a verified, enabled
	// reviewer of this store.
	ErrNotReviewer = errors.New("not a reviewer")
	// ErrSelfApproval: the reviewer is the requester of the run.
	ErrSelfApproval = errors.New("reviewer is the requester")
	// ErrBadCredentials: unknown reviewer, wrong password or token, or a
	// disabled account; deliberately one error for all four.
	ErrBadCredentials = errors.New("bad reviewer credentials")
	// ErrReviewerExists: a reviewer of that name already exists.
	ErrReviewerExists = errors.New("reviewer exists")
	// ErrPasswordAccount: single sign-on named a reviewer whose account
	// is a local password account (never taken over by an identity
	// provider's user of the same name).
	ErrPasswordAccount = errors.New("a password account of that name exists")
	// ErrOtherIdentity: single sign-on named an account that another
	// identity at the provider (another subject) owns, or that differs
	// from the name only in case.
	ErrOtherIdentity = errors.New("the account belongs to another identity")
	// ErrNameChanged: single sign-on came with another name for an
	// identity that has an account (see NameChangedError).
	ErrNameChanged = errors.New("the provider's name for the identity changed")
	// ErrSSOAccount: a password was set for an account that logs in
	// through single sign-on.
	ErrSSOAccount = errors.New("the account logs in through single sign-on")
	// ErrUnknownReviewer: an administrative call named a reviewer that does
	// not exist (verification never returns it; see ErrBadCredentials).
	ErrUnknownReviewer = errors.New("unknown reviewer")
	// ErrBadReviewerName: the name is empty, too long, or has characters
	// outside [A-Za-z0-9._-].
	ErrBadReviewerName = errors.New("invalid reviewer name")
	// ErrWeakPassword: the password is shorter than MinPasswordLen.
	ErrWeakPassword = errors.New("password too short")

	// ErrNoProcess: the process does not exist (or is now another process).
	ErrNoProcess = errors.New("no such process")
	// ErrPeerMismatch: the process at the peer's pid does not belong to the
	// peer's uid, so the pid was reused after the peer connected.
	ErrPeerMismatch = errors.New("peer process changed")
	// ErrNoAnchor: no process in the caller's ancestry can anchor a run
	// (every ancestor is a shell or wrapper up to pid 1).
	ErrNoAnchor = errors.New("no anchor process")
	// ErrNotAncestor: the run's anchor is neither the caller nor one of its
	// ancestors.
	ErrNotAncestor = errors.New("anchor is not the caller or its ancestor")

	// ErrTooManyPending: the run or its requester has as many requests
	// waiting for a decision as it may (see PendingLimitError).
	ErrTooManyPending = errors.New("too many pending requests")

	// ErrEventNotRecorded: the event sink failed, so the state change did
	// not take effect (fail closed).
	ErrEventNotRecorded = errors.New("event not recorded")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store closed")
)

// eventError wraps a sink failure so that both ErrEventNotRecorded and the
// sink's own error match errors.Is.
type eventError struct {
	kind EventKind
	err  error
}

func (e *eventError) Error() string {
	return fmt.Sprintf("audit log: record %s: %v", e.kind, e.err)
}

func (e *eventError) Is(target error) bool { return target == ErrEventNotRecorded }

func (e *eventError) Unwrap() error { return e.err }

// RevokedError is ErrRunEnded for a run a reviewer ended: who, and the
// note they gave, which the run's agent is told.
type RevokedError struct{ By, Note string }

func (e *RevokedError) Error() string { return "run ended by reviewer " + e.By }

// Is makes a RevokedError an ErrRunEnded.
func (e *RevokedError) Is(target error) bool { return target == ErrRunEnded }

// ErrNoOriginal: a request has no original command to reveal — it was not
// redacted, or it is no longer pending (the original is erased when a
// request ends).
var ErrNoOriginal = errors.New("no original command: the request was not redacted, or is no longer pending")

// ExpiredError is ErrRunExpired saying what ran out: End is EndTTL (the
// approval's time), EndMaxActions (the action budget, MaxActions) or
// EndTokenExpired (a remote run's token). The agent is told which: a
// spent budget is not an expiry.
type ExpiredError struct {
	End        EndReason
	MaxActions int
}

func (e *ExpiredError) Error() string {
	if e.End == EndMaxActions {
		return fmt.Sprintf("run's action budget (%d) spent", e.MaxActions)
	}
	return "run expired (" + e.End.String() + ")"
}

// Is makes an ExpiredError an ErrRunExpired.
func (e *ExpiredError) Is(target error) bool { return target == ErrRunExpired }
