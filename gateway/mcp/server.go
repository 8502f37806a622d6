package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
)

// Backend is what the tools need of a gateway, declared here so that the
// stdio bridge can hand in an *api.Client for the local socket and the
// gateway an adapter bound to one run token.
type Backend interface {
	// RunAction requests one action and reports its events until it
	// finishes; cancelling ctx cancels the action.
	RunAction(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error)
	// Targets lists the configured targets, as GET /v1/targets.
	Targets(ctx context.Context) ([]api.Target, error)
	// Action returns an action of the caller's run, as GET /v1/actions/{id}.
	Action(ctx context.Context, id string) (*api.Action, error)
	// StartAction requests one action that goes on when ctx ends (POST
	// /v1/actions?wait=false) and returns its id.
	StartAction(ctx context.Context, req api.ActionRequest) (string, error)
	// WaitAction follows an action of the caller's run until it finishes
	// or ctx ends, and returns it as it is then; ctx's end does not
	// cancel it.
	WaitAction(ctx context.Context, id string, ev api.Events) (*api.Action, error)
	// Output reads a page of an action's stored output, as GET
	// /v1/actions/{id}/output.
	Output(ctx context.Context, id, stream string, offset, limit int64) (*api.OutputPage, error)
}

var _ Backend = (*api.Client)(nil)

// Options configure a server. The zero value is usable.
type Options struct {
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives the server's own log; nil discards. It must never
	// write to the stdio transport's stdout.
	Logger hclog.Logger
	// ProgressInterval is how often a call waiting for a reviewer repeats
	// its progress notification. Zero: 5 s.
	ProgressInterval time.Duration
	// OutputBudget is how many bytes of each output stream a result
	// carries (head and end); zero: DefaultOutputBudget.
	OutputBudget int
	// ApprovalTimeout is the gateway's approval.timeout, which the tool
	// descriptions state; zero: they name the setting instead.
	ApprovalTimeout time.Duration
	// FileRoot is the agent's transfer directory, where ssh_put reads
	// and ssh_get writes files; the file tools are served only with it
	// and a Backend that is also Files (the stdio bridge). "": none.
	FileRoot string
	// MaxWait is how long ssh_exec, ssh_put and ssh_get hold a call that
	// gave no wait_s before they answer with the action in flight
	// (mcp.max_wait); zero: DefaultMaxWait.
	MaxWait time.Duration
}

// The tool names of the contract.
const (
	ToolExec        = "ssh_exec"
	ToolListTargets = "list_targets"
	ToolGetAction   = "get_action"
)

// ExecInput is the input of ssh_exec.
type ExecInput struct {
	Target   string `json:"target" jsonschema:"name of a configured target, as list_targets shows it; never an address or host name"`
	Command  string `json:"command" jsonschema:"one shell command line run by the account's login shell on the target, as ssh would run it"`
	Stdin    string `json:"stdin,omitempty" jsonschema:"text sent to the command's standard input, then its end (as a heredoc or a pipe would); omitted: none. The reviewer sees it; the account's max_stdin bounds it (1 MiB by default)"`
	Reason   string `json:"reason,omitempty" jsonschema:"what this command is for, in a sentence (at most 500 characters): shown to the reviewer as your own claim"`
	Secret   string `json:"secret,omitempty" jsonschema:"name of a secret the gateway holds (list_targets shows which an account may have): the gateway writes its value to the command's standard input, and you never see it; occurrences in the output come back as [secret NAME]. An action with a secret always waits for a human reviewer to approve it on its own, also when the session's run is approved. Cannot be combined with stdin"`
	Account  string `json:"account,omitempty" jsonschema:"remote account on the target; omit it for the target's default account"`
	TimeoutS int    `json:"timeout_s,omitempty" jsonschema:"seconds the command may run once connected (default 60, capped by the account's max_timeout_s); time waiting for a reviewer does not count"`
	WaitS    int    `json:"wait_s,omitempty" jsonschema:"return after this many seconds even if the action has not finished; it goes on, and cancelling the call then does not cancel it. Omitted: the gateway's max_wait (50 s unless configured), and a cancel before the answer cancels the action"`
}

