package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/gateway/api"
	cmdclass "github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/opa"
)

// resolveRequest checks a request against the configuration; problem says
// why it is rejected.
func resolveRequest(cfg *config.Config, req api.ActionRequest) (*config.Target, *config.Account, time.Duration, string) {
	t, ok := cfg.Targets[req.Target]
	if !ok {
		return nil, nil, 0, fmt.Sprintf("unknown target %q (targets: %s)", clip(req.Target, maxNameLen), nameList(cfg.TargetNames))
	}
	name := req.Account
	if name == "" {
		name = t.DefaultAccount
		if name == "" {
			return nil, nil, 0, fmt.Sprintf("target %q has no default account; name one of %s", t.Name, nameList(t.AccountNames))
		}
	}
	acct, ok := t.Accounts[name]
	if !ok {
		return nil, nil, 0, fmt.Sprintf("target %q has no account %q (accounts: %s)", t.Name, clip(name, maxNameLen), nameList(t.AccountNames))
	}
	// Compare seconds before multiplying: a huge timeout_s would overflow
	// a Duration into a small or negative one.
	timeout := min(config.DefaultActionTimeout, acct.MaxTimeout)
	switch {
	case req.TimeoutS < 0:
		return t, acct, 0, "timeout_s must be positive"
	case int64(req.TimeoutS) > int64(acct.MaxTimeout/time.Second):
		return t, acct, 0, fmt.Sprintf("timeout_s %d is over the account's maximum of %d seconds", req.TimeoutS, int64(acct.MaxTimeout/time.Second))
	case req.TimeoutS != 0:
		timeout = time.Duration(req.TimeoutS) * time.Second
	}
	switch n := utf8.RuneCountInString(req.Reason); {
	case n > api.MaxReason:
		return t, acct, timeout, fmt.Sprintf("the reason is %d characters, over the limit of %d", n, api.MaxReason)
	case strings.ContainsRune(req.Reason, 0) || !utf8.ValidString(req.Reason):
		return t, acct, timeout, "the reason is not text: it must be valid UTF-8 without NUL bytes"
	}
	switch {
	case strings.TrimSpace(req.Command) == "":
		return t, acct, timeout, "the command is empty; an action is one command"
	case len(req.Command) > MaxCommandLen:
		return t, acct, timeout, fmt.Sprintf("the command is %d bytes, over the %d-byte limit", len(req.Command), MaxCommandLen)
	case strings.ContainsRune(req.Command, 0):
		return t, acct, timeout, "the command contains a NUL byte"
	case !utf8.ValidString(req.Command):
		return t, acct, timeout, "the command is not valid UTF-8"
	}
	return t, acct, timeout, ""
}

// stdinOf decodes a request's standard input (base64) and checks it
// against the account's max_stdin; problem says why it is refused. An
// empty input is none.
func stdinOf(b64 string, acct *config.Account) (stdin []byte, problem string) {
	if b64 == "" {
		return nil, ""
	}
	// The body that carried it is bounded (MaxActionBody): decoding it is.
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	switch {
	case err != nil:
		return nil, "stdin is not valid base64 (standard alphabet, padded): " + err.Error()
	case int64(len(b)) > acct.MaxStdin:
		return nil, fmt.Sprintf("the standard input is %d bytes, over the account's max_stdin of %d bytes", len(b), acct.MaxStdin)
	case len(b) == 0:
		return nil, ""
	}
	return b, ""
}

