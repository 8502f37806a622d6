// Package api holds the gateway's wire types — the action object, requests,
// runs, approvals, targets, errors and server-sent events — and a small
// client for them over the local socket or HTTP.
//
// It is what airlock-ssh, airlock mcp and the reviewer CLI are built on, so
// it stays small and free of the gateway's storage: importing it never
// brings in SQLite.
package api
