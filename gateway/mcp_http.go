package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
)

// mcpSessionTimeout closes an MCP session no request has used for this
// long; a call in flight keeps its session open.
const mcpSessionTimeout = 30 * time.Minute

// mcpHandler serves MCP over Streamable HTTP (mounted at /mcp) to agents
// holding a run token from POST /v1/runs. Every request presents the token
// and is verified against its run (constant-time, in approvals); a session
// is bound to the run that opened it, so one token is one run.
//
// The SDK's DNS-rebinding protection stays on (a loopback listener refuses
// a non-loopback Host), cross-origin browser requests are refused, and
// bodies are capped like the rest of the API.
func (s *Server) mcpHandler() http.Handler {
	opts := mcp.Options{Version: Version, Logger: s.log.Named("mcp")}
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		p := principalFrom(r.Context())
		if p == nil || p.runToken.IsZero() {
			return nil
		}
		return mcp.NewServer(&runBackend{s: s, c: caller{runToken: p.runToken, remoteAddr: p.remoteAddr}}, opts)
	}, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: maxBody,
		SessionTimeout:      mcpSessionTimeout,
	})
	bearer := sdkauth.RequireBearerToken(s.verifyRunToken, nil)
	return s.mcpGuard(http.NewCrossOriginProtection().Handler(bearer(h)))
}

// mcpGuard keeps /mcp to agents over HTTP: local callers have airlock mcp,
// reviewers decide and never act, and a caller that guessed wrong tokens
// too often waits.
func (s *Server) mcpGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		switch {
		case p.local:
			writeError(w, http.StatusNotFound, api.CodeNotFound, "MCP is not served on the local socket; run `airlock mcp` (stdio) instead")
			return
		case p.isReviewer:
			writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers do not call agent tools; use a run token from POST /v1/runs")
			return
		case s.limiter.blocked(runTokenLimitKey(r)):
			writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many invalid run tokens from this address; wait a minute")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// verifyRunToken is the bearer-token verifier of /mcp: the token must
// belong to a run that may still act. The session is bound to the run's
// id, and the token's expiry is the run's.
func (s *Server) verifyRunToken(ctx context.Context, token string, r *http.Request) (*sdkauth.TokenInfo, error) {
	run, err := s.store.ResolveRemote(ctx, approvals.NewSecret(token))
	if err != nil {
		why := runTokenProblem(err)
		if why == "" {
			s.log.Error("verifying a run token", "error", err)
			return nil, errors.New("the run token could not be verified")
		}
		if invalidRunToken(err) { // a guess; a genuine token of an ended run is not
			s.authFailed(ctx, "run_token", runTokenLimitKey(r))
		}
		return nil, fmt.Errorf("%w: %s", sdkauth.ErrInvalidToken, why)
	}
	exp := run.TokenExpiresAt
	if !run.ExpiresAt.IsZero() && run.ExpiresAt.Before(exp) {
		exp = run.ExpiresAt
	}
	return &sdkauth.TokenInfo{UserID: string(run.ID), Expiration: exp}, nil
}

// runTokenProblem says why a token was refused, or "" for a failure that
// is not the caller's.
func runTokenProblem(err error) string {
	switch {
	case invalidRunToken(err):
		return "the run token is not valid; create a run with POST /v1/runs"
	case errors.Is(err, approvals.ErrTokenExpired), errors.Is(err, approvals.ErrRunExpired):
		return "the run has expired; create a new run with POST /v1/runs"
	case errors.Is(err, approvals.ErrRunEnded):
		return "the run has ended; create a new run with POST /v1/runs"
	case errors.Is(err, approvals.ErrRunDenied):
		return "a reviewer denied this run; ask a human before creating a new one"
	}
	return ""
}

// runBackend is the MCP tools' Backend for one run token: the gateway's
// own action lifecycle, as POST /v1/actions runs it for that token.
type runBackend struct {
	s *Server
	c caller
}

// RunAction starts the action and follows its events. When ctx ends (the
// MCP call was cancelled or its session closed) the action is cancelled;
// RunAction waits until that outcome is recorded.
func (b *runBackend) RunAction(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
	st, err := b.s.startAction(ctx, b.c, req)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeUnavailable, Message: "the gateway is shutting down"}, Status: http.StatusServiceUnavailable}
	}
	events, unsubscribe := st.subscribe()
	defer unsubscribe()
	// Events before the subscription are summed up by the current state.
	snap := st.snapshot()
	if ev.State != nil {
		ev.State(api.StateEvent{State: snap.State, ActionID: snap.ID, ApprovalID: snap.Approval.ID})
	}
	for {
		select {
		case e, ok := <-events:
			if !ok {
				<-st.done // dropped for falling behind, or finished
				a := st.snapshot()
				return &a, nil
			}
			switch d := e.data.(type) {
			case api.StateEvent:
				if ev.State != nil {
					ev.State(d)
				}
			case api.OutputEvent:
				if ev.Output != nil {
					if p, err := api.DecodeBytes(d.Data, d.Encoding); err == nil {
						ev.Output(e.name, p)
					}
				}
			case api.Action:
				return &d, nil
			}
		case <-ctx.Done():
			<-st.done // the action records its cancellation
			a := st.snapshot()
			return &a, nil
		}
	}
}

// Targets lists the configured targets as GET /v1/targets does.
func (b *runBackend) Targets(ctx context.Context) ([]api.Target, error) {
	return b.s.targetList(), nil
}

// Action returns an action of this token's run, from memory or rebuilt
// from the audit log, as GET /v1/actions/{id} does for the token.
func (b *runBackend) Action(ctx context.Context, id string) (*api.Action, error) {
	run, err := b.s.store.ResolveRemote(ctx, b.c.runToken)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeUnauthorized, Message: runTokenProblem(err)}, Status: http.StatusUnauthorized}
	}
	var obj api.Action
	if st, ok := b.s.lookupAction(id); ok {
		obj = st.snapshot()
	} else if a, found := b.s.actionFromAudit(ctx, id); found {
		obj = a
	}
	if obj.ID == "" || obj.RunID != string(run.ID) {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: "no action " + strconv.Quote(id) + " in your run"}, Status: http.StatusNotFound}
	}
	return &obj, nil
}

// targetList is the body of GET /v1/targets: names, addresses, accounts,
// approval modes and pinned fingerprints, never secrets.
func (s *Server) targetList() []api.Target {
	out := make([]api.Target, 0, len(s.cfg.TargetNames))
	for _, name := range s.cfg.TargetNames {
		t := s.cfg.Targets[name]
		v := api.Target{Name: t.Name, Address: t.Address, DefaultAccount: t.DefaultAccount,
			KnownHostsFile: t.KnownHostsFile != "", MaxParallel: t.MaxParallel, HostKeys: []string{}, Accounts: []api.TargetAccount{}}
		for _, k := range t.HostKeys {
			v.HostKeys = append(v.HostKeys, fingerprint(k))
		}
		for _, an := range t.AccountNames {
			a := t.Accounts[an]
			cred := s.cfg.Credentials[a.Credential]
			v.Accounts = append(v.Accounts, api.TargetAccount{Name: a.Name, Approval: api.Mode(a.Approval.String()),
				MaxTimeoutS: int(a.MaxTimeout / time.Second), Output: string(a.Output), Certificate: cred != nil && cred.CA})
		}
		out = append(out, v)
	}
	return out
}
