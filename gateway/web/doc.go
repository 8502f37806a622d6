// Package web is the reviewers' browser interface to the gateway: the
// login, pending-approval, runs, action and audit pages served under /ui/.
//
// It owns the HTML (html/template, parsed once from files embedded in the
// binary), the one stylesheet and the one script (no inline script or
// style, no external assets, no build step), reviewer sessions (HttpOnly,
// SameSite=Strict cookies with idle and absolute expiry), CSRF tokens on
// every state-changing form, the security headers of every page, and the
// honest display of attacker-controlled text: commands, arguments, paths
// and reasons are shown with every control, bidirectional, zero-width and
// look-alike character replaced by a visible escape and flagged on the
// card (see Reveal).
//
// It knows nothing of SQLite, SSH or the audit log's format: everything it
// shows or changes goes through Backend, which the gateway implements with
// its stores. Every decision is bound to the request id and digest the
// reviewer was shown; the backend refuses it when the request changed.
package web
