package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
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
func (s *server) mcpHandler(session func(engine.Caller) *sdk.Server) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		p := principalFrom(r.Context())
		if p == nil || p.runToken.IsZero() {
			return nil
		}
		return session(engine.Caller{RunToken: p.runToken, RemoteAddr: p.remoteAddr})
	}, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxActionBody, // ssh_exec's stdin
		SessionTimeout:      mcpSessionTimeout,
	})
	bearer := sdkauth.RequireBearerToken(s.verifyRunToken, nil)
	return s.mcpGuard(http.NewCrossOriginProtection().Handler(bearer(h)))
}

// mcpGuard keeps /mcp to agents over HTTP: local callers have airlock mcp,
// reviewers decide and never act, and a caller that guessed wrong tokens
// too often waits.
func (s *server) mcpGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		switch {
		case p.local:
			writeError(w, http.StatusNotFound, api.CodeNotFound, "MCP is not served on the local socket; run `airlock mcp` (stdio) instead")
			return
		case p.isReviewer:
			writeError(w, http.StatusForbidden, api.CodeForbidden, "reviewers do not call agent tools; use a run token from POST /v1/runs")
			return
		}
		// Wrong run tokens were refused (and met their address's budget)
		// where the request was identified; a valid one is let in.
		next.ServeHTTP(w, r)
	})
}

// verifyRunToken is the bearer-token verifier of /mcp: the token must
// belong to a run that may still act, or whose next action asks a
// reviewer to renew it. The session is bound to the token's own run,
// which its renewals keep, and the token's expiry is the session's.
func (s *server) verifyRunToken(ctx context.Context, token string, r *http.Request) (*sdkauth.TokenInfo, error) {
	sess, err := s.e.Runs().TokenSession(ctx, engine.NewSecret(token))
	if err != nil {
		why := runTokenProblem(err)
		if why == "" {
			s.log.Error("verifying a run token", "error", err)
			return nil, errors.New("the run token could not be verified")
		}
		if invalidRunToken(err) { // a guess; a genuine token of an ended run is not
			s.e.Identity().AuthFailed(ctx, "run_token", runTokenLimitKey(r))
		}
		return nil, fmt.Errorf("%w: %s", sdkauth.ErrInvalidToken, why)
	}
	return &sdkauth.TokenInfo{UserID: sess.ID, Expiration: sess.Expires}, nil
}

// runTokenProblem says why a token was refused, or "" for a failure that
// is not the caller's.
func runTokenProblem(err error) string {
	switch {
	case invalidRunToken(err):
		return "the run token is not valid; create a run with POST /v1/runs"
	case errors.Is(err, engine.ErrTokenExpired):
		return "the run token has expired, and a token's lifetime is never renewed; create a new run with POST /v1/runs"
	case errors.Is(err, engine.ErrRunExpired):
		return "the run's approval ran out and it may not be renewed; create a new run with POST /v1/runs"
	case errors.Is(err, engine.ErrRunDenied):
		return "a reviewer denied this run; ask a human before creating a new one"
	case errors.Is(err, engine.ErrRunEnded):
		return "the run has ended; create a new run with POST /v1/runs"
	}
	return ""
}
