package auditchain

import "fmt"

// Kind is the kind of an audit entry. The set is closed and persisted by
// name inside every leaf: append new kinds at the end, never rename or
// reorder them.
type Kind uint8

// The entry kinds of the contract.
const (
	kindInvalid Kind = iota
	KindGatewayStarted
	KindGatewayStopped
	KindConfigLoaded
	KindRunCreated
	KindRunApproved
	KindRunDenied
	KindRunEnded
	KindActionRequested
	KindApprovalRequested
	KindApprovalDecided
	KindActionConnecting
	KindActionFinished
	KindOutputRead
	KindTokenRotated
	KindCheckpoint
	// KindAuthFailed records failed credentials (a wrong local token,
	// reviewer password, reviewer token or login link): the first failure
	// of a caller in a window and the one that got it blocked. Appended
	// after the contract's list.
	KindAuthFailed
	// KindAgentAdded and KindAgentRevoked record agent tokens an operator
	// issued and revoked.
	KindAgentAdded
	KindAgentRevoked
	// KindReviewerAdded, KindReviewerDisabled, KindReviewerEnabled,
	// KindReviewerRemoved and KindReviewerPasswordChanged record an
	// operator's changes to reviewer accounts.
	KindReviewerAdded
	KindReviewerDisabled
	KindReviewerEnabled
	KindReviewerRemoved
	KindReviewerPasswordChanged
	// KindCommandRevealed records a reviewer's reveal of a pending
	// request's original command, stored redacted.
	KindCommandRevealed
	// KindReviewerRenamed records an operator's rename of a reviewer
	// account; KindReviewerSessionsEnded the end of a reviewer's sessions
	// and tokens when single sign-on found the identity outside the
	// reviewer groups.
	KindReviewerRenamed
	KindReviewerSessionsEnded
	// KindReviewerLinkIssued records a one-time reviewer login link an
	// operator made (airlock reviewer link), or the demo.
	KindReviewerLinkIssued
	kindEnd // keep last
)

var kindNames = [...]string{
	kindInvalid:           "",
	KindGatewayStarted:    "gateway.started",
	KindGatewayStopped:    "gateway.stopped",
	KindConfigLoaded:      "config.loaded",
	KindRunCreated:        "run.created",
	KindRunApproved:       "run.approved",
	KindRunDenied:         "run.denied",
	KindRunEnded:          "run.ended",
	KindActionRequested:   "action.requested",
	KindApprovalRequested: "approval.requested",
	KindApprovalDecided:   "approval.decided",
	KindActionConnecting:  "action.connecting",
	KindActionFinished:    "action.finished",
	KindOutputRead:        "output.read",
	KindTokenRotated:      "token.rotated",
	KindCheckpoint:        "checkpoint",
	KindAuthFailed:        "auth.failed",
	KindAgentAdded:        "agent.added",
	KindAgentRevoked:      "agent.revoked",

	KindReviewerAdded:           "reviewer.added",
	KindReviewerDisabled:        "reviewer.disabled",
	KindReviewerEnabled:         "reviewer.enabled",
	KindReviewerRemoved:         "reviewer.removed",
	KindReviewerPasswordChanged: "reviewer.password_changed",
	KindCommandRevealed:         "command.revealed",
	KindReviewerRenamed:         "reviewer.renamed",
	KindReviewerSessionsEnded:   "reviewer.sessions_ended",
	KindReviewerLinkIssued:      "reviewer.link_issued",
}

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool { return k > kindInvalid && k < kindEnd }

// String returns the persisted name of k.
func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// MarshalText returns the persisted name; it fails for an invalid kind.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("audit log: invalid kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText parses a persisted name with [ParseKind].
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseKind returns the kind named s. Unknown names are an error wrapping
// [ErrInvalidEntry].
func ParseKind(s string) (Kind, error) {
	for k := kindInvalid + 1; k < kindEnd; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return kindInvalid, fmt.Errorf("audit log: unknown entry kind %q: %w", s, ErrInvalidEntry)
}
