// Package httpapi is the gateway's HTTP front end: the /v1 API, served to
// agents over the local Unix socket and to agents and reviewers over the
// HTTP listener; the sessions of MCP over Streamable HTTP at /mcp (their
// run tokens checked here, their tools gateway/mcp's, which the wiring in
// package gateway hands in: the front ends know nothing of each other);
// /healthz and /metrics;
// and the mount point of the reviewer pages (/ui, refused to any agent
// credential or bearer token).
//
// It establishes who calls — a local process by its kernel-reported
// credentials and the local token, an HTTP agent by its run token, a
// reviewer by a reviewer token — decodes requests strictly, and
// translates: every operation is the engine's, and the engine's refusals
// become statuses and error codes in one table (writeErr).
package httpapi
