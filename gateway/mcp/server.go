package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
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
	WaitS    int    `json:"wait_s,omitempty" jsonschema:"return after this many seconds even if the action has not finished (for example while a reviewer has not decided yet): the result then has state waiting_approval or running and the action goes on; follow it with get_action. Keep it under your host's tool-call timeout. Omitted: wait for the end, and cancelling the call cancels the action"`
}

// GetActionInput is the input of get_action.
type GetActionInput struct {
	ActionID string `json:"action_id" jsonschema:"id of an action (act_…) from an ssh_exec result of this session"`
	WaitS    int    `json:"wait_s,omitempty" jsonschema:"wait up to this many seconds for the action to finish before returning it (a long poll); omitted: return it as it is now"`
	Stream   string `json:"stream,omitempty" jsonschema:"read a page of the stored output of this stream (stdout or stderr) of a finished action, or of the stdin it sent; the result's page holds it"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"the byte offset in the stream where the page starts (default 0); a result's omitted-bytes note and a page's next_offset give it"`
	Limit    int64  `json:"limit,omitempty" jsonschema:"the most bytes the page holds (default and maximum: the output budget, 32 KiB unless configured)"`
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
	return `airlock runs commands on SSH targets that an operator configured, one command per call, each over a fresh connection with a pinned host key, approved by a human when policy says so, and recorded in a signed audit log.
Call list_targets first to learn target and account names and which need approval. Then call ssh_exec with one of those names; an address is never accepted.
A reviewer may have to approve: the first command of this session when the account's approval mode is "run", every command when it is "call". The call then waits (` + approvalWait(o.ApprovalTimeout) + `) and reports progress while it does; if your host times tool calls out sooner, pass wait_s and follow the action with get_action. If a call is denied, do not retry without asking a human.
Only outcome "exited" with exit_code 0 is success; every other result is an error whose next_step says what to do next. Long output comes as its head and its end with the omitted bytes counted; get_action with stream, offset and limit reads the rest.`
}

func execDescription(o Options) string {
	return `Run one command on a configured SSH target through the airlock gateway and return its result.
The gateway opens a fresh SSH connection with strict host-key checking, runs exactly this command (no PTY, no forwarding; standard input only what stdin holds), records it in a signed audit log and closes the connection; nothing persists between calls (no working directory, no environment).
Approval: a human reviewer may have to approve first — the first command of this session when the account's approval mode is "run", every command when it is "call" (list_targets shows the mode). The call then waits until the reviewer decides (` + approvalWait(o.ApprovalTimeout) + `), sending progress notifications meanwhile; the command's own timeout starts only after approval. With wait_s the call returns by then with state waiting_approval or running, and the action goes on: follow it with get_action.
Result: the action object. Only outcome "exited" with exit_code 0 is success; any other outcome (the command failed, denied, expired, host key problems, timed_out, …) is returned as an error result whose next_step says what to do next. stdout and stderr are what the account's output policy returns (full, last 64 KiB, or none), cut to ` + budgetText(o) + ` per stream: the head in stdout, the end in stdout_tail, the bytes between counted in stdout_omitted_bytes; get_action pages through the rest.`
}

// budgetText is the output budget in words.
func budgetText(o Options) string {
	if o.OutputBudget%1024 == 0 {
		return fmt.Sprintf("%d KiB", o.OutputBudget/1024)
	}
	return fmt.Sprintf("%d bytes", o.OutputBudget)
}

const listTargetsDescription = `List the SSH targets this gateway is configured for: each target's name (use it with ssh_exec), address, default account, pinned host-key fingerprints, and per account its approval mode ("run": a reviewer approves this session once; "call": a reviewer approves every command), max_timeout_s and output policy. Never returns secrets. Read-only; needs no approval.`

const getActionDescription = `Return the action object of an action of this session by its id (act_…): its state or outcome, exit code, output as the output policy allows (sized as ssh_exec returns it), and approval. With wait_s it waits for the action to finish (a long poll). With stream (stdout or stderr), offset and limit it also returns one page of the stored output of a finished action in page, under the same output policy. Only actions of this session's run are visible. With several gateway replicas, any of them answers for this run's token, also when the replica that ran the action stopped (its outcome is then interrupted, once recorded). Read-only; needs no approval.`

