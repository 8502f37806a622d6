package main

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
)

func TestWaitingLine(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	expires := now.Add(90 * time.Second)
	tests := []struct {
		name string
		ev   api.StateEvent
		want string
	}{
		{"the deadline", api.StateEvent{Kind: "run", ApprovalID: "apr_1", ExpiresAt: &expires},
			"airlock-ssh: waiting for a reviewer to approve this run (approval apr_1); the reviewer has 1m30s, until 2026-01-02T15:05:35Z (the gateway's approval timeout), then it ends expired\n"},
		{"and why it asks on its own", api.StateEvent{Kind: "call", ApprovalID: "apr_2", ExpiresAt: &expires, Reason: "it receives the gateway-held secret db"},
			"airlock-ssh: waiting for a reviewer to approve this call (approval apr_2); the reviewer has 1m30s, until 2026-01-02T15:05:35Z (the gateway's approval timeout), then it ends expired; it asks its own approval: it receives the gateway-held secret db\n"},
		{"a gateway that does not send it", api.StateEvent{Kind: "run", ApprovalID: "apr_3"},
			"airlock-ssh: waiting for a reviewer to approve this run (approval apr_3); the reviewer has until the gateway's approval timeout (approval.timeout, 120s unless configured), then it ends expired\n"},
	}
	for _, tt := range tests {
		if got := waitingLine(tt.ev, now); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
	// A deadline already past is not a negative time.
	if got := waitingLine(api.StateEvent{Kind: "run", ApprovalID: "apr_4", ExpiresAt: &now}, now.Add(time.Minute)); !strings.Contains(got, "the reviewer has 0s, until") {
		t.Errorf("past deadline: %q", got)
	}
}
