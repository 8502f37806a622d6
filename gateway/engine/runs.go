package engine

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/gateway/api"
)

// Find returns the caller's existing run, whatever its state, without
// creating or changing one: for reading, and for naming the run of a
// refused request.
func (e *Runs) Find(ctx context.Context, c Caller) (api.Run, error) {
	run, err := e.findRun(ctx, c)
	if err != nil {
		return api.Run{}, err
	}
	return apiRun(run), nil
}

// findRun is Runs.Find.
func (e *core) findRun(ctx context.Context, c Caller) (approvals.Run, error) {
	if c.Local {
		return e.store.FindLocal(ctx, approvals.Peer(c.Peer))
	}
	return e.store.FindRemote(ctx, c.RunToken.s)
}

// resolveRun finds or creates the caller's run, if it may act; with a
// refusal it returns the run it refused, for naming.
func (e *core) resolveRun(ctx context.Context, c Caller) (approvals.Run, error) {
	if c.Local {
		return e.store.ResolveLocal(ctx, approvals.Peer(c.Peer))
	}
	return e.store.ResolveRemote(ctx, c.RunToken.s)
}

// ResolveToken returns the run a bearer token acts in if that run may
// still act, or may ask a reviewer to renew it (expired, Renewable; see
// approvals.Store.CheckRemote). It never renews: only an action does.
func (e *Runs) ResolveToken(ctx context.Context, tok Secret) (api.Run, error) {
	_, run, err := e.store.CheckRemote(ctx, tok.s)
	if err != nil {
		return api.Run{}, classify(err)
	}
	return apiRun(run), nil
}

// RegisterAnchor makes a local process the anchor of a new run (airlock
// run, airlock mcp).
func (e *Runs) RegisterAnchor(ctx context.Context, peer Peer) (api.Run, error) {
	run, err := e.store.RegisterAnchor(ctx, approvals.Peer(peer))
	if err != nil {
		return api.Run{}, classify(err)
	}
	return apiRun(run), nil
}

// Host is the host part of a client's address (host:port), as logs name
// it; budgets are kept per Bucket.
func Host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Budgets of run creation, per minute: per address bucket, and per agent
// identity from any address. An identity's budget is the larger: a CI
// fleet under one identity spreads over many addresses, and one agent
// process creates one run.
const (
	runsPerAddressMax = 10
	runsPerAgentMax   = 30
)

// runsPerAddress is the limiter key of the runs created from an address
// bucket.
func runsPerAddress(bucket string) string { return "runs:" + bucket }

// runsPerAgent is the limiter key of the runs an agent identity creates.
func runsPerAgent(subject string) string { return "runs-agent:" + subject }

// CreateRemote creates a run for a remote agent that proved its
// identity with an agent token: the run's requester is the agent's
// subject (agent:NAME/ID), never a name the caller chose, and the agent's
// limits bind its every action. The run's token is in the view it
// returns, the one time it is shown.
func (e *Runs) CreateRemote(ctx context.Context, agent Agent, remoteAddr string, ttl time.Duration) (api.Run, error) {
	switch spent, d := e.limiter.charge(quota{runsPerAddress(Bucket(remoteAddr)), runsPerAddressMax}, quota{runsPerAgent(agent.Subject()), runsPerAgentMax}); spent {
	case 0:
		return api.Run{}, refuseFor(d, fmt.Sprintf("too many runs created from this address (%d a minute); %s", runsPerAddressMax, retryText(d)))
	case 1:
		return api.Run{}, refuseFor(d, fmt.Sprintf("too many runs created by this agent identity, %s (%d a minute, from any address); %s", agent.Subject(), runsPerAgentMax, retryText(d)))
	}
	if blk, ok := e.conf().cfg.Agents[agent.a.Name]; ok {
		limits, ok := approvals.Intersect(agent.a.Limits, blk.Limits)
		if !ok {
			return api.Run{}, refuse(ErrForbidden, fmt.Sprintf("agent %q: this token's limits and its agent block's have no target in common; ask an operator for a token within %s", agent.a.Name, scopeText(blk.Limits)))
		}
		agent.a.Limits = limits
	}
	rr := approvals.RemoteRun{Requester: agent.Subject(), Agent: &agent.a}
	if ttl != 0 {
		rr.TTL = &ttl
	}
	run, tok, err := e.store.CreateRemote(ctx, rr)
	if err != nil {
		return api.Run{}, classify(err)
	}
	v := apiRun(run)
	v.Token = tok.Reveal() // the one time it is shown
	return v, nil
}

// Get returns one run.
func (e *Runs) Get(ctx context.Context, raw string) (Run, error) {
	id, err := runID(raw)
	if err != nil {
		return Run{}, err
	}
	run, err := e.store.Run(ctx, id)
	if err != nil {
		return Run{}, classify(err)
	}
	v := runView(run)
	if run.Renewable() {
		next, err := e.store.RenewedBy(ctx, id)
		if err != nil {
			return Run{}, classify(err)
		}
		v.RenewedBy = string(next)
	}
	return v, nil
}

