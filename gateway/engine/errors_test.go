package engine

import (
	"errors"
	"testing"

	"github.com/airlockgw/airlock/approvals"
)

// Every error of the approvals store a caller can act on is filed under
// one of the engine's refusals, keeping its message; one that is not the
// caller's passes as it is.
func TestClassify(t *testing.T) {
	tests := []struct {
		from, want error
	}{
		{approvals.ErrUnknownRun, ErrNotFound},
		{approvals.ErrUnknownRequest, ErrNotFound},
		{approvals.ErrAlreadyDecided, ErrAlreadyDecided},
		{approvals.ErrRequestExpired, ErrExpired},
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
		{approvals.ErrTokenExpired, ErrUnauthorized},
		{approvals.ErrBadCredentials, ErrUnauthorized},
		{approvals.ErrEventNotRecorded, ErrUnavailable},
	}
	for _, tt := range tests {
		got := classify(tt.from)
		if !errors.Is(got, tt.want) || !errors.Is(got, tt.from) || got.Error() != tt.from.Error() {
			t.Errorf("classify(%v) = %v, want %v keeping the original", tt.from, got, tt.want)
		}
	}
	other := errors.New("disk on fire")
	if got := classify(other); got != other {
		t.Errorf("classify(%v) = %v, want it unchanged", other, got)
	}
	if classify(nil) != nil {
		t.Error("classify(nil) is not nil")
	}
	if r := refuse(ErrRateLimited, "wait"); !errors.Is(r, ErrRateLimited) || r.Error() != "wait" {
		t.Errorf("refuse: %v", r)
	}
}
