package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
)

func init() {
	commands["approvals"] = (&group{name: "approvals", usage: approvalsUsage, verbs: map[string]verbFunc{
		"list":    approvalsList,
		"show":    approvalsShow,
		"approve": bind(approvalsDecide, "approve"),
		"deny":    bind(approvalsDecide, "deny"),
	}}).command("list, approve and deny approval requests (reviewer)")
	commands["runs"] = (&group{name: "runs", usage: runsUsage, verbs: map[string]verbFunc{
		"list": runsList,
		"end":  runsEnd,
	}}).command("list and end runs (reviewer)")
}

const approvalsUsage = `usage: airlock approvals VERB [flags] [args]

verbs:
  list [--json]
      the pending approval requests
  show [--json] [--reveal] ID
      one pending request in full: the command, its input, the agent's
      reason, and who asks — the anchor process, what it covers now, and
      any weak evidence about it; --reveal also shows the original of a
      command stored redacted (recorded as command.revealed)
  approve [--ttl DUR] [--max-actions N] [--scope TARGET[/ACCOUNT],…] [--grant DUR] [--reason TEXT] ID
      approve a request. For a run, --ttl, --max-actions and --scope bound
      the approval (without --scope it covers every run-mode account). A
      call is approved once and takes none of them; --grant DUR also lets
      the exact same action repeat without asking for that long, up to its
      account's max_grant
  deny [--reason TEXT] ID
      deny a request; the agent is told the reason

` + reviewerConnection + `run "airlock approvals VERB --help" for a verb's flags
`

const runsUsage = `usage: airlock runs VERB [flags] [args]

verbs:
  list [--json] [--all]
      the runs: state, requester, actions, expiry and anchor process;
      --all adds the runs that ended lately, and why (as the runs page)
  end [--reason TEXT] ID
      end (revoke) a run; its next action is refused

` + reviewerConnection + `run "airlock runs VERB --help" for a verb's flags
`

// reviewerConnection is how the reviewer verbs find and sign in to the
// gateway.
const reviewerConnection = `Every verb signs in to the gateway's HTTP API as a reviewer:
  --url URL        the gateway; default: $AIRLOCK_URL, else the listen.http
                   of the configuration named by --config FILE or
                   $AIRLOCK_CONFIG, else http://` + config.DefaultHTTPAddr + `
  --reviewer NAME  default: $AIRLOCK_REVIEWER
The password is read from the terminal, or from $AIRLOCK_PASSWORD_FILE.
`

// reviewerFlags are the reviewer CLI's connection flags.
type reviewerFlags struct {
	url, name, config *string
	json              *bool

	// gateway is the URL login resolved, and from where it came.
	gateway, from string
}

func addReviewerFlags(fs *flag.FlagSet, withJSON bool) *reviewerFlags {
	rf := &reviewerFlags{
		url:    fs.String("url", "", "the gateway's HTTP `URL` (default: $AIRLOCK_URL, else the listen.http of --config, else http://"+config.DefaultHTTPAddr+")"),
		name:   fs.String("reviewer", "", "reviewer `NAME` (default: $AIRLOCK_REVIEWER)"),
		config: fs.String("config", "", "the gateway's configuration `FILE`, to find its HTTP listener when there is no --url or $AIRLOCK_URL (default: $AIRLOCK_CONFIG)"),
	}
	if withJSON {
		rf.json = fs.Bool("json", false, "print machine-readable JSON")
	}
	return rf
}

// resolveURL finds the gateway: --url, else $AIRLOCK_URL, else the HTTP
// listener of the configuration named by --config or $AIRLOCK_CONFIG, else
// the gateway's default listener. It returns the URL and where it came from.
func (rf *reviewerFlags) resolveURL() (string, string, error) {
	if *rf.url != "" {
		return *rf.url, "--url", nil
	}
	if u := os.Getenv("AIRLOCK_URL"); u != "" {
		return u, "$AIRLOCK_URL", nil
	}
	path := *rf.config
	if path == "" {
		path = os.Getenv("AIRLOCK_CONFIG")
	}
	if path == "" {
		return "http://" + config.DefaultHTTPAddr, "the default", nil
	}
	// Only the listen block matters here: accept targets not pinned yet.
	cfg, err := config.LoadAdmin(path)
	if err != nil {
		return "", "", fmt.Errorf("finding the gateway's HTTP listener: %w", explainConfig(err, *rf.config))
	}
	u, err := listenerURL(cfg)
	if err != nil {
		return "", "", err
	}
	return u, "the listen.http of " + cfg.Path, nil
}

