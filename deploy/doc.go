// Package deploy owns what operators put onto targets and into the
// gateway's trust: authorized_keys lines that pin the gateway's key to a
// forced command with every forwarding off, and their installer; the
// gateway's SSH certificate authority and the short-lived per-action
// certificates it signs; host-key scanning and pinning after an
// out-of-band fingerprint check; and the systemd unit and target sshd
// snippet shipped as files beside this package (systemd/, sshd/).
//
// The forced command itself lives in the sub-packages policy (the policy
// file, tokenizer and matcher) and forcedcmd (running a request).
//
// Every function here is the body of one `airlock` admin verb (hosts scan,
// hosts pin, deploy authorized-keys, deploy install, ca init, ca
// public-key) or a piece the gateway calls per action (NewActionCert); the
// verbs themselves only parse flags.
//
// Files are written the same way everywhere: the directory's owner and
// mode are checked first, a temporary file is written in the same
// directory, synced and renamed over the old one, and the directory is
// synced; a file or directory writable by others is refused, never
// "fixed".
//
// deploy knows nothing of HTTP, approvals or the audit log; the gateway
// records what NewActionCert returns.
//
// References: sshd(8) AUTHORIZED_KEYS FILE FORMAT and SSH_KNOWN_HOSTS FILE
// FORMAT, ssh-keygen(1) CERTIFICATES, the OpenSSH PROTOCOL.certkeys file.
package deploy
