package main

import (
	"context"
	"fmt"
	"io"
)

func init() {
	commands["actions"] = (&group{name: "actions", usage: actionsUsage, verbs: map[string]verbFunc{
		"cancel": actionsCancel,
	}}).command("stop one action (reviewer)")
}

const actionsUsage = `usage: airlock actions VERB [flags] [args]

verbs:
  cancel [--reason TEXT] ID
      stop one action, whatever it is doing: waiting for a reviewer or a
      connection slot, or running (its command is sent KILL and its end
      confirmed). The outcome is cancelled; the agent is told who stopped
      it and why, and the audit log records both. To stop every action of
      an agent, end its run (airlock runs end).

` + reviewerConnection + `run "airlock actions VERB --help" for a verb's flags
`

func actionsCancel(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock actions cancel", "airlock actions cancel [flags] ID", stderr)
	rf := addReviewerFlags(fs, true)
	reason := fs.String("reason", "", "why the action is stopped (`TEXT`): recorded, and told to the agent")
	id, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if id == "" {
		return failf(stderr, "which action? pass its ID (act_…: on the action's page, or in airlock audit export)")
	}
	ctx := context.Background()
	c, err := rf.login(ctx, stderr)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	a, err := c.CancelAction(ctx, id, *reason)
	if err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	if *rf.json {
		return printJSON(stdout, a)
	}
	fmt.Fprintf(stdout, "%s: %s: %s\n", a.ID, a.Outcome, printable(a.Detail))
	return 0
}