// listenerURL is where a client on this machine reaches the HTTP listener
// of the gateway cfg configures.
func listenerURL(cfg *config.Config) (string, error) {
	if cfg.Listen.HTTP == "" {
		return "", fmt.Errorf("the gateway in %s has no HTTP listener; reviewers use its HTTP API: add listen { http = ... } or pass --url", cfg.Path)
	}
	host, port, err := net.SplitHostPort(cfg.Listen.HTTP)
	if err != nil {
		return "", fmt.Errorf("listen.http %q in %s: %w", cfg.Listen.HTTP, cfg.Path, err)
	}
	if port == "0" {
		return "", fmt.Errorf("the gateway in %s listens on a port chosen when it starts (listen.http = %q): pass --url", cfg.Path, cfg.Listen.HTTP)
	}
	// A wildcard listener is reached on loopback.
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http"
	if cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// login finds the gateway, signs the reviewer in and returns a client
// using its token.
//
// With no reviewer name (--reviewer, $AIRLOCK_REVIEWER) it uses the
// session airlock login saved for that gateway.
func (rf *reviewerFlags) login(ctx context.Context, stderr io.Writer) (*api.Client, error) {
	var err error
	if rf.gateway, rf.from, err = rf.resolveURL(); err != nil {
		return nil, err
	}
	if *rf.name == "" && os.Getenv("AIRLOCK_REVIEWER") == "" {
		s, ok := savedSession(trimURL(rf.gateway))
		if !ok {
			return nil, errors.New("no reviewer: log in once with airlock login, or pass --reviewer NAME (or set $AIRLOCK_REVIEWER)")
		}
		return api.NewHTTPClient(rf.gateway, s.Token), nil
	}
	l, err := rf.passwordLogin(ctx, stderr)
	if err != nil {
		return nil, err
	}
	return api.NewHTTPClient(rf.gateway, l.Token), nil
}

// explain turns an error of a request to the gateway into what the
// reviewer needs: the gateway's message, or which gateway did not answer.
func (rf *reviewerFlags) explain(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("%s", ae.Err.Message)
	}
	return fmt.Errorf("cannot reach the gateway at %s (from %s; is `airlock serve` running, and is that its address?): %w", rf.gateway, rf.from, err)
}

// readPassword reads a password from $AIRLOCK_PASSWORD_FILE or the
// terminal, never from arguments. confirm asks twice.
func readPassword(stderr io.Writer, prompt string, confirm bool) (string, error) {
	if f := os.Getenv("AIRLOCK_PASSWORD_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("$AIRLOCK_PASSWORD_FILE: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", errors.New("no terminal to read the password from: set $AIRLOCK_PASSWORD_FILE to a file holding it")
	}
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	noEcho.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return "", err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	r := bufio.NewReader(os.Stdin)
	read := func(p string) (string, error) {
		fmt.Fprint(stderr, p)
		line, err := r.ReadString('\n')
		fmt.Fprintln(stderr)
		return strings.TrimRight(line, "\r\n"), err
	}
	pass, err := read(prompt)
	if err != nil {
		return "", err
	}
	if confirm {
		again, err := read("again: ")
		if err != nil {
			return "", err
		}
		if again != pass {
			return "", errors.New("the passwords differ")
		}
	}
	return pass, nil
}

// printable shows attacker-controlled text on a terminal without letting
// it act: control characters, bidi overrides and other invisible runes are
// escaped.
func printable(s string) string {
	q := strconv.QuoteToASCII(s)
	q = q[1 : len(q)-1]
	if q == s {
		return s
	}
	return q
}

