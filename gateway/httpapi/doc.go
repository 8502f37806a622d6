// Package httpapi is the gateway's HTTP front end: the /v1 API, served to
// agents over the local Unix socket and to agents and reviewers over the
// HTTP listener; MCP over Streamable HTTP at /mcp; /healthz and /metrics;
// and the mount point of the reviewer pages (/ui, refused to any agent
// credential or bearer token).
//
// It establishes who calls — a local process by its kernel-reported
// credentials and the local token, an HTTP agent by its run token, a
// reviewer by a reviewer token — decodes requests strictly, and
// translates: every operation is the engine's, and the engine's refusals
// become statuses and error codes in one table (writeErr).
package httpapi
