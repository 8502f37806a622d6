package sshexec

import (
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec/batchenv"
)

// sendBatchEnv sends the fixed non-interactive environment (package
// batchenv) as "env" requests (RFC 4254 §6.4) on the session, before its
// exec. Without a reply asked for, as OpenSSH's SendEnv sends them: sshd
// sets the names its AcceptEnv lists and ignores the others without a
// word, and a refusal must not fail the action (nor cost a round trip per
// variable). Requests on a channel are handled in order, so the exec that
// follows sees them. The set is the package's, never the caller's.
func sendBatchEnv(ch ssh.Channel) {
	for _, v := range batchenv.Vars() {
		ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{v.Name, v.Value}))
	}
}
