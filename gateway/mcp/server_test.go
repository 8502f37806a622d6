package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec"
)

// fakeBackend stands in for the gateway where a real one cannot produce an
// outcome on demand (interrupted, connection_lost, …) or a failure of the
// gateway itself. The gateway's own tests drive the same tools against a
// real gateway and sshd.
type fakeBackend struct {
	run     func(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error)
	targets []api.Target
	actions map[string]*api.Action
	err     error

	mu    sync.Mutex
	calls []api.ActionRequest
}

func (f *fakeBackend) RunAction(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.run(ctx, req, ev)
}

func (f *fakeBackend) Targets(ctx context.Context) ([]api.Target, error) {
	return f.targets, f.err
}

func (f *fakeBackend) Action(ctx context.Context, id string) (*api.Action, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.actions[id]
	if !ok {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: "no action"}, Status: 404}
	}
	return a, nil
}

// StartAction runs the action to its end at once (the fake has no
// actions in flight) and keeps it for WaitAction.
func (f *fakeBackend) StartAction(ctx context.Context, req api.ActionRequest) (string, error) {
	a, err := f.RunAction(ctx, req, api.Events{})
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.actions == nil {
		f.actions = map[string]*api.Action{}
	}
	f.actions[a.ID] = a
	return a.ID, nil
}

func (f *fakeBackend) WaitAction(ctx context.Context, id string, ev api.Events) (*api.Action, error) {
	return f.Action(ctx, id)
}

func (f *fakeBackend) Output(ctx context.Context, id, stream string, offset, limit int64) (*api.OutputPage, error) {
	return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: "the fake stores no output"}, Status: 404}
}

func (f *fakeBackend) requests() []api.ActionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.ActionRequest(nil), f.calls...)
}

// notes records what the server sent besides results.
type notes struct {
	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
	logs     []*sdk.LoggingMessageParams
}

func (n *notes) snapshot() ([]*sdk.ProgressNotificationParams, []*sdk.LoggingMessageParams) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*sdk.ProgressNotificationParams(nil), n.progress...), append([]*sdk.LoggingMessageParams(nil), n.logs...)
}

// connect serves b over in-memory transports and returns a client session
// with the SDK's latest protocol version.
func connect(t testing.TB, b mcp.Backend, o mcp.Options) (*sdk.ClientSession, *notes) {
	t.Helper()
	return connectVersion(t, b, o, "")
}

// The protocol versions the tests speak: the SDK's latest (where the log
// level travels with each request) and the one today's hosts use (where
// the client sets it once).
const (
	latestProtocol = ""
	legacyProtocol = "2025-11-25"
)

// connectVersion is connect with a protocol version; a legacy session sets
// the log level to info.
func connectVersion(t testing.TB, b mcp.Backend, o mcp.Options, version string) (*sdk.ClientSession, *notes) {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(b, o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			n.mu.Lock()
			n.progress = append(n.progress, r.Params)
			n.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			n.mu.Lock()
			n.logs = append(n.logs, r.Params)
			n.mu.Unlock()
		},
	})
	cs, err := c.Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	if version == legacyProtocol {
		if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs, n
}

func exitCode(n int) *int { return &n }

func finished(outcome sshexec.Outcome, code *int) *api.Action {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &api.Action{ID: "act_test", RunID: "run_0123456789abcdef0123456789abcdef", Target: "box", Account: "deploy",
		Command: "make deploy", TimeoutS: 60, State: api.StateFinished, Outcome: outcome, Detail: "detail of " + outcome.String(),
		ExitCode: code, Stdout: "out\n", Stderr: "err\n", StdoutBytes: 4, StderrBytes: 4, RequestedAt: at, FinishedAt: &at,
		Approval: api.ApprovalInfo{Mode: "run", ID: "apr_0123456789abcdef0123456789abcdef", DecidedBy: "alice", Decision: "approve"}}
}

