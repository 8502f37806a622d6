// Package engine is the gateway's core, with no HTTP in it. It opens the
// stores (the audit chain, the output store, the approvals state), holds
// the credentials and each target's connection slots, and runs every
// action's lifecycle: resolve the request and the caller's run, record
// action.requested, get the approval policy asks for, take a slot, record
// the intent durably, run one command over one fresh connection (sshexec),
// store the output and record the one outcome.
//
// An Engine is wiring over a few small services, its faces, which share
// one core:
//
//   - Actions: what agents do — start an action, follow one of their
//     run's, send and fetch transfer files, list the targets;
//   - Runs: agents' runs — find or resolve a caller's, register a local
//     anchor, create a remote one, end, revoke, list;
//   - Review: what reviewers do — log in (password, login link, single
//     sign-on), list and decide approval requests, read output and reveal
//     commands (every read recorded);
//   - Audit: reading and verifying the audit log;
//   - Admin: what the operator changes — agent identities, reviewer
//     accounts, login links, the configuration, the local token;
//   - Identity: verifying callers' credentials (agent and workload
//     tokens, client certificates) and the budgets of failed attempts.
//
// The faces speak the engine's own words: views (Peer, Secret, Reviewer,
// Agent, Decision, and the API's objects) and one set of refusals
// (ErrNotFound, ErrAlreadyDecided, …, see errors.go) whichever front end
// asks; the approvals store's errors are mapped to them here.
//
// The files follow the lifecycle: lifecycle.go holds the steps of one
// action, admission.go what decides whether it may run at all
// (configuration, classification, verbs, OPA, quotas), credentials.go
// what it signs in with (keys, per-action certificates, secret stdin).
//
// The front ends take the faces they use: MCP (gateway/mcp) Actions; the
// reviewer pages (gateway/web) Review, Runs and Audit; the webhook
// notifier (gateway/notify) Audit, the clock and a goroutine; the /v1 API
// and the local socket (gateway/httpapi) the Engine. They translate their
// requests into the faces' calls and the refusals into their own words,
// and hold no state of their own about actions, runs or approvals. The
// engine knows none of them.
package engine
