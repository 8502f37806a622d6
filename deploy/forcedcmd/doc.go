// Package forcedcmd is airlock-action, the forced command that sshd runs on
// a target instead of whatever the client asked for
// (command="airlock-action --policy FILE" in authorized_keys, or a
// certificate's force-command option).
//
// Serve reads the requested command from SSH_ORIGINAL_COMMAND, matches it
// against the policy (package policy), and either refuses it — exit status
// 126 and one line on stderr — or executes the verb's fixed argv directly,
// with no shell, a fixed PATH plus the verb's allow-listed variables, the
// verb's working directory, and the verb's timeout. When the timeout passes,
// or the client goes away (sshd's end of stdout closes: sshd refuses
// "signal" requests for forced commands, so closing the connection is the
// only way a gateway's timeout or cancel reaches the target), Serve stops
// the verb — every process of it, also those that left its process group —
// and confirms that they are gone. A verb with run_as runs under sudo as
// "airlock-action --reap -- argv…" (Reap), a supervisor holding the verb's
// user that stops it on Serve's behalf, since the account cannot signal
// another user's processes. Serve returns the program's exit status, 128+N
// when the program died of signal N, 124 on a timeout whose end is
// confirmed, 125 when the verb was stopped but its end could not be
// confirmed, and 127 when the program could not be started. Every request,
// allowed or refused, is logged as one line (a Record) to syslog, when a
// syslog socket exists, and to the policy's log_file; when sshd's
// ExposeAuthInfo is on, the line carries the certificate key ID
// ("airlock:<action id>") and serial, so that the target's own log names the
// gateway's audited action.
//
// A request marked read-only (policy.ReadOnlyMark, which a gateway sends
// for a command it rates read_only on an account with enforce_read_only)
// runs its verb in namespaces of its own where every mount is read-only,
// with no_new_privs; when the kernel cannot do that, the request is
// refused and nothing runs (see startConfined).
//
// With a transfer block, the built-in put and get are served too: every
// name beneath put_under or get_under is opened from the root directory's
// descriptor following no link (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
// or a component walk with O_NOFOLLOW without openat2), and a put's
// temporary file is published relative to its directory's descriptor, so
// that a directory swapped for a link after the check is refused, not
// followed.
//
// Check validates a policy file for airlock-action --check, and Explain
// shows what a command would run for --explain.
//
// This package knows nothing of the gateway, HTTP or approvals: it trusts
// the policy file and sshd, and nothing the client sends.
package forcedcmd
