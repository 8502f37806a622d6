// Package engine is the gateway's core, with no HTTP in it. It opens the
// stores (the audit chain, the output store, the approvals state), holds
// the credentials and each target's connection slots, and runs every
// action's lifecycle: resolve the request and the caller's run, record
// action.requested, get the approval policy asks for, take a slot, record
// the intent durably, run one command over one fresh connection (sshexec),
// store the output and record the one outcome. It also serves what
// reviewers do (log in, list, decide, revoke, read output) and what
// investigators read, with one set of refusals (ErrNotFound,
// ErrAlreadyDecided, …) whichever front end asks.
//
// The front ends — the /v1 API and the local socket (gateway/httpapi),
// the reviewer pages (gateway/web), MCP (gateway/mcp) and the webhook
// notifier (gateway/notify) — translate their requests into the engine's
// calls and its refusals into their own words, and hold no state of their
// own about actions, runs or approvals. The engine knows none of them.
package engine