func approvalsList(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock approvals list", "airlock approvals list [flags]", stderr)
	rf := addReviewerFlags(fs, true)
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	ctx := context.Background()
	c, err := rf.login(ctx, stderr)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	list, err := c.Approvals(ctx, "pending")
	if err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	if *rf.json {
		type item struct {
			ID          string    `json:"id"`
			Kind        string    `json:"kind"`
			RunID       string    `json:"run_id"`
			Target      string    `json:"target"`
			Account     string    `json:"account"`
			Command     string    `json:"command"`
			RequestedAt time.Time `json:"requested_at"`
			ExpiresAt   time.Time `json:"expires_at"`
			Requester   string    `json:"requester"`
			StdinBytes  int64     `json:"stdin_bytes,omitempty"`
			StdinSHA256 string    `json:"stdin_sha256,omitempty"`
			StdinText   string    `json:"stdin_text,omitempty"`
			AgentReason string    `json:"agent_reason,omitempty"`
			Secret      string    `json:"secret,omitempty"`
			Digest      string    `json:"digest"`
			Renews      string    `json:"renews,omitempty"`
		}
		out := make([]item, 0, len(list))
		for _, a := range list {
			out = append(out, item{a.ID, string(a.Kind), a.RunID, a.Target, a.Account, a.Command, a.RequestedAt, a.ExpiresAt, a.Requester,
				a.StdinBytes, a.StdinSHA256, a.StdinText, a.AgentReason, a.Secret, a.Digest, a.Renews})
		}
		return printJSON(stdout, out)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no pending approvals")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tTARGET\tACCOUNT\tREQUESTER\tANCHOR\tTIMEOUT\tEXPIRES IN\tCOMMAND")
	for _, a := range list {
		cmd := visible(a.Command)
		if a.StdinBytes > 0 {
			cmd += fmt.Sprintf(" <stdin: %d bytes, sha256 %s>", a.StdinBytes, a.StdinSHA256)
		}
		if a.Secret != "" {
			cmd += " <stdin: secret " + visible(a.Secret) + ">"
		}
		anchor := "-"
		if a.Run != nil && a.Run.Anchor != nil {
			anchor = "unknown executable"
			if a.Run.Anchor.Executable != "" {
				anchor = shorten(visible(a.Run.Anchor.Executable), maxArgvWidth)
			}
			if len(a.Run.Anchor.Warnings) > 0 {
				anchor += " (!)"
			}
		}
		timeout := "-"
		if a.TimeoutS > 0 {
			timeout = (time.Duration(a.TimeoutS) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Kind, visible(a.Target), visible(a.Account),
			visible(a.Requester), anchor, timeout, time.Until(a.ExpiresAt).Round(time.Second), cmd)
	}
	tw.Flush()
	for _, a := range list {
		if a.Renews != "" {
			fmt.Fprintf(stdout, "%s renews run %s: its approval ran out, and the same agent asks to go on\n", a.ID, a.Renews)
		}
		if a.StdinText != "" {
			fmt.Fprintf(stdout, "%s standard input (%d bytes):\n%s\n", a.ID, a.StdinBytes, visible(a.StdinText))
		}
		if a.AgentReason != "" {
			fmt.Fprintf(stdout, "%s: the agent says (its own claim): %s\n", a.ID, visible(a.AgentReason))
		}
	}
	return 0
}

// approvalsShow prints one pending request with everything a reviewer
// judges it by.
// approvalArg parses a verb's flags and its one argument, an approval's
// id, and logs the reviewer in.
func (rf *reviewerFlags) approvalArg(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (string, *api.Client, int, bool) {
	id, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return "", nil, code, false
	}
	if id == "" {
		return "", nil, failf(stderr, "which approval? pass its ID (see airlock approvals list)"), false
	}
	c, err := rf.login(ctx, stderr)
	if err != nil {
		return "", nil, failf(stderr, "%v", err), false
	}
	return id, c, 0, true
}

func approvalsShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock approvals show", "airlock approvals show [flags] ID", stderr)
	rf := addReviewerFlags(fs, true)
	reveal := fs.Bool("reveal", false, "also show the original of a command stored redacted (recorded in the audit log as command.revealed)")
	ctx := context.Background()
	id, c, code, ok := rf.approvalArg(ctx, fs, args, stdout, stderr)
	if !ok {
		return code
	}
	list, err := c.Approvals(ctx, "pending")
	if err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	i := slices.IndexFunc(list, func(a api.Approval) bool { return a.ID == id })
	if i < 0 {
		return failf(stderr, "no pending approval %s (it may have been decided, withdrawn or expired; see airlock approvals list)", printable(id))
	}
	a := list[i]
	original := ""
	if *reveal && len(a.Redactions) > 0 {
		rc, err := c.RevealCommand(ctx, a.ID)
		if err != nil {
			return failf(stderr, "%v", rf.explain(err))
		}
		original = rc.Command
	}
	if *rf.json {
		if original != "" {
			return printJSON(stdout, struct {
				api.Approval
				Original string `json:"original_command"`
			}{a, original})
		}
		return printJSON(stdout, a)
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	line("approval", a.ID+" ("+string(a.Kind)+")")
	line("target", visible(a.Target)+" as "+visible(a.Account))
	line("command", visible(a.Command))
	if len(a.Redactions) > 0 {
		var rules []string
		for _, r := range a.Redactions {
			rules = append(rules, r.Rule)
		}
		line("", "redacted: what looked like credentials ("+strings.Join(rules, ", ")+") is replaced; approving binds the original")
		if original != "" {
			line("original", visible(original)+" (your reading is recorded)")
		} else {
			line("", "--reveal shows the original (recorded in the audit log)")
		}
	}
	line("timeout", fmt.Sprintf("%ds", a.TimeoutS))
	if a.StdinBytes > 0 {
		what := "standard input"
		if a.Transfer != nil && a.Transfer.Direction == "put" {
			what = "file to write"
		}
		line(what, fmt.Sprintf("%d bytes, sha256 %s", a.StdinBytes, a.StdinSHA256))
		if a.StdinText != "" {
			line("", visible(a.StdinText))
		}
	}
	if a.Class != "" {
		line("class", a.Class+": "+visible(a.ClassReason))
	}
	if a.Escalation != "" {
		line("escalated", "no run approval covers it: "+visible(a.Escalation))
	}
	if a.MaxGrantS > 0 {
		line("grant", fmt.Sprintf("approve --grant DURATION (at most %s) lets this exact action repeat in this run without asking", time.Duration(a.MaxGrantS)*time.Second))
	}
	if g := a.GrantUntil; g != nil {
		line("grant", "this exact action may repeat in this run until "+g.UTC().Format(time.RFC3339))
	}
	if a.Secret != "" {
		line("standard input", "secret "+visible(a.Secret)+" (held by the gateway; its value is never shown)")
	}
	if a.AgentReason != "" {
		line("the agent says", visible(a.AgentReason)+" (its own claim)")
	}
	line("digest", a.Digest)
	line("requester", visible(a.Requester))
	line("expires in", time.Until(a.ExpiresAt).Round(time.Second).String())
	if r := a.Run; r != nil {
		line("run", fmt.Sprintf("%s (%s, %s, %d actions so far)", r.ID, r.State, r.Kind, r.Actions))
		if a.Renews != "" {
			line("renews", "run "+a.Renews+": its approval ran out, and the same agent asks to go on")
		}
		if p := r.Anchor; p != nil {
			line("anchor", fmt.Sprintf("pid %d, start time %d, uid %d (%s)", p.PID, p.StartTime, p.UID, visible(p.User)))
			line("executable", cmp.Or(visible(p.Executable), "unknown")+"  sha256 "+cmp.Or(p.SHA256, "unknown"))
			line("arguments", visible(strings.Join(p.Argv, " ")))
			line("directory", cmp.Or(visible(p.Cwd), "unknown"))
			if p.Covers > 0 {
				line("covers", fmt.Sprintf("%d process(es) now: itself and everything under it", p.Covers))
			}
			for _, pp := range p.Parents {
				line("parent", fmt.Sprintf("pid %d %s (uid %d)", pp.PID, visible(strings.Join(pp.Argv, " ")), pp.UID))
			}
		}
	}
	w.Flush()
	if r := a.Run; r != nil && r.Anchor != nil {
		for _, warn := range r.Anchor.Warnings {
			fmt.Fprintf(stdout, "WARNING: weak evidence about the anchor: %s\n", approvals.WarningText(warn))
		}
	}
	return 0
}

// approvalsDecide runs "approvals approve" and "approvals deny".
func approvalsDecide(verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock approvals "+verb, "airlock approvals "+verb+" [flags] ID", stderr)
	rf := addReviewerFlags(fs, false)
	var d api.DecisionRequest
	var ttl, grant time.Duration
	if verb == "approve" {
		fs.DurationVar(&grant, "grant", 0, "call approvals: also let this exact action (same run, command, timeout and input) repeat without asking for this long, up to the account's max_grant (default: once)")
		fs.DurationVar(&ttl, "ttl", 0, "run approvals: how long the approval lasts (default: the policy's run_ttl)")
		fs.IntVar(&d.MaxActions, "max-actions", 0, "run approvals: at most this many actions (default: no limit)")
		fs.Func("scope", "run approvals: only these `TARGET[/ACCOUNT],…` (default: every run-mode account of every target)", func(v string) error {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					d.Scope = append(d.Scope, s)
				}
			}
			return nil
		})
		fs.StringVar(&d.Reason, "reason", "", "a note recorded with the decision")
	} else {
		fs.StringVar(&d.Reason, "reason", "", "the reason the agent is told")
	}
	ctx := context.Background()
	id, c, code, ok := rf.approvalArg(ctx, fs, args, stdout, stderr)
	if !ok {
		return code
	}
	d.Decision = api.Decision(verb)
	if ttl > 0 {
		d.TTLS = int(ttl.Seconds())
	}
	if grant < 0 || grant%time.Second != 0 {
		return failf(stderr, "--grant %s: give a positive whole number of seconds, such as 15m", grant)
	}
	d.GrantS = int(grant / time.Second)
	a, err := c.Decide(ctx, id, d)
	if err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	fmt.Fprintf(stdout, "%s: %s (%s on %s/%s: %s)\n", a.ID, a.State, a.Kind, printable(a.Target), printable(a.Account), printable(a.Command))
	return 0
}