// actionFieldDescriptions document the action object in the output schema,
// so that a model reads results right.
var actionFieldDescriptions = map[string]string{
	"id":                   "the action's id; get_action returns it again",
	"run_id":               "the run (this agent session's authority) the action belongs to",
	"state":                "where the action is: requested, waiting_approval, connecting, running or finished",
	"replica":              "the gateway replica running the action, when another replica answers while it is in flight",
	"outcome":              "how it ended: exited (the command ran; see exit_code — only 0 is success), rejected, denied, expired, audit_unavailable, dial_failed, handshake_failed, host_key_unknown, host_key_mismatch, host_key_revoked, auth_failed, session_failed, signaled, exit_missing, timed_out, cancelled, connection_lost or interrupted; absent while in flight",
	"detail":               "a human-readable explanation of the outcome",
	"exit_code":            "the command's exit status (outcome exited)",
	"signal":               "the signal that ended the command (outcome signaled)",
	"termination":          "for timed_out and cancelled: not_started, confirmed (the command was stopped) or unconfirmed (it may still run)",
	"host_key_fingerprint": "the SHA256 fingerprint of the host key the target presented",
	"stdout":               "standard output as the account's output policy returns it; base64 when stdout_encoding is base64",
	"stderr":               "standard error as the account's output policy returns it; base64 when stderr_encoding is base64",
	"stdout_encoding":      "base64 when stdout is not valid UTF-8",
	"stderr_encoding":      "base64 when stderr is not valid UTF-8",
	"stdout_bytes":         "bytes the command wrote to stdout, including any not returned",
	"stderr_bytes":         "bytes the command wrote to stderr, including any not returned",
	"stdout_truncated":     "true when stdout holds less than the command wrote (output policy or size cap)",
	"stderr_truncated":     "true when stderr holds less than the command wrote (output policy or size cap)",
	"stdin_bytes":          "bytes of standard input the action sent (absent for none)",
	"stdin_sha256":         "SHA-256 of the standard input, hex",
	"reason":               "what the agent said the action is for",
	"secret":               "the gateway-held secret written to the command's standard input (its value is never returned)",
	"secret_replacements":  "how many times the secret's value was found in the output and replaced by [secret NAME]",
	"class":                "the command's class as the gateway read it: read_only, mutating, destructive, privileged or forbidden; an account may reject some classes or ask a reviewer for them even inside an approved session; its policy engine and its quotas may reject a request too (detail says which)",
	"redactions":           "what of the command looked like a credential and is stored replaced by [redacted:RULE]: rule, offset and length in the command as sent; pass secrets with secret instead",
	"transfer":             "for a file transfer instead of a command: direction (put or get), remote path, mode and overwrite of a put, size and sha256 of the file, whether a put was published (or replaced a file), a temporary file a failed put left, and for a get where its bytes are fetched",
	"hop":                  "for a target behind a jump host: where the action failed before its command started (the jump host's target name, or the target's own)",
	"approval":             "under which approval the action ran or was refused: mode run, call or unreviewed (the account lets read-only commands run without a reviewer), the approval id, who decided, the decision and its reason, and grant_until when a reviewer's grant let this exact repeat through",
	"next_step":            "after an action that did not succeed: retry (no, yes, or after_check: the command may have run, look first), who must act (agent, reviewer or operator) and the same in words",
	"output_policy":        "the account's output policy that stdout and stderr follow: full, tail (the last 64 KiB) or none",
	"stdout_tail":          "the end of stdout when it is longer than this result's budget (stdout then holds its head)",
	"stderr_tail":          "the end of stderr when it is longer than this result's budget (stderr then holds its head)",
	"stdout_omitted_bytes": "bytes of stdout this result leaves out, between stdout and stdout_tail (before stdout for an account whose output policy is tail); get_action with stream stdout pages through them",
	"stderr_omitted_bytes": "bytes of stderr this result leaves out, between stderr and stderr_tail (before stderr for an account whose output policy is tail); get_action with stream stderr pages through them",
	"page":                 "the page of stored output get_action read when asked for a stream: offset, bytes, data, total, next_offset",
}