// Owns reports whether run id is the caller's: its own run, a run its
// run renews, or (local callers) a run of its anchor made through
// another replica.
func (e *Runs) Owns(ctx context.Context, c Caller, id string) bool { return e.inRun(ctx, c, id) }

// Recent returns the active runs and the ones that ended lately (the
// n created last, whatever their state), oldest first.
func (e *Runs) Recent(ctx context.Context, n int) ([]Run, error) {
	active, err := e.store.Runs(ctx)
	if err != nil {
		return nil, classify(err)
	}
	recent, err := e.store.RecentRuns(ctx, n)
	if err != nil {
		return nil, classify(err)
	}
	seen := map[approvals.RunID]bool{}
	for _, r := range recent {
		seen[r.ID] = true
	}
	for _, r := range active {
		if !seen[r.ID] {
			recent = append(recent, r)
		}
	}
	slices.SortStableFunc(recent, func(a, b approvals.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return runViews(recent), nil
}

// Active returns the active runs.
func (e *Runs) Active(ctx context.Context) ([]Run, error) {
	runs, err := e.store.Runs(ctx)
	if err != nil {
		return nil, classify(err)
	}
	return runViews(runs), nil
}

// End ends a run at its own agent's wish (DELETE by its token or from
// its local process). A run that ended already is left as it is.
func (e *Runs) End(ctx context.Context, raw string) (api.Run, error) {
	id, err := runID(raw)
	if err != nil {
		return api.Run{}, err
	}
	return e.endRun(ctx, id, func() error { return e.store.EndRun(ctx, id) })
}

// Revoke ends a run at a reviewer's wish; its next action is refused, and
// actions waiting for approval in it are told the run ended. A run that
// ended already is left as it is.
func (e *Runs) Revoke(ctx context.Context, rv Reviewer, raw string, note string) (api.Run, error) {
	id, err := runID(raw)
	if err != nil {
		return api.Run{}, err
	}
	return e.endRun(ctx, id, func() error { return e.store.Revoke(ctx, rv.rv, id, note) })
}

func (e *core) endRun(ctx context.Context, id approvals.RunID, end func() error) (api.Run, error) {
	run, err := e.store.Run(ctx, id)
	switch {
	case err != nil:
		return api.Run{}, classify(err)
	case run.State.Terminal():
		return apiRun(run), nil // ended already: ending is idempotent
	}
	if err := end(); err != nil {
		return api.Run{}, classify(err)
	}
	if run, err = e.store.Run(ctx, id); err != nil {
		return api.Run{}, classify(err)
	}
	return apiRun(run), nil
}

// anchorCovers is how many processes an anchor covers now: itself and
// every process under it; 0 when it is gone (or its pid is another
// process's).
func anchorCovers(id approvals.ProcessID) int {
	table, err := proctree.Table()
	if err != nil {
		return 0
	}
	for _, p := range table {
		if p.PID == id.PID {
			if p.StartTime != id.StartTime || p.Exited() {
				return 0
			}
			return 1 + len(proctree.Descendants(table, id.PID))
		}
	}
	return 0
}

// apiRun is a run as the API shows it.
func apiRun(r approvals.Run) api.Run {
	v := api.Run{ID: string(r.ID), State: api.RunState(r.State.String()), Kind: api.RunRemote, Requester: r.Requester, CreatedAt: r.CreatedAt, Actions: r.Actions}
	v.ExpiresAt = timeOrNil(r.ExpiresAt)
	v.TokenExpiresAt = timeOrNil(r.TokenExpiresAt)
	v.Limits = limitTexts(r.Limits)
	v.Renews, v.Renewable = string(r.Renews), r.Renewable()
	if r.State.Terminal() {
		v.EndReason, v.EndedBy, v.EndNote = r.EndReason.String(), r.EndedBy, r.EndNote
		if r.EndReason == 0 {
			v.EndReason = ""
		}
	}
	if a := r.Anchor; a != nil {
		v.Kind = api.RunLocal
		v.Anchor = &api.Process{PID: a.ID.PID, StartTime: a.ID.StartTime, Executable: a.Exe, SHA256: a.ExeSHA256,
			Argv: a.Argv, Cwd: a.Cwd, UID: a.UID, User: a.User, Warnings: a.Warnings}
		if !r.State.Terminal() {
			v.Anchor.Covers = anchorCovers(a.ID)
		}
		for _, c := range a.Chain {
			v.Anchor.Parents = append(v.Anchor.Parents, api.Process{PID: c.ID.PID, StartTime: c.ID.StartTime, Executable: c.Exe, UID: c.UID, Argv: []string{c.Comm}})
		}
	}
	return v
}

// limitTexts is an agent's limits as the API writes them, one
// "target" or "account@target" each.
func limitTexts(limits []approvals.Scope) []string {
	var out []string
	for _, sc := range limits {
		out = append(out, scopeText([]approvals.Scope{sc}))
	}
	return out
}