// GetActionInput is the input of get_action.
type GetActionInput struct {
	ActionID string `json:"action_id" jsonschema:"id of an action (act_…) from an ssh_exec result of this session"`
	WaitS    int    `json:"wait_s,omitempty" jsonschema:"wait up to this many seconds for the action to finish (a long poll); omitted: return it as it is now"`
	Stream   string `json:"stream,omitempty" jsonschema:"return only a page of this stream's stored output (stdout, stderr, or the stdin sent) instead of the action"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset of the page (default 0)"`
	Limit    int64  `json:"limit,omitempty" jsonschema:"most bytes of the page (default and maximum: the output budget)"`
}

// TargetList is the structured result of list_targets: MCP structured
// content is a JSON object, so the list of GET /v1/targets is wrapped.
type TargetList struct {
	Targets []api.Target `json:"targets" jsonschema:"the configured targets, in configuration order"`
}

// approvalWait says how long a call waits for a reviewer.
func approvalWait(d time.Duration) string {
	if d <= 0 {
		return "until the gateway's approval deadline (approval.timeout)"
	}
	if d%time.Minute == 0 {
		return fmt.Sprintf("up to %d min", d/time.Minute)
	}
	return fmt.Sprintf("up to %d s", (d+time.Second-1)/time.Second)
}

func instructions(o Options) string {
	return `airlock runs commands on SSH targets an operator configured, one command per call, over a fresh connection with a pinned host key, approved by a human when the account's policy says so, recorded in a signed audit log.
Call list_targets first: it names the targets and accounts and shows each account's policy (approval mode, escalated and refused classes, secrets, approval timeout). Then call ssh_exec with those names; an address is never accepted.
A call that waits for a reviewer (` + approvalWait(o.ApprovalTimeout) + `) or a long command answers within ` + waitText(o) + ` with state waiting_approval or running and the action id; the action goes on: follow it with get_action and wait_s. If a call is denied, do not retry without asking a human.
Only outcome "exited" with exit_code 0 is success; any other result is an error whose next_step says what to do. Long output comes as its head and its end; get_action with stream, offset and limit pages through the rest.`
}

func execDescription(o Options) string {
	return `Run one shell command on a configured SSH target (a name from list_targets) through the airlock gateway: fresh connection, pinned host key, no PTY or forwarding, recorded in a signed audit log; nothing persists between calls.
Approval: the account's policy decides (list_targets shows it). Mode "call" asks a reviewer for every command; mode "run" asks once for this session, but commands of an escalated class (such as destructive) and any use of a secret are asked on their own even then; refused classes are rejected. A reviewer has ` + approvalWait(o.ApprovalTimeout) + `; the command's timeout starts after approval.
Waiting: the call answers within ` + waitText(o) + ` (or wait_s). An action not finished by then is returned with state waiting_approval (approval.why says why a human is asked) or running, and goes on: follow it with get_action (follow gives its arguments). A cancel before the answer cancels the action; after it, nothing.
Result: the action object; only outcome exited with exit_code 0 is success, any other is an error result whose next_step says what to do. Output is cut to ` + budgetText(o) + ` per stream (head in stdout, end in stdout_tail, stdout_omitted_bytes between); get_action pages through the rest.`
}

// waitText is how long a call is held, in words.
func waitText(o Options) string {
	return fmt.Sprintf("%d s", (o.MaxWait+time.Second-1)/time.Second)
}

// budgetText is the output budget in words.
func budgetText(o Options) string {
	if o.OutputBudget%1024 == 0 {
		return fmt.Sprintf("%d KiB", o.OutputBudget/1024)
	}
	return fmt.Sprintf("%d bytes", o.OutputBudget)
}

const listTargetsDescription = `List the configured SSH targets (use the name with ssh_exec) and, per account, its policy: approval mode ("call": a reviewer approves every command; "run": once for this session), the classes that escalate to a call approval even then, the classes refused and those allowed unreviewed, the secrets it may use (names), max_timeout_s, max_transfer_bytes, output policy and the approval timeout. Never returns secrets. Read-only.`

