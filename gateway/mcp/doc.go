// Package mcp is airlock's Model Context Protocol face: typed tools —
// ssh_exec, list_targets and get_action, and over stdio ssh_put and
// ssh_get — that give an MCP host the same lifecycle, approvals and audit
// as airlock-ssh, with honest results.
//
// A tool result's structured content is the API's action object, and the
// result is an error unless the command exited with status 0; its text is
// a short summary with the next step airlock-ssh would print. While a call
// waits for a reviewer the server sends progress notifications and log
// messages, so a host can show that a human is being asked and why. A call
// never holds its host longer than Options.MaxWait (mcp.max_wait, below
// the 60 s request timeout of most hosts) unless it asked to (wait_s):
// then it answers with the action in flight and how to follow it, and the
// action goes on. Cancelling a call before it answers cancels the action,
// which the gateway records; a cancel after the answer reaches nothing.
//
// list_targets shows each account's policy (approval mode, escalated,
// refused and unreviewed classes, secrets by name, limits), and output
// schemas are small, so that tools/list costs a model little context.
//
// The server works against a Backend: *api.Client over the local socket
// (airlock mcp, the stdio bridge) or the gateway's own adapter for a run
// token (Streamable HTTP at /mcp). It knows nothing of SSH, runs, approvals
// or the audit log: the gateway decides; this package reports.
//
// There is deliberately no tool that takes an address: the gateway only
// dials targets its operator configured and pinned.
package mcp
