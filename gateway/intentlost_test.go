package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec"
)

// lostAnswerAudit appends action.connecting and then answers as if the
// answer had been lost with the database (auditchain.ErrOutcomeUnknown):
// on PostgreSQL, a server that goes away between a batch's commit and its
// flush barrier, which no real server does on cue.
type lostAnswerAudit struct{ engine.Appender }

func (l lostAnswerAudit) Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error) {
	ref, err := l.Appender.Append(ctx, e)
	if err == nil && e.Kind == auditchain.KindActionConnecting {
		return auditchain.Ref{}, fmt.Errorf("injected: %w", auditchain.ErrOutcomeUnknown)
	}
	return ref, err
}

// An intent whose append answer was lost may be in the log: nothing is
// dialed, and the action still gets exactly one outcome, so no
// action.connecting entry is left without one.
func TestIntentOfUnknownFateGetsAnOutcome(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	key, accepted := ownClientKey(t, s)
	g := startGateway(t, s, gwOptions{clientKey: key, options: func(o *Options) {
		o.auditWrap = func(a engine.Appender) engine.Appender { return lostAnswerAudit{a} }
	}})
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "true"})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.AuditUnavailable || r.a.StartedAt != nil {
		t.Fatalf("got %+v %v, want audit_unavailable before start", r.a, r.err)
	}
	var got []auditEntry
	testkit.Poll(testkit.Patience, func() bool {
		got = g.auditEntries("action.finished", r.a.ID)
		return len(got) > 0
	})
	if len(got) != 1 || got[0].Fields["outcome"] != "audit_unavailable" || got[0].Fields["termination"] != "not_started" {
		t.Fatalf("action.finished entries for the action: %+v, want one audit_unavailable, not_started", got)
	}
	if len(g.auditEntries("action.connecting", r.a.ID)) != 1 {
		t.Fatal("the injected fault did not leave the intent in the log")
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted(); n != 0 {
		t.Errorf("the gateway logged in %d times although the intent's fate was unknown", n)
	}
	g.verifyAudit()
}
