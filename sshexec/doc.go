// Package sshexec runs one command on one SSH server over one brand-new
// connection and reports exactly what happened.
//
// Run dials the configured address, checks the server's host key against
// pinned keys and known_hosts files only (there is no trust on first use and
// no way to turn checking off), authenticates with the configured signers,
// opens one session, sends one "exec" request, drains stdout and stderr into
// bounded buffers, and closes the connection before it returns. It never
// requests a PTY, agent forwarding, X11, port forwarding or a subsystem
// (but SFTP, for Put and Get), and no environment variable but the fixed
// non-interactive set of package batchenv (GIT_TERMINAL_PROMPT=0,
// PAGER=cat, …), sent as "env" requests that sshd takes when its
// AcceptEnv allows and otherwise ignores; it rejects every channel the
// server tries to open toward it. There is no connection cache, pool or keepalive anywhere in
// this package: each call to Run starts from nothing.
//
// A target behind jump hosts (Config.Via) is reached the way OpenSSH's
// ProxyJump does it, with nothing more: a fresh connection to the first
// jump host, its own host key check and credential, one "direct-tcpip"
// channel (RFC 4254 §7.2) to the next address, a full SSH handshake over
// that channel with the next host's own pinned keys, and so on to the
// target. No session is ever opened on a jump host, and every hop is closed
// with the action. A failure before the command started names its hop
// (Result.Hop); each jump host's key fingerprint is reported (Result.Via).
//
// One deadline covers dial, key exchange, authentication, exec and the output
// drain. When it passes, or the caller cancels, Run sends "signal KILL"
// (RFC 4254 §6.9), waits a short grace period for "exit-status" or
// "exit-signal" (§6.10) and reports whether termination was confirmed.
//
// Every result carries one Outcome from a closed, persisted set (the
// contract's outcome names) together with the facts behind it: exit code or
// signal, the host key's SHA256 fingerprint, the server's version string,
// per-phase durations and output sizes.
//
// sshexec knows nothing of HTTP, approvals or the audit log; the gateway
// wraps it with those.
//
// References: RFC 4251–4254 (SSH), the OpenSSH PROTOCOL files, and
// sshd(8)'s AUTHORIZED_KEYS and SSH_KNOWN_HOSTS FILE FORMAT sections.
package sshexec