// classify classifies the command (gateway/classify) and applies the
// account's policy: refuse and deny_patterns reject it (problem says why),
// escalate takes it out of what a run approval covers. Policy only ever
// narrows what a reviewer approved.
func (l *lifecycle) classify() (problem string) {
	var res cmdclass.Result
	if t := l.xfer; t != nil {
		res = cmdclass.Transfer(t.Direction, t.Path, t.Overwrite)
	} else if p := l.account.ActionPolicy; p != nil {
		if res, problem = judgeVerb(p, l.req.Command, l.hide); problem != "" {
			// The refusal may quote an argument: hidden like the command.
			return "the account's airlock-action policy (" + l.account.ActionPolicyFile + ") refuses it, so nothing was sent: " + l.hide(problem)
		}
	} else {
		res = cmdclass.ClassifyHiding(l.req.Command, l.hide)
	}
	// The parts quote the command: what looks like a credential in them
	// is hidden as it is in the command (part by part, before they are
	// cut or quoted; and once more in the reason as a whole).
	l.classReason = l.hide(res.Reason())
	l.parts = res.Parts
	l.a.update(func(o *api.Action) { o.Class = res.Class.String() })
	// A pattern is matched against the line as sent and as the shell
	// reads it: "terraform" destroy, ls; terraform destroy and
	// sh -c 'terraform destroy' all hold the command terraform destroy.
	if len(l.account.DenyPatterns) > 0 {
		const maxQuoted = 200 // what a refusal quotes of a form
		forms, complete := cmdclass.ShellForms(l.req.Command)
		for _, re := range l.account.DenyPatterns {
			for _, f := range forms {
				if !re.MatchString(f.Text) {
					continue
				}
				// The form quotes the command: hidden as it is.
				as := fmt.Sprintf("%q", clip(l.hide(f.Text), maxQuoted))
				switch f.Kind {
				case cmdclass.LineForm:
					return fmt.Sprintf("the command, as the shell reads it (%s), matches the account's deny pattern %q; the policy refuses it", as, re.String())
				case cmdclass.CommandForm:
					return fmt.Sprintf("a command in it, as the shell reads it (%s), matches the account's deny pattern %q; the policy refuses it", as, re.String())
				}
				return fmt.Sprintf("the command matches the account's deny pattern %q; the policy refuses it", re.String())
			}
		}
		if !complete {
			return "the command nests or holds more than the gateway reads to match the account's deny patterns; the policy refuses it"
		}
	}
	for _, cl := range l.account.Refuse {
		if res.Class == cl {
			return "the account's policy refuses " + l.classReason
		}
	}
	for _, cl := range l.account.Escalate {
		if res.Class >= cl {
			l.escalation = "the account's policy escalates " + res.Class.String() + " commands: " + l.classReason
			break
		}
	}
	if l.secret != "" {
		// Any program can pass a secret on in a form the output mask
		// does not catch (base64, rev, a file): each use is asked.
		esc := secretEscalation(l.secret)
		if l.escalation != "" {
			esc = l.escalation + "; and " + esc
		}
		l.escalation = esc
	}
	// What looks like a credential, and a gateway-held secret (which a
	// read-only program can print in a form the output mask does not
	// catch), always go to a reviewer.
	l.unreviewed = l.escalation == "" && !l.a.redaction.Found() && l.req.Secret == "" &&
		slices.Contains(l.account.AllowUnreviewed, res.Class)
	return ""
}

// askOPA asks the policy block's engine (OPA) about the action, which the
// local policy allows, and records what it answered; problem says why it
// refused. Without an answer, fail_closed decides.
func (l *lifecycle) askOPA(ctx context.Context) (problem string) {
	client, o := l.conf.opa, l.conf.cfg.OPA
	if client == nil {
		return ""
	}
	obj := l.a.Snapshot()
	in := opa.Input{
		Subject: opa.Subject{Type: "agent", ID: l.run.Requester, Properties: opa.SubjectProperties{
			Run: string(l.run.ID), RunState: l.run.State.String(), Transport: "http", Agent: string(l.run.AgentID)}},
		Action: opa.Action{Name: obj.Class, Properties: opa.ActionProperties{
			Mode: l.account.Approval.String(), Escalated: l.escalation != "", Unreviewed: l.unreviewed}},
		Resource: opa.Resource{Type: "ssh_account", ID: l.target.Name + "/" + l.account.Name, Properties: opa.ResourceProperties{
			Target: l.target.Name, Account: l.account.Name, Command: obj.Command, Secret: l.secret,
			TimeoutS: int(l.timeout / time.Second), StdinSize: int64(len(l.stdin))}},
		Context: opa.Context{Time: l.e.clock.Now().UTC(), Gateway: l.e.alog.Origin(), Action: l.a.id},
	}
	if l.c.Local {
		in.Subject.Properties.Transport = "socket"
	}
	if l.secret != "" {
		in.Resource.Properties.StdinSize = 0 // the secret's size is its own
	}
	for _, p := range l.parts {
		in.Resource.Properties.Parts = append(in.Resource.Properties.Parts, opa.Part{Text: p.Text, Class: p.Class.String(), Rule: p.Rule})
	}
	d, err := client.Decide(ctx, in)
	switch {
	case err != nil:
		l.opa = &opaFacts{Decision: "error", Error: err.Error(), FailClosed: o.FailClosed, DecisionID: d.DecisionID}
		l.e.log.Warn("the policy engine gave no decision", "action", l.a.id, "error", err, "fail_closed", o.FailClosed)
		if o.FailClosed {
			return "the external policy engine (OPA) could not be asked, and the gateway fails closed (policy.fail_closed): " + err.Error()
		}
		return ""
	case !d.Allow:
		l.opa = &opaFacts{Decision: "deny", Rule: d.Rule, Reason: d.Reason, DecisionID: d.DecisionID}
		detail := "the external policy engine (OPA) refused it"
		if d.Rule != "" {
			detail += " (rule " + d.Rule + ")"
		}
		if d.Reason != "" {
			detail += ": " + d.Reason
		}
		return detail
	}
	l.opa = &opaFacts{Decision: "allow", Rule: d.Rule, Reason: d.Reason, DecisionID: d.DecisionID}
	return ""
}