func TestToolsAreTypedAndDescribed(t *testing.T) {
	t.Parallel()
	cs, _ := connect(t, &fakeBackend{}, mcp.Options{ApprovalTimeout: 7 * time.Minute, OutputBudget: 16 << 10, MaxWait: 20 * time.Second})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type shape struct {
		Required   []string
		Properties []string
		Closed     bool
		Output     bool
		ReadOnly   bool
	}
	got := map[string]shape{}
	for _, tool := range res.Tools {
		var in struct {
			Required             []string                  `json:"required"`
			Properties           map[string]map[string]any `json:"properties"`
			AdditionalProperties *bool                     `json:"additionalProperties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		var props []string
		for name, p := range in.Properties {
			props = append(props, name)
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
		}
		if len(tool.Description) < 100 {
			t.Errorf("%s: description too short for a model to choose well: %q", tool.Name, tool.Description)
		}
		got[tool.Name] = shape{Required: in.Required, Properties: slices.Sorted(slices.Values(props)),
			Closed: in.AdditionalProperties != nil && !*in.AdditionalProperties, Output: tool.OutputSchema != nil,
			ReadOnly: tool.Annotations != nil && tool.Annotations.ReadOnlyHint}
	}
	want := map[string]shape{
		"ssh_exec":     {Required: []string{"target", "command"}, Properties: []string{"account", "command", "reason", "secret", "stdin", "target", "timeout_s", "wait_s"}, Closed: true, Output: true},
		"list_targets": {Closed: true, Output: true, ReadOnly: true},
		"get_action":   {Required: []string{"action_id"}, Properties: []string{"action_id", "limit", "offset", "stream", "wait_s"}, Closed: true, Output: true, ReadOnly: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, tool := range res.Tools {
		if tool.Name == mcp.ToolExec {
			// The waits and sizes stated are the gateway's, as configured,
			// and a run approval is not promised for what escalates.
			for _, word := range []string{"approv", "up to 7 min", "exit_code 0", "16 KiB per stream", "wait_s", "answers within 20 s",
				"escalated class", "any use of a secret are asked on their own", "approval.why"} {
				if !strings.Contains(tool.Description, word) {
					t.Errorf("ssh_exec's description does not mention %q", word)
				}
			}
			if strings.Contains(tool.Description, "approves this session once") {
				t.Errorf("ssh_exec's description promises one approval per session:\n%s", tool.Description)
			}
		}
	}
}

func TestExecResultIsErrorUnlessExitedZero(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		outcome sshexec.Outcome
		code    *int
		isError bool
	}{
		{sshexec.Exited, exitCode(0), false},
		{sshexec.Exited, exitCode(1), true},
		{sshexec.Exited, exitCode(255), true},
		{sshexec.Rejected, nil, true},
		{sshexec.Denied, nil, true},
		{sshexec.Expired, nil, true},
		{sshexec.AuditUnavailable, nil, true},
		{sshexec.DialFailed, nil, true},
		{sshexec.HostKeyUnknown, nil, true},
		{sshexec.HostKeyMismatch, nil, true},
		{sshexec.AuthFailed, nil, true},
		{sshexec.Signaled, nil, true},
		{sshexec.ExitMissing, nil, true},
		{sshexec.TimedOut, nil, true},
		{sshexec.Cancelled, nil, true},
		{sshexec.ConnectionLost, nil, true},
		{sshexec.Interrupted, nil, true},
	} {
		name := tt.outcome.String()
		if tt.code != nil {
			name += "/" + string(rune('0'+*tt.code%10))
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := finished(tt.outcome, tt.code)
			b := &fakeBackend{run: func(context.Context, api.ActionRequest, api.Events) (*api.Action, error) { return want, nil }}
			cs, _ := connect(t, b, mcp.Options{})
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec",
				Arguments: map[string]any{"target": "box", "command": "make deploy", "account": "deploy", "timeout_s": 30}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.isError {
				t.Errorf("isError = %v, want %v", res.IsError, tt.isError)
			}
			if diff := cmp.Diff(*want, mcptest.Structured[api.Action](t, res)); diff != "" {
				t.Errorf("structured content (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]api.ActionRequest{{Target: "box", Account: "deploy", Command: "make deploy", TimeoutS: 30}}, b.requests()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			summary := mcptest.Text(res)
			if !strings.Contains(summary, "act_test") || !strings.Contains(summary, "out\n") {
				t.Errorf("summary lacks the action id or output:\n%s", summary)
			}
			if next := api.NextStep(want); !strings.Contains(summary, next) {
				t.Errorf("summary lacks the next step %q:\n%s", next, summary)
			}
		})
	}
}

func TestProgressAndLogsWhileWaitingForApproval(t *testing.T) {
	t.Parallel()
	for _, version := range []string{latestProtocol, legacyProtocol} {
		t.Run("protocol="+version, func(t *testing.T) {
			t.Parallel()
			testProgressAndLogs(t, version)
		})
	}
}

func testProgressAndLogs(t *testing.T, version string) {
	release := make(chan struct{})
	b := &fakeBackend{run: func(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
		ev.State(api.StateEvent{State: api.StateRequested, ActionID: "act_test"})
		ev.State(api.StateEvent{State: api.StateWaitingApproval, ApprovalID: "apr_0123456789abcdef0123456789abcdef", Kind: "call",
			Message: "waiting for a reviewer to approve this call (until 2026-01-02T03:06:05Z)"})
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		ev.State(api.StateEvent{State: api.StateConnecting})
		ev.State(api.StateEvent{State: api.StateRunning})
		return finished(sshexec.Exited, exitCode(0)), nil
	}}
	cs, n := connectVersion(t, b, mcp.Options{ProgressInterval: 20 * time.Millisecond}, version)
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		p := &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"target": "box", "command": "make deploy"}}
		if version == latestProtocol {
			p.Meta = sdk.Meta{sdk.MetaKeyLogLevel: "info"}
		}
		p.SetProgressToken("call-1")
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The heartbeat repeats the waiting notice until a decision.
	testkit.EventuallyErr(t, func() error {
		if progress, _ := n.snapshot(); len(progress) < 4 {
			return fmt.Errorf("only %d progress notifications", len(progress))
		}
		return nil
	}, "the waiting notice to repeat")
	close(release)
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("result %+v", res)
	}
	// Notifications are handled concurrently with the result: give the
	// last ones a moment.
	testkit.Poll(testkit.Patience, func() bool {
		_, logs := n.snapshot()
		return len(logs) >= 4
	})
	progress, logs := n.snapshot()
	last := 0.0
	var messages []string
	for _, p := range progress {
		if p.ProgressToken != "call-1" {
			t.Errorf("progress token %v, want call-1", p.ProgressToken)
		}
		if p.Progress <= last {
			t.Errorf("progress %v after %v: must increase", p.Progress, last)
		}
		last = p.Progress
		messages = append(messages, p.Message)
	}
	all := strings.Join(messages, "\n")
	for _, want := range []string{"a human is being asked (approval apr_0123456789abcdef0123456789abcdef)", "still waiting for a human reviewer", "connecting", "running"} {
		if !strings.Contains(all, want) {
			t.Errorf("no progress message with %q in:\n%s", want, all)
		}
	}
	var states []mcp.LogEvent
	for _, l := range logs {
		var ev mcp.LogEvent
		b, _ := json.Marshal(l.Data)
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if (ev.State == api.StateWaitingApproval) != (l.Level == "notice") {
			t.Errorf("log level %s for state %s", l.Level, ev.State)
		}
		ev.Message = ""
		states = append(states, ev)
	}
	want := []mcp.LogEvent{
		{ActionID: "act_test", State: api.StateRequested},
		{ActionID: "act_test", State: api.StateWaitingApproval, ApprovalID: "apr_0123456789abcdef0123456789abcdef", Kind: "call"},
		{ActionID: "act_test", State: api.StateConnecting},
		{ActionID: "act_test", State: api.StateRunning},
	}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("log events (-want +got):\n%s", diff)
	}
}

func TestCancellingTheCallCancelsTheAction(t *testing.T) {
	t.Parallel()
	for _, version := range []string{latestProtocol, legacyProtocol} {
		t.Run("protocol="+version, func(t *testing.T) {
			t.Parallel()
			testCancel(t, version)
		})
	}
}

func testCancel(t *testing.T, version string) {
	entered := make(chan struct{})
	sawCancel := make(chan struct{})
	b := &fakeBackend{run: func(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
		close(entered)
		<-ctx.Done()
		close(sawCancel)
		return nil, ctx.Err()
	}}
	cs, _ := connectVersion(t, b, mcp.Options{}, version)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"target": "box", "command": "sleep 60"}})
		errc <- err
	}()
	<-entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool: %v, want context.Canceled", err)
	}
	select {
	case <-sawCancel:
	case <-time.After(testkit.Patience):
		t.Fatal("the backend's action was not cancelled")
	}
	// The session carries on.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("after a cancel: %v", err)
	}
}

func TestBadArgumentsAreToolErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		tool string
		args any
	}{
		{"no target", "ssh_exec", map[string]any{"command": "true"}},
		{"no command", "ssh_exec", map[string]any{"target": "box"}},
		{"empty command", "ssh_exec", map[string]any{"target": "box", "command": ""}},
		{"timeout as text", "ssh_exec", map[string]any{"target": "box", "command": "true", "timeout_s": "ten"}},
		{"negative timeout", "ssh_exec", map[string]any{"target": "box", "command": "true", "timeout_s": -1}},
		{"fractional timeout", "ssh_exec", map[string]any{"target": "box", "command": "true", "timeout_s": 1.5}},
		{"an address instead", "ssh_exec", map[string]any{"target": "box", "command": "true", "host": "10.0.0.1"}},
		{"command as array", "ssh_exec", map[string]any{"target": "box", "command": []string{"rm", "-rf"}}},
		{"arguments not an object", "ssh_exec", []string{"box", "true"}},
		{"no action id", "get_action", map[string]any{}},
		{"action id as number", "get_action", map[string]any{"action_id": 7}},
		{"arguments to list_targets", "list_targets", map[string]any{"target": "box"}},
		// Text the decoder would turn into U+FFFD: the command that ran
		// would not be the one sent.
		{"lone surrogate escape in the command", "ssh_exec", json.RawMessage(`{"target":"box","command":"rm -rf /tmp/\ud800"}`)},
		{"invalid UTF-8 in the command", "ssh_exec", json.RawMessage("{\"target\":\"box\",\"command\":\"rm -rf /tmp/\xff\"}")},
		{"lone surrogate escape in the action id", "get_action", json.RawMessage(`{"action_id":"act_\udc00"}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &fakeBackend{run: func(context.Context, api.ActionRequest, api.Events) (*api.Action, error) {
				return finished(sshexec.Exited, exitCode(0)), nil
			}}
			cs, _ := connect(t, b, mcp.Options{})
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
					t.Fatalf("CallTool: %v, want a tool error result or invalid params", err)
				}
			} else if !res.IsError {
				t.Errorf("isError = false for bad arguments; result %s", mcptest.Text(res))
			}
			if got := b.requests(); len(got) != 0 {
				t.Errorf("bad arguments reached the gateway: %+v", got)
			}
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Errorf("the session did not survive: %v", err)
			}
		})
	}
}

