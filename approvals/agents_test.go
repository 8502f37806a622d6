package approvals

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An agent token works until it expires or is revoked, by its hash alone;
// its limits bind every action of its runs, in call mode too.
func TestAgentTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, tok, err := e.s.AddAgent(ctx, "ci-bot", []Scope{{Target: "run-box"}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.s.VerifyAgent(ctx, tok)
	if err != nil || got.ID != a.ID || got.Subject() != "agent:ci-bot/"+string(a.ID) {
		t.Fatalf("verify: %+v %v", got, err)
	}
	raw := []byte(tok.Reveal())
	i := len(agentTokenPrefix) + idHexLen + 1 // the secret's first character
	raw[i] = map[bool]byte{true: 'A', false: 'B'}[raw[i] != 'A']
	wrong := NewSecret(string(raw))
	if _, err := e.s.VerifyAgent(ctx, wrong); !errors.Is(err, ErrWrongToken) {
		t.Errorf("a wrong token: %v", err)
	}
	run, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: got.Subject(), Agent: &got})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("call-box", "id"), nil); !errors.Is(err, ErrOutOfScope) {
		t.Errorf("an action outside the agent's limits: %v, want ErrOutOfScope", err)
	}
	e.reopen()
	if back, _ := e.s.Run(ctx, run.ID); back.AgentID != a.ID || len(back.Limits) != 1 {
		t.Errorf("the run's agent after a restart: %+v", back)
	}
	e.clock.Advance(time.Hour + time.Second)
	e.clock.Jump(time.Hour + time.Second)
	if _, err := e.s.VerifyAgent(ctx, tok); !errors.Is(err, ErrAgentNotUsable) {
		t.Errorf("an expired token: %v", err)
	}
	_, tok2, _ := e.s.AddAgent(ctx, "ci-bot", nil, 0)
	if _, err := e.s.RevokeAgent(ctx, "ci-bot", "operator:root"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.VerifyAgent(ctx, tok2); !errors.Is(err, ErrAgentNotUsable) {
		t.Errorf("a revoked token: %v", err)
	}
	if _, err := e.s.RevokeAgent(ctx, "nobody", "operator:root"); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("revoking no agent: %v", err)
	}
}

func TestRevokingAnAgentTokenEndsItsRuns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bot, _, err := e.s.AddAgent(ctx, "ci-bot", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := e.s.AddAgent(ctx, "other-bot", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: bot.Subject(), Agent: &bot})
	if err != nil {
		t.Fatal(err)
	}
	keep, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: other.Subject(), Agent: &other})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RevokeAgent(ctx, "ci-bot", "operator:root"); err != nil {
		t.Fatal(err)
	}
	got, _ := e.s.Run(ctx, run.ID)
	if got.State != RunEnded || got.EndReason != EndAgentRevoked || got.EndedBy != "operator:root" {
		t.Errorf("the revoked token's run: %s %s by %q, want ended agent_revoked by operator:root", got.State, got.EndReason, got.EndedBy)
	}
	if got, _ := e.s.Run(ctx, keep.ID); got.State.Terminal() {
		t.Errorf("another agent's run: %s, want it live", got.State)
	}
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "id"), nil); !errors.Is(err, ErrRunEnded) {
		t.Errorf("an action of the ended run: %v, want ErrRunEnded", err)
	}
}
