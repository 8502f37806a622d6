package engine

import (
	"errors"

	"github.com/airlockgw/airlock/gateway/api"

	"github.com/airlockgw/airlock/approvals"
)

// The refusals the engine's callers act on, whichever front end asks.
// Every error the engine returns for something the caller did, or can do
// something about, matches one of these with errors.Is; any other error is
// the engine's own failure. Each front end maps them to its own words once
// (an HTTP status and code, a page's message).
var (
	// ErrNotFound: no such action, run, request or reviewer (or not one
	// the caller may see).
	ErrNotFound = errors.New("engine: not found")
	// ErrAlreadyDecided: someone approved or denied the request first.
	ErrAlreadyDecided = errors.New("engine: request already decided")
	// ErrExpired: the request's deadline passed before the decision.
	ErrExpired = errors.New("engine: request expired")
	// ErrRunEnded: the run ended (its process exited, it was closed or
	// revoked) or was denied, so it can act or be decided no more.
	ErrRunEnded = errors.New("engine: run ended")
	// ErrChanged: the request is not the one the reviewer was shown (its
	// digest differs).
	ErrChanged = errors.New("engine: request changed since it was shown")
	// ErrSelfApproval: the reviewer is linked to the requester.
	ErrSelfApproval = errors.New("engine: reviewer is the requester")
	// ErrForbidden: the caller may not do this (not a reviewer, a
	// disabled one, a process that is no agent's).
	ErrForbidden = errors.New("engine: not allowed")
	// ErrInvalid: the request's values are invalid (a TTL over the cap, a
	// negative action limit).
	ErrInvalid = errors.New("engine: invalid request")
	// ErrUnauthorized: a credential is wrong, malformed or expired.
	ErrUnauthorized = errors.New("engine: not authenticated")
	// ErrRateLimited: too many failures or requests from this key; wait.
	ErrRateLimited = errors.New("engine: rate limited")
	// ErrUnavailable: the change could not be recorded in the audit log,
	// so it did not happen.
	ErrUnavailable = errors.New("engine: audit log unavailable")
	// ErrNotFinished: the action is still in flight; what needs its end
	// (paging its output) must wait.
	ErrNotFinished = errors.New("engine: action not finished")
	// ErrDraining: the engine is stopping and takes no new actions.
	ErrDraining = errors.New("engine: shutting down")
	// ErrTooLarge: a file is over the size limit.
	ErrTooLarge = errors.New("engine: too large")
	// ErrTooMany: a run holds as many of something as it may.
	ErrTooMany = errors.New("engine: too many")
)

// wireCodes are the API's error codes of the refusals, for every front
// end that speaks the API's words.
var wireCodes = []struct {
	kind error
	code string
}{
	{ErrNotFound, api.CodeNotFound},
	{ErrAlreadyDecided, api.CodeConflict},
	{ErrExpired, api.CodeConflict},
	{ErrRunEnded, api.CodeConflict},
	{ErrChanged, api.CodeConflict},
	{ErrNotFinished, api.CodeConflict},
	{ErrSelfApproval, api.CodeForbidden},
	{ErrForbidden, api.CodeForbidden},
	{ErrInvalid, api.CodeBadRequest},
	{ErrUnauthorized, api.CodeUnauthorized},
	{ErrRateLimited, api.CodeRateLimited},
	{ErrUnavailable, api.CodeUnavailable},
	{ErrDraining, api.CodeUnavailable},
	{ErrTooLarge, api.CodeTooLarge},
	{ErrTooMany, api.CodeRateLimited},
}

// WireError is a refusal as the API answers it: its code, its message
// and the HTTP status of the code. Any other error is the engine's own
// failure: nil.
func WireError(err error) *api.Error {
	for _, c := range wireCodes {
		if errors.Is(err, c.kind) {
			return &api.Error{Err: api.ErrorBody{Code: c.code, Message: err.Error()}, Status: api.StatusOf(c.code)}
		}
	}
	return nil
}

// refusal is a refusal of kind (one of the errors above) whose message is
// err's, or msg when err is nil.
type refusal struct {
	kind error
	msg  string
	err  error
}

func (r *refusal) Error() string {
	if r.err != nil {
		return r.err.Error()
	}
	return r.msg
}

func (r *refusal) Unwrap() []error {
	if r.err != nil {
		return []error{r.kind, r.err}
	}
	return []error{r.kind}
}

// refuse returns a refusal of kind with the message msg.
func refuse(kind error, msg string) error { return &refusal{kind: kind, msg: msg} }

// classify files the approvals store's errors under the engine's
// refusals, keeping their messages; other errors pass as they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range []struct{ from, to error }{
		{approvals.ErrUnknownRun, ErrNotFound},
		{approvals.ErrUnknownRequest, ErrNotFound},
		{approvals.ErrAlreadyDecided, ErrAlreadyDecided},
		{approvals.ErrRequestExpired, ErrExpired},
		{approvals.ErrWithdrawn, ErrAlreadyDecided},
		{approvals.ErrRunEnded, ErrRunEnded},
		{approvals.ErrRunExpired, ErrRunEnded},
		{approvals.ErrRunDenied, ErrRunEnded},
		{approvals.ErrSelfApproval, ErrSelfApproval},
		{approvals.ErrNotReviewer, ErrForbidden},
		{approvals.ErrNoProcess, ErrForbidden},
		{approvals.ErrNoAnchor, ErrForbidden},
		{approvals.ErrNotAncestor, ErrForbidden},
		{approvals.ErrBadTTL, ErrInvalid},
		{approvals.ErrTTLOverCap, ErrInvalid},
		{approvals.ErrTTLForCall, ErrInvalid},
		{approvals.ErrBadScope, ErrInvalid},
		{approvals.ErrWrongToken, ErrUnauthorized},
		{approvals.ErrMalformedToken, ErrUnauthorized},
		{approvals.ErrUnknownAgent, ErrNotFound},
		{approvals.ErrTokenExpired, ErrUnauthorized},
		{approvals.ErrBadCredentials, ErrUnauthorized},
		{approvals.ErrEventNotRecorded, ErrUnavailable},
		{approvals.ErrTooManyPending, ErrRateLimited},
	} {
		if errors.Is(err, c.from) {
			return &refusal{kind: c.to, err: err}
		}
	}
	return err
}