// A refused argument is said in words a model can act on, never as the
// schema validator's trace, and the refused value is not echoed back.
func TestBadArgumentsInWords(t *testing.T) {
	t.Parallel()
	cs, _ := connect(t, &fakeBackend{}, mcp.Options{})
	huge := strings.Repeat("\x00", 600)
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ssh_exec", map[string]any{"target": "box", "command": "true", "timeout_s": 0}, "invalid arguments: timeout_s must be an integer number of seconds ≥ 1"},
		{"ssh_exec", map[string]any{"target": "box", "command": "true", "timeout_s": "ten"}, "invalid arguments: timeout_s must be an integer number of seconds ≥ 1"},
		{"ssh_exec", map[string]any{"target": "box"}, "invalid arguments: command is required: command must be one shell command line"},
		{"ssh_exec", map[string]any{"target": "box", "command": "true", "host": "10.0.0.1"}, "invalid arguments: host is not an argument of ssh_exec; its arguments are: account, command, reason, secret, stdin, target, timeout_s, wait_s"},
		{"ssh_exec", map[string]any{"target": "box", "command": "true", "reason": huge}, "invalid arguments: reason must be text of at most 500 characters"},
		{"ssh_exec", map[string]any{"target": "box", "command": "true", "wait_s": 9999}, "invalid arguments: wait_s must be an integer number of seconds from 1 to 3600"},
		{"get_action", map[string]any{"action_id": "act_x", "stream": "stdlog"}, `invalid arguments: stream must be "stdout", "stderr" or "stdin"`},
	} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil || !res.IsError || !strings.HasPrefix(mcptest.Text(res), tt.want) || strings.Contains(mcptest.Text(res), "validating") {
			t.Errorf("%s %v: %v, %q\nwant %q", tt.tool, tt.args, err, mcptest.Text(res), tt.want)
		}
	}
}

