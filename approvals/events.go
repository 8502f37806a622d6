package approvals

import (
	"context"
	"time"
)

// EventSink receives every state change before it takes effect. The gateway
// implements it by appending an audit entry of the event's kind.
//
// The rule is fail closed: the store writes a change in a state-database
// transaction, records its events in order, and commits only if every
// Record returned nil. If Record fails, the transaction is rolled back, the
// change does not happen, and the call returns an error matching
// ErrEventNotRecorded (and the sink's error). Two edges follow from the
// order and are accepted:
//
//   - A change with several events (a run approval records
//     approval.decided then run.approved) whose second Record fails leaves
//     the first event in the log for a change that did not happen.
//   - If the commit itself fails after every event was recorded, the log
//     holds events for a change that did not happen.
//
// The log may over-report; it never under-reports.
//
// Changes driven by time or by a process exiting (request expiry, TTL,
// token expiry, anchor exit) cannot be refused. They take effect at once in
// what the store allows — every use checks deadlines and the anchor's
// liveness itself — and their record is retried until the sink accepts it
// or the store is closed.
//
// Record is called with the store's lock held: it must not call back into
// the store, and it should be quick (one durable append).
type EventSink interface {
	Record(ctx context.Context, e Event) error
}

// Event is one state change. Run is the run after the change (for
// approval events, the request's run); Request is set for approval events
// and for run.approved/run.denied (the request that was decided).
type Event struct {
	Kind    EventKind `json:"kind"`
	Time    time.Time `json:"time"`
	Run     Run       `json:"run"`
	Request *Request  `json:"request,omitempty"`
	// Agent is the agent token of EventAgentAdded and EventAgentRevoked.
	Agent *Agent `json:"agent,omitempty"`
	// Reviewer is the account change of the reviewer.* events.
	Reviewer *ReviewerChange `json:"reviewer,omitempty"`
}

// ReviewerChange is an operator's change to a reviewer account.
type ReviewerChange struct {
	Name string `json:"name"`
	// By says who made it: the operator's Unix user, or how.
	By string `json:"by"`
	// Offline: made while no gateway ran (with the state database
	// directly); recorded when the next gateway started.
	Offline bool `json:"offline,omitempty"`
	// NewName is a renamed account's name from now on.
	NewName string `json:"new_name,omitempty"`
	// Subject is the identity at the provider ("ISSUER SUBJECT") of an
	// account single sign-on made.
	Subject string `json:"subject,omitempty"`
}

// EventSinkFunc adapts a function to EventSink.
type EventSinkFunc func(ctx context.Context, e Event) error

// Record calls f.
func (f EventSinkFunc) Record(ctx context.Context, e Event) error { return f(ctx, e) }
