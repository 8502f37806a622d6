// Package gateway is the airlock daemon: it opens the engine
// (gateway/engine) over a loaded configuration (gateway/config), builds the
// front ends over it — the API and MCP (gateway/httpapi), the reviewer
// pages (gateway/web), the webhook notifier (gateway/notify) — and serves
// them on the agents' local Unix socket (its private directory, the
// control file carrying the local token) and the HTTP listener, until it
// is stopped gracefully.
//
// docs/architecture.md maps the packages and follows one action through
// them. Nothing imports gateway but the commands under cmd/.
package gateway