// Text outside ASCII, escaped or not, reaches the gateway exactly as sent.
func TestArgumentTextReachesTheGatewayUnaltered(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{run: func(context.Context, api.ActionRequest, api.Events) (*api.Action, error) {
		return finished(sshexec.Exited, exitCode(0)), nil
	}}
	cs, _ := connect(t, b, mcp.Options{})
	raw := json.RawMessage(`{"target":"box","command":"echo \ud83d\ude00 café \u00e9"}`)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: raw}); err != nil {
		t.Fatal(err)
	}
	if got := b.requests(); len(got) != 1 || got[0].Command != "echo \U0001F600 café é" {
		t.Errorf("the gateway got %+v", got)
	}
}

// FuzzExecArguments: whatever arguments a client sends to ssh_exec, the
// server does not fail, and a request reaches the gateway only if the
// arguments are valid text and it carries exactly what they say.
func FuzzExecArguments(f *testing.F) {
	for _, s := range []string{
		`{"target":"box","command":"true"}`,
		`{"target":"box","account":"deploy","command":"echo \ud83d\ude00","timeout_s":30}`,
		`{"target":"box","command":"echo \ud800"}`,
		"{\"target\":\"box\",\"command\":\"\xff\"}",
		`{"target":"box","command":"x","Command":"y"}`,
		`{"target":"box","command":"x","command":"y"}`,
		`{"target":"","command":"x","timeout_s":1e3}`,
		`[]`, `null`, `"box"`,
	} {
		f.Add([]byte(s))
	}
	b := &fakeBackend{run: func(context.Context, api.ActionRequest, api.Events) (*api.Action, error) {
		return finished(sshexec.Exited, exitCode(0)), nil
	}}
	cs, _ := connect(f, b, mcp.Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // the client refuses to send it
		}
		b.mu.Lock()
		b.calls = b.calls[:0] // one call's requests at a time
		b.mu.Unlock()
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: json.RawMessage(data)})
		if err != nil {
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) {
				t.Fatalf("CallTool: %v, want a result or a JSON-RPC error", err)
			}
		}
		got := b.requests()
		if len(got) == 0 {
			return
		}
		if len(got) != 1 {
			t.Fatalf("one call made %d requests", len(got))
		}
		if err := api.CheckText(data); err != nil {
			t.Fatalf("arguments %q reached the gateway although %v", data, err)
		}
		var in mcp.ExecInput
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("arguments %q reached the gateway although they do not decode: %v", data, err)
		}
		r := got[0]
		if r.Target != in.Target || r.Account != in.Account || r.Command != in.Command || r.TimeoutS != in.TimeoutS || r.Target == "" || r.Command == "" {
			t.Fatalf("arguments %q reached the gateway as %+v", data, r)
		}
	})
}

