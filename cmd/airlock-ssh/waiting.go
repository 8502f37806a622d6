package main

import (
	"fmt"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
)

// waitingLine is what airlock-ssh says, once, when its action waits for a
// reviewer (state event s, at now): which approval, how long the reviewer
// has, and why it asks on its own when it does.
func waitingLine(s api.StateEvent, now time.Time) string {
	line := fmt.Sprintf("airlock-ssh: waiting for a reviewer to approve this %s (approval %s)", s.Kind, s.ApprovalID)
	if s.ExpiresAt != nil {
		left := max(s.ExpiresAt.Sub(now).Round(time.Second), 0)
		line += fmt.Sprintf("; the reviewer has %s, until %s (the gateway's approval timeout), then it ends expired", left, s.ExpiresAt.UTC().Format(time.RFC3339))
	} else {
		// A gateway that does not say: its configuration decides.
		line += "; the reviewer has until the gateway's approval timeout (approval.timeout, 120s unless configured), then it ends expired"
	}
	if s.Reason != "" {
		line += "; it asks its own approval: " + s.Reason
	}
	return line + "\n"
}
