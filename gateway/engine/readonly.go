package engine

import (
	"github.com/airlockgw/airlock/deploy/policy"
	cmdclass "github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/sshexec"
)

// exitRefused is airlock-action's exit status for a request it refused,
// nothing run (forcedcmd.ExitRefused).
const exitRefused = 126

// marksReadOnly reports whether the action's command goes to the target
// marked read-only: the account enforces read-only (enforce_read_only,
// which only an account behind airlock-action takes) and the classifier
// rated the command read_only. The target then runs it with every mount
// read-only, so that a command the classifier misjudged cannot write.
func (l *lifecycle) marksReadOnly() bool {
	return l.xfer == nil && l.account.EnforceReadOnly && l.account.ActionPolicy != nil &&
		l.a.Snapshot().Class == cmdclass.ReadOnly.String()
}

// sentCommand is the command as the target receives it: the agent's, with
// the read-only mark in front when the action is marked. The mark is the
// gateway's alone: the account's policy has no verb an agent could name
// with it, so a command that carries one is rejected before it is sent.
func (l *lifecycle) sentCommand() string {
	if l.readOnly {
		return policy.MarkReadOnly(l.req.Command)
	}
	return l.req.Command
}

// readOnlyNote is what the outcome's detail adds for a command sent
// marked read-only (r: what the connection gave), so that the agent reads
// a failed write as what it is.
func readOnlyNote(r *sshexec.Result) string {
	switch r.Outcome {
	case sshexec.Exited:
		if r.ExitCode == exitRefused {
			return "; sent marked read-only (enforce_read_only), and exit 126 is airlock-action refusing it, for instance because the target cannot run it read-only: its stderr says why"
		}
	case sshexec.Signaled, sshexec.ExitMissing, sshexec.TimedOut, sshexec.Cancelled, sshexec.ConnectionLost:
	default:
		return ""
	}
	return "; ran read-only-enforced (enforce_read_only): every mount on the target was read-only, so a write there fails with \"Read-only file system\""
}
