package engine

import (
	"strings"
	"testing"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
)

// TestEveryRunEndIsWorded: every way a run ends that stops its running
// actions has its own words for the agent, and none invites a retry.
func TestEveryRunEndIsWorded(t *testing.T) {
	for r := approvals.EndReason(1); ; r++ {
		if _, err := approvals.ParseEndReason(r.String()); err != nil {
			break // past the last
		}
		c := &stopCause{By: "alice", Reason: "why", RunEnd: r}
		if !runEndStops(r) {
			if r != approvals.EndMaxActions {
				t.Errorf("%s: stops nothing; only max_actions may", r)
			}
			continue
		}
		d := c.detail()
		if !strings.HasPrefix(d, "the run ended: ") || d == "the run ended: "+r.String() {
			t.Errorf("%s: detail %q, want words of its own", r, d)
		}
		s := c.nextStep()
		if s.Retry != api.RetryNo {
			t.Errorf("%s: next step %+v, want no retry", r, s)
		}
		// A run whose approval's time ran out renews: its agent is not
		// sent to start a new run.
		if r == approvals.EndTTL && (strings.Contains(s.Text, "start a new run") || !strings.Contains(s.Text, "renews")) {
			t.Errorf("%s: next step %q", r, s.Text)
		}
	}
	c := &stopCause{By: "alice", Reason: "wrong host"}
	if got, want := c.detail(), "cancelled by reviewer alice: wrong host"; got != want {
		t.Errorf("a reviewer's cancel: %q, want %q", got, want)
	}
	if f := c.facts(); f.Why != "reviewer" || f.By != "alice" || *f.Reason != "wrong host" {
		t.Errorf("a reviewer's cancel, recorded: %+v", f)
	}
}

// TestRanOutSaysWhich: what ran out of a run is worded for what it was —
// a spent action budget, with its size, is not an expiry, and neither is
// a token's lifetime.
func TestRanOutSaysWhich(t *testing.T) {
	for _, c := range []struct {
		ran  approvals.ExpiredError
		want string
	}{
		{approvals.ExpiredError{End: approvals.EndMaxActions, MaxActions: 1}, "the run's action budget (1) is spent"},
		{approvals.ExpiredError{End: approvals.EndTTL}, "the run's approval has expired (its time ran out)"},
		{approvals.ExpiredError{End: approvals.EndTokenExpired}, "the run's token has expired, and a token's lifetime is never renewed"},
	} {
		if got := ranOut(c.ran); got != c.want {
			t.Errorf("ranOut(%v) = %q; want %q", c.ran.End, got, c.want)
		}
	}
}