func runsList(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock runs list", "airlock runs list [flags]", stderr)
	rf := addReviewerFlags(fs, true)
	all := fs.Bool("all", false, "also the runs that ended lately (ended, denied, expired), as the runs page shows them")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	ctx := context.Background()
	c, err := rf.login(ctx, stderr)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	path := "/v1/runs"
	if *all {
		path += "?all=1"
	}
	var runs []api.Run
	if err := c.Do(ctx, http.MethodGet, path, nil, &runs); err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	if *rf.json {
		return printJSON(stdout, runs)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tKIND\tREQUESTER\tACTIONS\tEXPIRES\tANCHOR\tENDED")
	for _, r := range runs {
		exp, anchor, ended := "-", "-", "-"
		if r.ExpiresAt != nil {
			exp = r.ExpiresAt.Local().Format(timeWithZone)
		}
		if r.Anchor != nil {
			anchor = fmt.Sprintf("pid %d %s", r.Anchor.PID, shorten(strings.Join(r.Anchor.Argv, " "), maxArgvWidth))
		}
		if r.EndReason != "" {
			ended = api.EndReasonText(r.EndReason, r.Actions)
			if r.EndedBy != "" {
				ended += " by " + printable(r.EndedBy)
			}
			if r.EndNote != "" {
				ended += ": " + shorten(printable(r.EndNote), maxArgvWidth)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.State, r.Kind, printable(r.Requester), r.Actions, exp, anchor, ended)
	}
	tw.Flush()
	return 0
}

// maxArgvWidth is how much of an anchor's command line runs list shows,
// so that a run stays on one line of the table; --json has all of it.
const maxArgvWidth = 60

// shorten is s made printable and cut to at most n characters, an
// ellipsis marking the cut.
func shorten(s string, n int) string {
	s = printable(s) // ASCII only: bytes are characters
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func runsEnd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock runs end", "airlock runs end [flags] ID", stderr)
	rf := addReviewerFlags(fs, false)
	reason := fs.String("reason", "", "why the run is ended, recorded with it")
	id, code, ok := parseVerb(fs, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	if id == "" {
		return failf(stderr, "which run? pass its ID (see airlock runs list)")
	}
	ctx := context.Background()
	c, err := rf.login(ctx, stderr)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	path := "/v1/runs/" + url.PathEscape(id)
	if *reason != "" {
		path += "?reason=" + url.QueryEscape(*reason)
	}
	var r api.Run
	if err := c.Do(ctx, "DELETE", path, nil, &r); err != nil {
		return failf(stderr, "%v", rf.explain(err))
	}
	fmt.Fprintf(stdout, "%s: %s\n", r.ID, r.State)
	return 0
}

func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return 1
	}
	return 0
}

func failf(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "airlock: "+format+"\n", args...)
	return 1
}

// timeWithZone is how the reviewer and operator verbs print times: with
// their zone, so that a time read by someone elsewhere is not misread.
const timeWithZone = "2006-01-02 15:04:05 MST"
