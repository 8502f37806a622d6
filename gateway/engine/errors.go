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
	ErrNotFound = errors.New("not found")
	// ErrAlreadyDecided: someone approved or denied the request first.
	ErrAlreadyDecided = errors.New("request already decided")
	// ErrExpired: the request's deadline passed before the decision.
	ErrExpired = errors.New("request expired")
	// ErrRunEnded: the run ended (its process exited, it was closed or
	// revoked) or was denied, so it can act or be decided no more.
	ErrRunEnded = errors.New("run ended")
	// ErrChanged: the request is not the one the reviewer was shown (its
	// digest differs).
	ErrChanged = errors.New("request changed since it was shown")
	// ErrSelfApproval: the reviewer is linked to the requester.
	ErrSelfApproval = errors.New("reviewer is the requester")
	// ErrForbidden: the caller may not do this (not a reviewer, a
	// disabled one, a process that is no agent's).
	ErrForbidden = errors.New("not allowed")
	// ErrInvalid: the request's values are invalid (a TTL over the cap, a
	// negative action limit).
	ErrInvalid = errors.New("invalid request")
	// ErrUnauthorized: a credential is wrong, malformed or expired.
	ErrUnauthorized = errors.New("not authenticated")
	// ErrRateLimited: too many failures or requests from this key; wait.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: the change could not be recorded in the audit log,
	// so it did not happen.
	ErrUnavailable = errors.New("audit log unavailable")
	// ErrNotFinished: the action is still in flight; what needs its end
	// (paging its output) must wait.
	ErrNotFinished = errors.New("action not finished")
	// ErrFinished: the action has its outcome already; it cannot be
	// cancelled.
	ErrFinished = errors.New("action finished")
	// ErrDraining: the engine is stopping and takes no new actions.
	ErrDraining = errors.New("shutting down")
	// ErrTooLarge: a file is over the size limit.
	ErrTooLarge = errors.New("too large")
	// ErrTooMany: a run holds as many of something as it may.
	ErrTooMany = errors.New("too many")
	// ErrNoSpace: the gateway has no room for a file: a budget of the
	// transfer spool is spent, or its disk is at the free-space floor.
	ErrNoSpace = errors.New("no room on the gateway's disk")

	// Finer kinds of the refusals above, for a front end whose answer
	// depends on them (a bearer token's kind, why a run's token fails).

	// ErrMalformedToken (an ErrUnauthorized): the token is not of the
	// kind asked for (a run's token where a reviewer's is verified).
	ErrMalformedToken = errors.New("malformed token")
	// ErrWrongToken (an ErrUnauthorized): the token has the right form
	// but belongs to nothing.
	ErrWrongToken = errors.New("wrong token")
	// ErrTokenExpired (an ErrUnauthorized): a genuine token past its
	// lifetime.
	ErrTokenExpired = errors.New("token expired")
	// ErrRunExpired (an ErrRunEnded): the run's time ran out.
	ErrRunExpired = errors.New("run expired")
	// ErrRunDenied (an ErrRunEnded): a reviewer denied the run.
	ErrRunDenied = errors.New("run denied")
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
	{ErrFinished, api.CodeConflict},
	{ErrSelfApproval, api.CodeForbidden},
	{ErrForbidden, api.CodeForbidden},
	{ErrInvalid, api.CodeBadRequest},
	{ErrUnauthorized, api.CodeUnauthorized},
	{ErrRateLimited, api.CodeRateLimited},
	{ErrUnavailable, api.CodeUnavailable},
	{ErrDraining, api.CodeUnavailable},
	{ErrTooLarge, api.CodeTooLarge},
	{ErrTooMany, api.CodeRateLimited},
	{ErrNoSpace, api.CodeInsufficientStorage},
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

// refusal is a refusal of kind (one of the errors above), and of the
// finer kind detail when it has one, whose message is err's, or msg when
// err is nil.
type refusal struct {
	kind   error
	detail error
	msg    string
	err    error
}

func (r *refusal) Error() string {
	if r.err != nil {
		return r.err.Error()
	}
	return r.msg
}

func (r *refusal) Unwrap() []error {
	errs := []error{r.kind}
	if r.detail != nil {
		errs = append(errs, r.detail)
	}
	if r.err != nil {
		errs = append(errs, r.err)
	}
	return errs
}

// refuse returns a refusal of kind with the message msg.
func refuse(kind error, msg string) error { return &refusal{kind: kind, msg: msg} }

// classify files the approvals store's errors under the engine's
// refusals, keeping their messages; other errors pass as they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range []struct{ from, to, detail error }{
		{from: approvals.ErrUnknownRun, to: ErrNotFound},
		{from: approvals.ErrUnknownRequest, to: ErrNotFound},
		{from: approvals.ErrAlreadyDecided, to: ErrAlreadyDecided},
		{from: approvals.ErrRequestExpired, to: ErrExpired},
		{from: approvals.ErrWithdrawn, to: ErrAlreadyDecided},
		{from: approvals.ErrRunEnded, to: ErrRunEnded},
		{from: approvals.ErrRunExpired, to: ErrRunEnded, detail: ErrRunExpired},
		{from: approvals.ErrRunDenied, to: ErrRunEnded, detail: ErrRunDenied},
		{from: approvals.ErrSelfApproval, to: ErrSelfApproval},
		{from: approvals.ErrNotReviewer, to: ErrForbidden},
		{from: approvals.ErrNoProcess, to: ErrForbidden},
		{from: approvals.ErrNoAnchor, to: ErrForbidden},
		{from: approvals.ErrNotAncestor, to: ErrForbidden},
		{from: approvals.ErrBadTTL, to: ErrInvalid},
		{from: approvals.ErrTTLOverCap, to: ErrInvalid},
		{from: approvals.ErrTTLForCall, to: ErrInvalid},
		{from: approvals.ErrBadScope, to: ErrInvalid},
		{from: approvals.ErrWrongToken, to: ErrUnauthorized, detail: ErrWrongToken},
		{from: approvals.ErrMalformedToken, to: ErrUnauthorized, detail: ErrMalformedToken},
		{from: approvals.ErrUnknownAgent, to: ErrNotFound},
		{from: approvals.ErrTokenExpired, to: ErrUnauthorized, detail: ErrTokenExpired},
		{from: approvals.ErrBadCredentials, to: ErrUnauthorized},
		{from: approvals.ErrEventNotRecorded, to: ErrUnavailable},
		{from: approvals.ErrTooManyPending, to: ErrRateLimited},
	} {
		if errors.Is(err, c.from) {
			return &refusal{kind: c.to, detail: c.detail, err: err}
		}
	}
	return err
}