func TestUnknownToolIsAProtocolError(t *testing.T) {
	t.Parallel()
	cs, _ := connect(t, &fakeBackend{}, mcp.Options{})
	_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_shell", Arguments: map[string]any{"host": "10.0.0.1"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("CallTool(ssh_shell): %v, want invalid params", err)
	}
}

func TestGatewayFailuresAreToolErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"gateway down", &net.OpError{Op: "dial", Net: "unix", Err: errors.New("connection refused")}},
		{"token refused", &api.Error{Err: api.ErrorBody{Code: api.CodeUnauthorized, Message: "the local token is missing or wrong"}, Status: 401}},
		{"shutting down", &api.Error{Err: api.ErrorBody{Code: api.CodeUnavailable, Message: "shutting down"}, Status: 503}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs, _ := connect(t, &fakeBackend{err: tt.err}, mcp.Options{})
			for _, call := range []*sdk.CallToolParams{
				{Name: "ssh_exec", Arguments: map[string]any{"target": "box", "command": "true"}},
				{Name: "list_targets", Arguments: map[string]any{}},
				{Name: "get_action", Arguments: map[string]any{"action_id": "act_x"}},
			} {
				res, err := cs.CallTool(context.Background(), call)
				if err != nil {
					t.Fatalf("%s: %v, want a tool error result", call.Name, err)
				}
				if !res.IsError || res.StructuredContent != nil || mcptest.Text(res) == "" {
					t.Errorf("%s: isError %v, structured %v, text %q; want an explained error without a result object", call.Name, res.IsError, res.StructuredContent, mcptest.Text(res))
				}
			}
		})
	}
}

