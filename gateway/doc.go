// Package gateway is the airlock daemon: it loads the configuration and the
// credentials, and ties sshexec, approvals and auditchain together into the
// action lifecycle — request, run, approval, durable intent, one fresh SSH
// connection, one recorded outcome — behind the HTTP API, the local Unix
// socket, the MCP server and the reviewer web UI.
//
// Nothing imports gateway but the commands under cmd/. The packages it wraps
// know nothing of it: sshexec knows no HTTP, approvals no SSH, auditchain
// neither.
package gateway
