package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
)

func init() {
	commands["agent"] = (&group{name: "agent", usage: agentUsage, verbs: map[string]verbFunc{
		"add":    agentAdd,
		"list":   agentList,
		"revoke": agentRevoke,
	}}).command("issue, list and revoke the tokens remote agents create runs with (operator)")
}

const agentUsage = `usage: airlock agent VERB [flags] [args]

A remote agent (over HTTP, or MCP over HTTP) proves who it is with an agent
token when it creates a run (POST /v1/runs, Authorization: Bearer
airlock_agent_…). Its runs' requester is agent:NAME/ID, and it may act only
within its limits. The verbs talk to the running gateway over its local
socket, as the gateway's own user; each is recorded in the audit log.

verbs:
  add [--limit TARGET|ACCOUNT@TARGET]... [--ttl DUR] NAME
      issue a token for agent NAME and print it once (only its hash is
      kept); --limit (repeatable) restricts its runs to those targets or
      accounts; --ttl makes it expire (e.g. 720h; default: until revoked)
  list [--json]
      the tokens issued: id, name, limits, expiry, revoked
  revoke ID|NAME
      revoke one token, or every token of an agent; its runs create no
      new runs (end them with airlock runs end)

Each verb takes --config FILE (default $AIRLOCK_CONFIG, else ./airlock.hcl)
to find the socket; $AIRLOCK_SOCKET overrides it.
`

// limitFlag collects repeated --limit values.
type limitFlag []string

func (l *limitFlag) String() string     { return strings.Join(*l, ",") }
func (l *limitFlag) Set(v string) error { *l = append(*l, v); return nil }

// operatorClient is a client over the local socket of the configuration.
func operatorClient(cfgPath string) (*api.Client, error) {
	socket, err := localSocket(cfgPath)
	if err != nil {
		return nil, err
	}
	return localClient(socket)
}

func agentAdd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock agent add", "airlock agent add [--limit TARGET|ACCOUNT@TARGET]... [--ttl DUR] NAME", stderr)
	cfgPath := configFlag(fs)
	var limits limitFlag
	fs.Var(&limits, "limit", "a `target` (or account@target) the agent's runs may act on; repeat for more")
	ttl := fs.Duration("ttl", 0, "how long the token works (e.g. 720h); default: until revoked")
	name, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if name == "" {
		return failf(stderr, "give the agent's name: airlock agent add NAME")
	}
	if *ttl < 0 {
		return failf(stderr, "--ttl must be positive")
	}
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	var a api.Agent
	req := api.AgentRequest{Name: name, Limits: limits, TTLS: int64(ttl.Round(time.Second) / time.Second)}
	if err := c.Do(context.Background(), http.MethodPost, "/v1/agents", req, &a); err != nil {
		return failf(stderr, "%v", err)
	}
	fmt.Fprintf(stderr, "agent token %s issued for %s (runs are named %s); it is shown once, keep it in the agent's secret store:\n", a.ID, a.Name, a.Subject)
	fmt.Fprintln(stdout, a.Token)
	return 0
}

func agentList(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock agent list", "airlock agent list [--json]", stderr)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	var list []api.Agent
	if err := c.Do(context.Background(), http.MethodGet, "/v1/agents", nil, &list); err != nil {
		return failf(stderr, "%v", err)
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no agent tokens; issue one with airlock agent add NAME")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tLIMITS\tEXPIRES\tSTATE")
	for _, a := range list {
		expires, state := "never", "usable"
		if a.ExpiresAt != nil {
			expires = a.ExpiresAt.Local().Format(timeWithZone)
			if time.Now().After(*a.ExpiresAt) {
				state = "expired"
			}
		}
		if a.RevokedAt != nil {
			state = "revoked by " + visible(a.RevokedBy)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, visible(a.Name), cmp.Or(strings.Join(a.Limits, ", "), "any target"), expires, state)
	}
	tw.Flush()
	return 0
}

func agentRevoke(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock agent revoke", "airlock agent revoke ID|NAME", stderr)
	cfgPath := configFlag(fs)
	id, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if id == "" {
		return failf(stderr, "which token? pass its ID or the agent's NAME (see airlock agent list)")
	}
	c, err := operatorClient(*cfgPath)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	var done []api.Agent
	if err := c.Do(context.Background(), http.MethodDelete, "/v1/agents/"+url.PathEscape(id), nil, &done); err != nil {
		return failf(stderr, "%v", err)
	}
	for _, a := range done {
		fmt.Fprintf(stdout, "revoked %s (%s)\n", a.ID, visible(a.Name))
	}
	return 0
}
