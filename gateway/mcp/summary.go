package mcp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
)

// A summary shows at most this much of each stream: the full text the
// output policy allows is in the structured content.
const (
	summaryLines = 100
	summaryBytes = 8 << 10
)

// Summary is the text of an action's tool result: the outcome and exit
// code, the first lines of its output with a note of anything not shown,
// and the next step airlock-ssh prints.
func Summary(a *api.Action) string {
	var b strings.Builder
	where := fmt.Sprintf("on %s", a.Target)
	if a.Account != "" {
		where += " as " + a.Account
	}
	switch {
	case !a.Outcome.Valid():
		fmt.Fprintf(&b, "%s: still in flight (%s) %s (action %s)\n", a.State, a.Command, where, a.ID)
	case a.Outcome == sshexec.Exited && a.ExitCode != nil:
		fmt.Fprintf(&b, "exited with status %d %s (action %s)\n", *a.ExitCode, where, a.ID)
	case a.Outcome == sshexec.Rejected: // the detail names what was wrong, target and account included
		fmt.Fprintf(&b, "%s: %s (action %s)\n", a.Outcome, a.Detail, a.ID)
	default:
		fmt.Fprintf(&b, "%s: %s %s (action %s)\n", a.Outcome, a.Detail, where, a.ID)
	}
	if a.Approval.DecidedBy != "" {
		fmt.Fprintf(&b, "%s approval %s by %s", a.Approval.Mode, decisionWord(a.Approval.Decision), a.Approval.DecidedBy)
		if a.Approval.Reason != "" {
			fmt.Fprintf(&b, " (%q)", a.Approval.Reason)
		}
		b.WriteString("\n")
	}
	stream(&b, "stdout", a.Stdout, a.StdoutEncoding, a.StdoutBytes, a.StdoutTruncated)
	stream(&b, "stderr", a.Stderr, a.StderrEncoding, a.StderrBytes, a.StderrTruncated)
	if next := api.NextStep(a); next != "" {
		fmt.Fprintf(&b, "next: %s\n", next)
	}
	return strings.TrimRight(b.String(), "\n")
}

func decisionWord(d api.Decision) string {
	switch d {
	case api.DecisionApprove:
		return "granted"
	case api.DecisionDeny:
		return "denied"
	}
	return string(d)
}

// stream writes one output stream's part of a summary.
func stream(b *strings.Builder, name, text, encoding string, produced int64, truncated bool) {
	if text == "" && produced == 0 {
		return
	}
	if text == "" {
		fmt.Fprintf(b, "%s: %d bytes, none returned (the account's output policy)\n", name, produced)
		return
	}
	if encoding == api.EncodingBase64 {
		fmt.Fprintf(b, "%s: %d bytes of binary output (base64 in the structured result)\n", name, produced)
		return
	}
	head, cut := firstLines(text, summaryLines, summaryBytes)
	fmt.Fprintf(b, "%s:\n%s", name, head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteString("\n")
	}
	if cut {
		fmt.Fprintf(b, "[%s: showing the first %d of %d bytes returned; the structured result holds them all]\n", name, len(head), len(text))
	}
	if truncated {
		fmt.Fprintf(b, "[%s truncated: the command wrote %d bytes, %d were returned (output policy or size cap)]\n", name, produced, len(text))
	}
}

// firstLines returns the first n lines of s, at most max bytes and cut on
// a character boundary, and whether anything was left out.
func firstLines(s string, n, max int) (string, bool) {
	end := 0
	for i := 0; i < n && end < len(s); i++ {
		j := strings.IndexByte(s[end:], '\n')
		if j < 0 {
			end = len(s)
			break
		}
		end += j + 1
	}
	if end > max {
		end = max
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	return s[:end], end < len(s)
}

// targetsSummary is the text of list_targets: one line per account.
func targetsSummary(ts []api.Target) string {
	if len(ts) == 0 {
		return "no targets are configured; an operator must add one to the gateway's configuration"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d targets (use the name with ssh_exec):\n", len(ts))
	for _, t := range ts {
		for _, a := range t.Accounts {
			def := ""
			if a.Name == t.DefaultAccount {
				def = ", default account"
			}
			fmt.Fprintf(&b, "- %s account %s%s: approval per %s, timeout up to %ds, output %s\n", t.Name, a.Name, def, a.Approval, a.MaxTimeoutS, a.Output)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