// takeQuota counts the action against the account's quotas; problem says
// which one is spent.
func (l *lifecycle) takeQuota(ctx context.Context) (problem string) {
	q := l.account.Quota
	err := l.e.store.TakeQuota(ctx, l.run.ID, l.target.Name, l.account.Name, q)
	var qe *approvals.QuotaError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &qe) && qe.Of == "run":
		return fmt.Sprintf("this run has used its quota of %d actions on %s@%s (quota.per_run); a looping agent is stopped here: ask a human before going on, or start a new run",
			qe.Limit, l.account.Name, l.target.Name)
	case errors.As(err, &qe):
		return fmt.Sprintf("%s@%s has had its quota of %d actions in the last %s (quota.per_window); the next may start at %s",
			l.account.Name, l.target.Name, qe.Limit, qe.Window, qe.Next.UTC().Format(time.RFC3339))
	}
	l.e.log.Error("quota could not be counted", "action", l.a.id, "error", err)
	return "the account's quota could not be counted, so nothing was run: " + err.Error()
}

// judgeVerb classifies a request to an airlock-action account by the
// verb it names in p: the class the verb declares, or else the class of
// the program it runs (root's, through run_as = "root", is privileged);
// problem says why p refuses the request.
func judgeVerb(p *policy.Policy, command string, hide func(string) string) (cmdclass.Result, string) {
	plan, err := p.MatchText(command)
	if err != nil {
		return cmdclass.Result{}, err.Error()
	}
	v := plan.Verb
	if v.Class != "" {
		cl, err := cmdclass.ParseClass(v.Class)
		if err != nil {
			return cmdclass.Result{}, err.Error()
		}
		rule := fmt.Sprintf("verb %s of the action policy, declared %s", v.Name, cl)
		if v.RunAs == "root" && cl < cmdclass.Privileged {
			cl, rule = cmdclass.Privileged, rule+", runs as root"
		}
		return cmdclass.Result{Class: cl, Parts: []cmdclass.Part{{Text: hide(command), Class: cl, Rule: rule}}}, ""
	}
	argv := plan.Argv
	if v.RunAs != "" {
		argv = argv[len(policy.SudoPrefix(v.RunAs, p.Reaper)):]
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = policy.Quote(a)
	}
	inner := cmdclass.ClassifyHiding(strings.Join(words, " "), hide)
	cl := inner.Class
	if v.RunAs == "root" {
		cl = max(cl, cmdclass.Privileged)
	}
	rule := fmt.Sprintf("verb %s of the action policy runs %s: %s", v.Name, strings.Join(words, " "), inner.Reason())
	if v.RunAs != "" {
		rule += " (as " + v.RunAs + ")"
	}
	return cmdclass.Result{Class: cl, Parts: []cmdclass.Part{{Text: hide(command), Class: cl, Rule: hide(rule)}}}, ""
}

// hide replaces what looks like a credential in s, as in the command.
func (l *lifecycle) hide(s string) string { return l.conf.redactor.Redact(s).Text }

// escalationText is the escalation as reviewers read it: inside which
// approved run, when the run is one.
func (l *lifecycle) escalationText() string {
	if l.escalation != "" && l.run.State == approvals.RunApproved {
		return "inside approved run " + string(l.run.ID) + ", " + l.escalation
	}
	return l.escalation
}

// pendingLimitDetail says which cap on waiting requests err hit.
func pendingLimitDetail(err error) string {
	var pl *approvals.PendingLimitError
	if !errors.As(err, &pl) {
		return "too many requests are waiting for a decision; wait for a reviewer"
	}
	whose := "this run"
	if pl.Of == "requester" {
		whose = "this run's requester"
	}
	return fmt.Sprintf("%d requests of %s are waiting for a decision already (approval.max_pending_per_%s); wait for a reviewer to decide them", pl.Limit, whose, pl.Of)
}

// maxListedNames bounds the names an error lists.
const maxListedNames = 12

// nameList lists names for an error, at most maxListedNames of them.
func nameList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > maxListedNames {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListedNames], ", "), len(names)-maxListedNames)
	}
	return strings.Join(names, ", ")
}