const getActionDescription = `Return an action of this session by its id (act_…), sized as ssh_exec returns it: state or outcome, exit code, output, approval. With wait_s it waits for the action to finish (a long poll). With stream, offset and limit it returns only that page of the stored output, under the account's output policy, and the arguments of the next page. Read-only.`

func mustSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(T), err))
	}
	return s
}

// NewServer returns an MCP server with airlock's tools over b. Connect it
// to any transport: sdk.StdioTransport for airlock mcp, a Streamable HTTP
// handler for /mcp, in-memory transports in tests.
func NewServer(b Backend, o Options) *sdk.Server {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 5 * time.Second
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.OutputBudget <= 0 {
		o.OutputBudget = DefaultOutputBudget
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "airlock", Title: "airlock SSH action gateway", Version: o.Version}, &sdk.ServerOptions{
		Instructions: instructions(o),
		SchemaCache:  schemaCache,
		// The tool set never changes; logging carries approval waits.
		Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}, Tools: &sdk.ToolCapabilities{}},
	})
	srv.AddReceivingMiddleware(argumentsInWords)
	t := &tools{b: b, log: o.Logger, interval: o.ProgressInterval, budget: o.OutputBudget, maxWait: o.MaxWait}
	yes := true
	sdk.AddTool(srv, &sdk.Tool{
		Name:         ToolExec,
		Title:        "Run a command on an SSH target (may need human approval)",
		Description:  execDescription(o),
		InputSchema:  execInputSchema,
		OutputSchema: actionSchema,
		Annotations:  &sdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes},
	}, t.exec)
	no := false
	sdk.AddTool(srv, &sdk.Tool{
		Name:         ToolListTargets,
		Title:        "List SSH targets",
		Description:  listTargetsDescription,
		OutputSchema: targetListSchema,
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, t.listTargets)
	sdk.AddTool(srv, &sdk.Tool{
		Name:         ToolGetAction,
		Title:        "Get an action's result",
		Description:  getActionDescription,
		InputSchema:  getActionInputSchema,
		OutputSchema: actionSchema,
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
	}, t.getAction)
	if f, ok := b.(Files); ok && o.FileRoot != "" {
		root, err := os.OpenRoot(o.FileRoot)
		if err != nil {
			o.Logger.Warn("no file tools: the transfer directory cannot be opened", "dir", o.FileRoot, "error", err)
			return srv
		}
		ft := &fileTools{t: t, f: f, root: root}
		sdk.AddTool(srv, &sdk.Tool{
			Name:         ToolPut,
			Title:        "Copy a file to an SSH target (may need human approval)",
			Description:  putDescription(o.FileRoot),
			InputSchema:  putInputSchema,
			OutputSchema: actionSchema,
			Annotations:  &sdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes},
		}, ft.put)
		sdk.AddTool(srv, &sdk.Tool{
			Name:         ToolGet,
			Title:        "Copy a file from an SSH target (may need human approval)",
			Description:  getDescription(o.FileRoot),
			InputSchema:  getInputSchema,
			OutputSchema: actionSchema,
			Annotations:  &sdk.ToolAnnotations{OpenWorldHint: &yes},
		}, ft.get)
	}
	return srv
}

type tools struct {
	b        Backend
	log      hclog.Logger
	interval time.Duration
	budget   int
	maxWait  time.Duration
	// followUps hold what held ssh_get calls did once their action
	// finished, for get_action.
	followUps followUps
}

// maxWaitS bounds wait_s: an hour.
const maxWaitS = 3600

// checkArguments refuses arguments whose text the JSON decoder would have
// altered: invalid UTF-8 or an unpaired surrogate escape became U+FFFD in
// the typed input, so the command would not be the one the client sent.
func checkArguments(req *sdk.CallToolRequest) error {
	if err := api.CheckText(req.Params.Arguments); err != nil {
		return fmt.Errorf("invalid arguments: %v; text must be valid UTF-8, so that the command that runs is the one sent", err)
	}
	return nil
}