func TestListTargetsAndGetAction(t *testing.T) {
	t.Parallel()
	targets := []api.Target{{Name: "box", Address: "10.0.0.24:22", DefaultAccount: "deploy", HostKeys: []string{"SHA256:abc"}, MaxParallel: 4,
		Accounts: []api.TargetAccount{{Name: "deploy", Approval: "run", MaxTimeoutS: 600, Output: "full", Secrets: []string{"db-password"},
			AccountPolicy: api.AccountPolicy{Escalate: []string{"destructive", "privileged"}, Refuse: []string{"forbidden"}, AllowUnreviewed: []string{"read_only"},
				MaxTransferBytes: 64 << 20, ApprovalTimeoutS: 120}}}}}
	done := finished(sshexec.Exited, exitCode(0))
	inFlight := &api.Action{ID: "act_running", RunID: done.RunID, Target: "box", Account: "deploy", Command: "sleep 9", TimeoutS: 60,
		State: api.StateWaitingApproval, RequestedAt: done.RequestedAt, Approval: api.ApprovalInfo{Mode: "call", ID: "apr_0123456789abcdef0123456789abcdef"}}
	failed := finished(sshexec.HostKeyMismatch, nil)
	failed.ID = "act_failed"
	b := &fakeBackend{targets: targets, actions: map[string]*api.Action{done.ID: done, inFlight.ID: inFlight, failed.ID: failed}}
	cs, _ := connect(t, b, mcp.Options{})
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %+v", err, res)
	}
	if diff := cmp.Diff(mcp.TargetList{Targets: targets}, mcptest.Structured[mcp.TargetList](t, res)); diff != "" {
		t.Errorf("list_targets (-want +got):\n%s", diff)
	}
	// The policy is in the text a model reads, not only in the
	// structured content.
	for _, want := range []string{"box account deploy, default account: approval per run", "asks a call approval for destructive, privileged",
		"refuses forbidden", "runs unreviewed read_only", "secrets db-password (each use asks a reviewer)", "reviewer decides within 120s",
		"timeout up to 600s", "transfers up to 64 MiB"} {
		if !strings.Contains(mcptest.Text(res), want) {
			t.Errorf("list_targets text lacks %q:\n%s", want, mcptest.Text(res))
		}
	}

	for _, tt := range []struct {
		id      string
		want    *api.Action
		isError bool
	}{
		{done.ID, done, false},
		{inFlight.ID, inFlight, false},
		{failed.ID, failed, true},
		{"act_someone_elses", nil, true},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_action", Arguments: map[string]any{"action_id": tt.id}})
		if err != nil {
			t.Fatalf("get_action %s: %v", tt.id, err)
		}
		if res.IsError != tt.isError {
			t.Errorf("get_action %s: isError %v, want %v (%s)", tt.id, res.IsError, tt.isError, mcptest.Text(res))
		}
		if tt.want == nil {
			if res.StructuredContent != nil {
				t.Errorf("get_action %s: a result object for an unknown action", tt.id)
			}
			continue
		}
		if diff := cmp.Diff(*tt.want, mcptest.Structured[api.Action](t, res)); diff != "" {
			t.Errorf("get_action %s (-want +got):\n%s", tt.id, diff)
		}
	}
}
