package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockgw/airlock/approvals"
	cmdclass "github.com/airlockgw/airlock/gateway/classify"
)

// maxWhyPart is what approval.why quotes of one part of the command.
const maxWhyPart = 120

// approvalWhy says in a few words why a reviewer is asked about the action
// (api.ApprovalInfo.Why), for the agent that waits: the class the
// account's policy escalates with the parts of the command that have it
// ("destructive: rm -f x"), the gateway-held secret it uses ("uses secret
// db-password"), or else the account's approval mode. The parts are the
// command as stored: what looks like a credential is hidden.
func (l *lifecycle) approvalWhy(kind approvals.Kind) string {
	var why []string
	if cl, ok := l.escalatedClass(); ok {
		var texts []string
		for _, p := range l.parts {
			if p.Class >= cl && !slices.Contains(texts, p.Text) {
				texts = append(texts, clip(p.Text, maxWhyPart))
			}
		}
		if len(texts) == 0 {
			texts = []string{clip(l.a.redaction.Text, maxWhyPart)}
		}
		why = append(why, l.a.Snapshot().Class+": "+strings.Join(texts, "; "))
	}
	if l.secret != "" {
		why = append(why, "uses secret "+l.secret)
	}
	if len(why) > 0 {
		return strings.Join(why, "; ")
	}
	if kind == approvals.KindRun {
		return "approval mode run: the run is not approved yet (one approval covers its later commands)"
	}
	return "approval mode call: a reviewer approves every command on this account"
}

// escalatedClass is the first of the account's escalate classes the
// command's class reaches, if it reaches one.
func (l *lifecycle) escalatedClass() (cmdclass.Class, bool) {
	if l.escalation == "" {
		return 0, false
	}
	got, err := cmdclass.ParseClass(l.a.Snapshot().Class)
	if err != nil {
		return 0, false
	}
	for _, cl := range l.account.Escalate {
		if got >= cl {
			return cl, true
		}
	}
	return 0, false
}

// waitingMessage is the message of the waiting_approval state event: until
// when the reviewer may decide, why one is asked, and the escalation in
// full when policy took the action out of a run approval.
func (l *lifecycle) waitingMessage(r approvals.Request, why string) string {
	msg := fmt.Sprintf("waiting for a reviewer to approve this %s (until %s) because: %s", r.Kind, r.ExpiresAt.UTC().Format(time.RFC3339), why)
	if l.escalation != "" {
		msg += "; it asks its own approval: " + l.escalation
	}
	return msg
}