func (t *tools) exec(ctx context.Context, req *sdk.CallToolRequest, in ExecInput) (*sdk.CallToolResult, *ActionResult, error) {
	if err := checkArguments(req); err != nil {
		return nil, nil, err
	}
	rep := newReporter(ctx, req, t.interval)
	defer rep.stop()
	ar := api.ActionRequest{Target: in.Target, Account: in.Account, Command: in.Command, TimeoutS: in.TimeoutS, Reason: in.Reason, Secret: in.Secret}
	if in.Stdin != "" {
		ar.Stdin = base64.StdEncoding.EncodeToString([]byte(in.Stdin))
	}
	var a *api.Action
	var err error
	if in.WaitS > 0 {
		// Detached: the action belongs to the run, not to this call.
		var id string
		if id, err = t.b.StartAction(ctx, ar); err == nil {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitS)*time.Second)
			a, err = t.b.WaitAction(wctx, id, api.Events{State: rep.state})
			cancel()
		}
	} else {
		a, _, err = t.runHeld(ctx, ar, rep.state, nil)
	}
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("ssh_exec could not be requested", "target", in.Target, "error", err)
		}
		return nil, nil, backendError("the action could not be requested", err)
	}
	r := t.sized(ctx, a)
	return actionResult(r), r, nil
}

// sized is a's result as a tool returns it: its output cut to the
// budget, and while it is in flight how to follow it.
func (t *tools) sized(ctx context.Context, a *api.Action) *ActionResult {
	r := sized(ctx, t.b, a, t.budget)
	if !a.Outcome.Valid() {
		r.Follow = &Follow{Tool: ToolGetAction, ActionID: a.ID, WaitS: int((t.maxWait + time.Second - 1) / time.Second)}
	}
	return r
}

func (t *tools) listTargets(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, *TargetList, error) {
	ts, err := t.b.Targets(ctx)
	if err != nil {
		return nil, nil, backendError("the targets could not be listed", err)
	}
	if ts == nil {
		ts = []api.Target{}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: targetsSummary(ts)}}}, &TargetList{Targets: ts}, nil
}

func (t *tools) getAction(ctx context.Context, req *sdk.CallToolRequest, in GetActionInput) (*sdk.CallToolResult, any, error) {
	if err := checkArguments(req); err != nil {
		return nil, nil, err
	}
	var a *api.Action
	var err error
	if in.WaitS > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.WaitS)*time.Second)
		a, err = t.b.WaitAction(wctx, in.ActionID, api.Events{})
		cancel()
	} else {
		a, err = t.b.Action(ctx, in.ActionID)
	}
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Err.Code == api.CodeNotFound {
			return nil, nil, fmt.Errorf("no action %q in this session's run; use the id from an ssh_exec result", in.ActionID)
		}
		return nil, nil, backendError("the action could not be read", err)
	}
	if in.Stream != "" {
		return t.page(ctx, a, in)
	}
	r := t.sized(ctx, a)
	res := actionResult(r)
	if !a.Outcome.Valid() {
		// Still in flight: not a failure yet.
		res.IsError = false
	} else if note := t.followUps.note(ctx, a.ID); note != "" {
		res.Content = append(res.Content, &sdk.TextContent{Text: note})
	}
	return res, r, nil
}

// actionResult is the tool result for an action: an error unless it
// exited with status 0 (or is still in flight), with a summary as text.
// The structured content (r itself) is added by the SDK from the typed
// output.
func actionResult(r *ActionResult) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: Summary(r)}},
		IsError: r.Outcome.Valid() && !r.Success(),
	}
}

// backendError is the tool error for a call that could not reach a
// result: the gateway is not running, refused the credentials, or the
// caller went away.
func backendError(what string, err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Err.Code {
		case api.CodeUnauthorized:
			return fmt.Errorf("%s: the gateway refused this session's credentials (%s); restart the MCP server or start a new run", what, ae.Err.Message)
		case api.CodeUnavailable:
			return fmt.Errorf("%s: the gateway is unavailable (%s); retry later", what, ae.Err.Message)
		case api.CodeRateLimited:
			return fmt.Errorf("%s: rate limited (%s); wait a minute", what, ae.Err.Message)
		}
		return fmt.Errorf("%s: %s: %s", what, ae.Err.Code, ae.Err.Message)
	}
	return fmt.Errorf("%s: %w", what, err)
}
