package mcp

import (
	"fmt"
	"strings"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
)

// Summary is the text of an action's tool result: the outcome and exit
// code, its output as sized for the result (head and end, with a note of
// what is left out and how to read it), a page when one was read, and the
// next step airlock-ssh prints.
func Summary(r *ActionResult) string {
	a := &r.Action
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
	if !a.Outcome.Valid() {
		inFlight(&b, r)
	}
	if a.Approval.DecidedBy != "" {
		fmt.Fprintf(&b, "%s approval %s by %s", a.Approval.Mode, decisionWord(a.Approval.Decision), a.Approval.DecidedBy)
		if a.Approval.Reason != "" {
			fmt.Fprintf(&b, " (%q)", a.Approval.Reason)
		}
		b.WriteString("\n")
	}
	stream(&b, a.ID, streamView{"stdout", a.Stdout, a.StdoutEncoding, r.StdoutTail, r.StdoutTailEncoding, r.StdoutOmittedBytes, a.StdoutBytes, a.StdoutTruncated, a.OutputPolicy})
	stream(&b, a.ID, streamView{"stderr", a.Stderr, a.StderrEncoding, r.StderrTail, r.StderrTailEncoding, r.StderrOmittedBytes, a.StderrBytes, a.StderrTruncated, a.OutputPolicy})
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

// streamView is one stream of a sized result.
type streamView struct {
	name              string
	text, enc         string
	tail, tailEnc     string
	omitted, produced int64
	truncated         bool
	policy            string
}

// stream writes one output stream's part of a summary.
func stream(b *strings.Builder, id string, v streamView) {
	switch {
	case v.text == "" && v.tail == "" && v.produced == 0:
		return
	case v.text == "" && v.tail == "":
		fmt.Fprintf(b, "%s: %d bytes, none returned (the account's output policy)\n", v.name, v.produced)
		return
	case v.enc == api.EncodingBase64 || v.tailEnc == api.EncodingBase64:
		fmt.Fprintf(b, "%s: %d bytes of binary output (base64 in the structured result)\n", v.name, v.produced)
		return
	}
	line := func(s string) {
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(b, "%s:\n", v.name)
	switch {
	case v.omitted > 0 && v.tail != "":
		line(v.text)
		fmt.Fprintf(b, "[… %d bytes of %s omitted here (%d in all); get_action with action_id %q, stream %q and offset %d pages through them …]\n",
			v.omitted, v.name, v.produced, id, v.name, int64(len(v.text)))
		line(v.tail)
	case v.omitted > 0 && v.policy == "tail":
		fmt.Fprintf(b, "[the first %d of %d bytes of %s are not shown; the account's output policy (%s) returns the end]\n", v.omitted, v.produced, v.name, v.policy)
		line(v.text)
	case v.omitted > 0:
		line(v.text)
		fmt.Fprintf(b, "[… the last %d of %d bytes of %s are not shown; get_action with action_id %q, stream %q and offset %d pages through them]\n",
			v.omitted, v.produced, v.name, id, v.name, int64(len(v.text)))
	default:
		line(v.text)
		if v.truncated {
			fmt.Fprintf(b, "[%s truncated: the command wrote %d bytes, %d were returned (output policy or size cap)]\n", v.name, v.produced, len(v.text))
		}
	}
}

// page writes a page of stored output.
func page(b *strings.Builder, p *api.OutputPage) {
	fmt.Fprintf(b, "%s bytes %d to %d of %d:\n", p.Stream, p.Offset, p.Offset+p.Bytes, p.Total)
	if p.Encoding == api.EncodingBase64 {
		b.WriteString("(binary: base64 in the structured result's page)\n")
	} else if p.Data != "" {
		b.WriteString(p.Data)
		if !strings.HasSuffix(p.Data, "\n") {
			b.WriteString("\n")
		}
	}
	switch {
	case p.NextOffset != nil && p.Skipped > 0:
		fmt.Fprintf(b, "[%d bytes after this are not stored; the next page starts at offset %d]\n", p.Skipped, *p.NextOffset)
	case p.NextOffset != nil:
		fmt.Fprintf(b, "[the next page starts at offset %d]\n", *p.NextOffset)
	default:
		fmt.Fprintf(b, "[end of %s]\n", p.Stream)
	}
}

// inFlight writes what an action in flight waits for and how to follow
// it.
func inFlight(b *strings.Builder, r *ActionResult) {
	a := &r.Action
	if a.State == api.StateWaitingApproval {
		fmt.Fprintf(b, "waiting for a human reviewer (approval %s)", a.Approval.ID)
		if a.Approval.Why != "" {
			fmt.Fprintf(b, " because: %s", a.Approval.Why)
		}
		b.WriteString("\n")
	}
	if f := r.Follow; f != nil {
		fmt.Fprintf(b, "the action goes on without this call; follow it with %s, action_id %q and wait_s %d\n", f.Tool, f.ActionID, f.WaitS)
	}
}

// targetsSummary is the text of list_targets: one line per account, with
// its policy.
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
			fmt.Fprintf(&b, "- %s account %s%s: approval per %s", t.Name, a.Name, def, a.Approval)
			for _, l := range []struct {
				what    string
				classes []string
			}{{"asks a call approval for", a.Escalate}, {"refuses", a.Refuse}, {"runs unreviewed", a.AllowUnreviewed}} {
				if len(l.classes) > 0 {
					fmt.Fprintf(&b, "; %s %s", l.what, strings.Join(l.classes, ", "))
				}
			}
			if a.DenyPatterns > 0 {
				fmt.Fprintf(&b, "; %d deny patterns", a.DenyPatterns)
			}
			if len(a.Secrets) > 0 {
				fmt.Fprintf(&b, "; secrets %s (each use asks a reviewer)", strings.Join(a.Secrets, ", "))
			}
			fmt.Fprintf(&b, "; reviewer decides within %ds; timeout up to %ds; transfers %s; output %s\n",
				a.ApprovalTimeoutS, a.MaxTimeoutS, transferText(a.MaxTransferBytes), a.Output)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// transferText is an account's max_transfer in words.
func transferText(n int64) string {
	switch {
	case n <= 0:
		return "refused"
	case n%(1<<20) == 0:
		return fmt.Sprintf("up to %d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("up to %d KiB", n>>10)
	}
	return fmt.Sprintf("up to %d bytes", n)
}
