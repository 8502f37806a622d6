package engine

import (
	"context"
	"errors"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
)

// AddAgent issues a token for a remote agent named name, whose runs may
// act only within limits ("target" or "account@target"; none: anywhere),
// valid for ttl (zero: until revoked). The token is in the answer once.
func (e *Admin) AddAgent(ctx context.Context, name string, limits []string, ttl time.Duration) (api.Agent, error) {
	if !approvals.ValidName(name) {
		return api.Agent{}, refuse(ErrInvalid, "name: use 1 to 64 letters, digits, '.', '_' or '-'")
	}
	if ttl < 0 {
		return api.Agent{}, refuse(ErrInvalid, "ttl must be positive (or none: until revoked)")
	}
	var scope []approvals.Scope
	for _, l := range limits {
		sc, err := e.conf().cfg.Limit(l)
		if err != nil {
			return api.Agent{}, refuse(ErrInvalid, err.Error())
		}
		scope = append(scope, sc)
	}
	a, tok, err := e.store.AddAgent(ctx, name, scope, ttl)
	if err != nil {
		return api.Agent{}, classify(err)
	}
	v := agentView(a)
	v.Token = tok.Reveal()
	return v, nil
}

// Agents lists the agent tokens, revoked ones included; never a token.
func (e *Admin) Agents(ctx context.Context) ([]api.Agent, error) {
	as, err := e.store.Agents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Agent, 0, len(as))
	for _, a := range as {
		out = append(out, agentView(a))
	}
	return out, nil
}

// RevokeAgent revokes an agent token by id, or every token of an agent by
// name; by says who.
func (e *Admin) RevokeAgent(ctx context.Context, idOrName, by string) ([]api.Agent, error) {
	as, err := e.store.RevokeAgent(ctx, idOrName, by)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]api.Agent, 0, len(as))
	for _, a := range as {
		out = append(out, agentView(a))
	}
	return out, nil
}

// agentView is an agent token as the API shows it (without the token).
func agentView(a approvals.Agent) api.Agent {
	v := api.Agent{ID: string(a.ID), Name: a.Name, Subject: a.Subject(), CreatedAt: a.CreatedAt, RevokedBy: a.RevokedBy}
	v.Limits = limitTexts(a.Limits)
	v.ExpiresAt = timeOrNil(a.ExpiresAt)
	v.RevokedAt = timeOrNil(a.RevokedAt)
	return v
}

// VerifyAgent returns the agent an agent token belongs to; a wrong,
// revoked or expired token is ErrUnauthorized.
func (e *Identity) VerifyAgent(ctx context.Context, token Secret) (Agent, error) {
	a, err := e.store.VerifyAgent(ctx, token.s)
	switch {
	case err == nil:
		return Agent{a}, nil
	case errors.Is(err, approvals.ErrWrongToken), errors.Is(err, approvals.ErrMalformedToken), errors.Is(err, approvals.ErrAgentNotUsable):
		return Agent{a}, refuse(ErrUnauthorized, "the agent token is not valid: it is wrong, revoked or expired; ask an operator for one (airlock agent add)")
	}
	return Agent{a}, err
}