// schemas are built once: inferred from the Go types, then given the
// descriptions and bounds that inference cannot express.
var (
	execInputSchema = func() *jsonschema.Schema {
		s := mustSchema[ExecInput]()
		one := 1
		s.Properties["target"].MinLength = &one
		s.Properties["command"].MinLength = &one
		s.Properties["timeout_s"].Minimum = new(1.0)
		s.Properties["reason"].MaxLength = new(api.MaxReason)
		s.Properties["wait_s"].Minimum = new(1.0)
		s.Properties["wait_s"].Maximum = new(float64(maxWaitS))
		return s
	}()
	getActionInputSchema = func() *jsonschema.Schema {
		s := mustSchema[GetActionInput]()
		one := 1
		s.Properties["action_id"].MinLength = &one
		s.Properties["wait_s"].Minimum = new(1.0)
		s.Properties["wait_s"].Maximum = new(float64(maxWaitS))
		s.Properties["stream"].Enum = []any{"stdout", "stderr", "stdin"}
		s.Properties["offset"].Minimum = new(0.0)
		s.Properties["limit"].Minimum = new(1.0)
		return s
	}()
	actionSchema = func() *jsonschema.Schema {
		s := mustSchema[ActionResult]()
		for name, d := range actionFieldDescriptions {
			p, ok := s.Properties[name]
			if !ok {
				panic("mcp: the action object has no field " + name)
			}
			p.Description = d
		}
		return s
	}()
	targetListSchema = mustSchema[TargetList]()
	putInputSchema   = func() *jsonschema.Schema {
		s := transferSchema[PutInput]()
		s.Properties["mode"].Pattern = "^0?[0-7]{3}$"
		return s
	}()
	getInputSchema   = transferSchema[GetInput]()
	fileResultSchema = func() *jsonschema.Schema {
		s := mustSchema[FileResult]()
		for name, d := range actionFieldDescriptions {
			if p, ok := s.Properties[name]; ok {
				p.Description = d
			}
		}
		return s
	}()
	schemaCache = sdk.NewSchemaCache()
)

// closedSets are the schemas of the closed sets the action object holds:
// strings from a fixed list, as the wire carries them.
var closedSets = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[sshexec.Outcome]():     enumSchema(sshexec.Outcomes()),
	reflect.TypeFor[sshexec.Termination](): enumSchema(sshexec.Terminations()),
}

func enumSchema[T fmt.Stringer](values []T) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, v := range values {
		s.Enum = append(s.Enum, v.String())
	}
	return s
}

func mustSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: closedSets})
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
	srv := sdk.NewServer(&sdk.Implementation{Name: "airlock", Title: "airlock SSH action gateway", Version: o.Version}, &sdk.ServerOptions{
		Instructions: instructions(o),
		SchemaCache:  schemaCache,
		// The tool set never changes; logging carries approval waits.
		Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}, Tools: &sdk.ToolCapabilities{}},
	})
	srv.AddReceivingMiddleware(argumentsInWords)
	t := &tools{b: b, log: o.Logger, interval: o.ProgressInterval, budget: o.OutputBudget}
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
			OutputSchema: fileResultSchema,
			Annotations:  &sdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes},
		}, ft.put)
		sdk.AddTool(srv, &sdk.Tool{
			Name:         ToolGet,
			Title:        "Copy a file from an SSH target (may need human approval)",
			Description:  getDescription(o.FileRoot),
			InputSchema:  getInputSchema,
			OutputSchema: fileResultSchema,
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
		a, err = t.b.RunAction(ctx, ar, api.Events{State: rep.state})
	}
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("ssh_exec could not be requested", "target", in.Target, "error", err)
		}
		return nil, nil, backendError("the action could not be requested", err)
	}
	r := sized(ctx, t.b, a, t.budget)
	return actionResult(r), r, nil
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

func (t *tools) getAction(ctx context.Context, req *sdk.CallToolRequest, in GetActionInput) (*sdk.CallToolResult, *ActionResult, error) {
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
	r := sized(ctx, t.b, a, t.budget)
	if in.Stream != "" {
		limit := in.Limit
		if limit <= 0 || limit > int64(t.budget) {
			limit = int64(t.budget)
		}
		pg, err := t.b.Output(ctx, in.ActionID, in.Stream, in.Offset, limit)
		if err != nil {
			var ae *api.Error
			if errors.As(err, &ae) {
				return nil, nil, fmt.Errorf("the %s of action %s could not be read: %s", in.Stream, in.ActionID, ae.Err.Message)
			}
			return nil, nil, backendError("the output could not be read", err)
		}
		r.Page = pg
	}
	res := actionResult(r)
	if !a.Outcome.Valid() {
		// Still in flight: not a failure yet.
		res.IsError = false
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
