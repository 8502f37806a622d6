package approvals

import (
	"context"
	"errors"
	"testing"
)

// An account made by single sign-on has no password, keeps the
// identities its provider links to it until its next login, and is never
// made over a password account of the same name.
func TestSSOAccountsAndTheirLinks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.s.Accounts()
	sofia, err := acc.SSOLogin(ctx, "sofia", "https://idp.example id-1", "sso:https://idp.example", []string{"agent:ci-bot/", "sofia-local"})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.sink.accounts) != 1 || e.sink.accounts[0].Kind != EventReviewerAdded || e.sink.accounts[0].Reviewer.By != "sso:https://idp.example" {
		t.Errorf("the first sign-on recorded %+v", e.sink.accounts)
	}
	if _, err := acc.Verify(ctx, "sofia", NewSecret("!sso")); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a password verified for an sso account: %v", err)
	}
	if err := acc.SetPassword(ctx, "sofia", NewSecret("a long enough password"), "test"); !errors.Is(err, ErrSSOAccount) {
		t.Errorf("a password set for an sso account: %v", err)
	}
	e.reviewer("rita") // a password account
	if _, err := acc.SSOLogin(ctx, "rita", "https://idp.example id-2", "sso:https://idp.example", nil); !errors.Is(err, ErrPasswordAccount) {
		t.Errorf("sign-on took over a password account: %v", err)
	}

	agent, _, err := e.s.AddAgent(ctx, "ci-bot", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.s.CreateRemote(ctx, RemoteRun{Requester: agent.Subject(), Agent: &agent})
	if err != nil {
		t.Fatal(err)
	}
	q, ch := e.authorize(ctx, run.ID, act("call-box", "id"))
	if _, err := e.s.Decide(ctx, sofia, q.ID, Decision{Verdict: Approve}); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("sofia decides for the agent her provider links to her: %v", err)
	}
	// Another identity at the provider never takes her account over, by
	// her name in any case.
	for _, name := range []string{"sofia", "Sofia"} {
		if _, err := acc.SSOLogin(ctx, name, "https://idp.example id-666", "sso:https://idp.example", nil); !errors.Is(err, ErrOtherIdentity) {
			t.Errorf("%s as another identity: %v, want ErrOtherIdentity", name, err)
		}
	}
	// At her next login the provider links nothing: she may decide.
	sofia, err = acc.SSOLogin(ctx, "sofia", "https://idp.example id-1", "sso:https://idp.example", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Decide(ctx, sofia, q.ID, Decision{Verdict: Deny}); err != nil {
		t.Errorf("sofia decides once unlinked: %v", err)
	}
	recv(t, ch)
}
