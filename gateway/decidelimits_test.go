package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

// TestDecisionLimitsSayWhich: run limits on a call request and invalid
// run limits are two refusals, each with its own fix: a --ttl on a call
// says it is a call, approved once, and offers the grant its account
// allows; a negative action budget on a run says so. Nothing is decided
// by either.
func TestDecisionLimitsSayWhich(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Targets["box-call"].Accounts[s.User].MaxGrant = 10 * time.Minute
	}})
	ctx := context.Background()
	call := g.runAsync(api.ActionRequest{Target: "box-call", Command: "true"})
	q := g.waitPending(1)[0]
	_, err := g.reviewer.Decide(ctx, q.ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: q.Digest, TTLS: 600})
	if err == nil {
		t.Fatal("a call approved with a TTL")
	}
	for _, want := range []string{q.ID + " is a call request", "approve it without them", "--grant DUR, at most 10m0s on " + s.User + "@box-call"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("a TTL on a call: %q; want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "0 or more") {
		t.Errorf("a TTL on a call is told about run approvals' action budget: %q", err)
	}
	g.decideNextWith("call", api.DecisionRequest{Decision: api.DecisionApprove})
	if r := <-call; r.err != nil || !r.a.Success() {
		t.Fatalf("the call approved without limits: %v %+v", r.err, r.a)
	}

	run := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	q = g.waitPending(1)[0]
	_, err = g.reviewer.Decide(ctx, q.ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: q.Digest, MaxActions: -1})
	if err == nil || !strings.Contains(err.Error(), "action budget (--max-actions) is -1: give 0 (no limit) or more") || strings.Contains(err.Error(), "call") {
		t.Errorf("a negative action budget on a run: %v", err)
	}
	g.decideNextWith("run", api.DecisionRequest{Decision: api.DecisionApprove})
	<-run
}
