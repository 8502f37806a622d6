package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// The built `airlock mcp` against the built `airlock serve` and a real sshd,
// driven by the Go SDK's CommandTransport and by the TypeScript SDK.

// The gateway's approval deadline in these tests: long enough for the CLI
// to approve on a busy machine, and a short one for the test that waits it
// out.
const (
	mcpApprovalTimeout   = time.Minute
	mcpShortApprovalWait = 2 * time.Second
)

// startMCPDaemon runs `airlock serve` with targets box-run (run approval)
// and box-call (call approval) on a real sshd, and a reviewer alice; a
// request nobody decides expires after approvalTimeout.
func startMCPDaemon(t *testing.T, approvalTimeout time.Duration) *daemon {
	t.Helper()
	return startMCPDaemonWith(t, approvalTimeout, "")
}

// startMCPDaemonWith is startMCPDaemon with more configuration (extra).
func startMCPDaemonWith(t *testing.T, approvalTimeout time.Duration, extra string) *daemon {
	t.Helper()
	airlock, _ := binaries(t)
	s := sshtest.NewSSHD(t, sshtest.Options{})
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	c := gatewaytest.Config{StateDir: state, HTTP: "127.0.0.1:0", ApprovalTimeout: approvalTimeout.String(),
		Credentials: map[string]string{"key": s.ClientKeyFile}, Extra: extra}
	for _, tg := range [][2]string{{"box-run", "run"}, {"box-call", "call"}} {
		c.Targets = append(c.Targets, gatewaytest.Target{Name: tg[0], Address: s.Addr, HostKey: s.HostKey,
			Accounts: []gatewaytest.Account{{Name: s.User, Credential: "key", Approval: tg[1]}}})
	}
	cfgFile := c.Write(t, dir)
	add := exec.Command(airlock, "reviewer", "add", "alice", "--config", cfgFile)
	add.Env = append(os.Environ(), "AIRLOCK_PASSWORD_FILE="+writePW(t))
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("reviewer add: %v: %s", err, out)
	}
	return startDaemon(t, cfgFile, state)
}

// startMCP runs `airlock mcp` with the socket (and env) in its
// environment and returns a Go SDK session over its stdio.
func startMCP(t *testing.T, socket string, env ...string) (*sdk.ClientSession, *mcptest.Events, *lockedBuffer) {
	t.Helper()
	airlock, _ := binaries(t)
	cmd := exec.Command(airlock, "mcp")
	// The transfer directory in the test's own data directory.
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+socket, "XDG_DATA_HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	ev := &mcptest.Events{}
	c := sdk.NewClient(&sdk.Implementation{Name: "airlock-test", Version: "1"}, &sdk.ClientOptions{LoggingMessageHandler: ev.Handle})
	cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to airlock mcp: %v\nits stderr:\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("airlock mcp stderr:\n%s", stderr.String())
		}
	})
	return cs, ev, stderr
}

// execParams asks for log messages with the call (the latest protocol
// carries the level with each request).
func execParams(args map[string]any) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: "ssh_exec", Arguments: args, Meta: sdk.Meta{sdk.MetaKeyLogLevel: "info"}}
}

// auditEntries returns the audit log's entries of kind for an action or
// a run.
func (d *daemon) auditEntries(t *testing.T, kind, actionID, runID string) []map[string]any {
	t.Helper()
	out, errs, code := d.cli("audit", "export")
	if code != 0 {
		t.Fatalf("audit export: %s", errs)
	}
	var found []map[string]any
	for line := range strings.Lines(out) {
		var e struct {
			Kind     string         `json:"kind"`
			ActionID string         `json:"action_id"`
			RunID    string         `json:"run_id"`
			Fields   map[string]any `json:"fields"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == kind && (actionID == "" || e.ActionID == actionID) && (runID == "" || e.RunID == runID) {
			found = append(found, e.Fields)
		}
	}
	return found
}

// waitAudit waits for an entry of kind for an action or a run.
func (d *daemon) waitAudit(t *testing.T, kind, actionID, runID string) map[string]any {
	t.Helper()
	var e []map[string]any
	testkit.Eventually(t, func() bool { e = d.auditEntries(t, kind, actionID, runID); return len(e) > 0 },
		"no %s entry for action %q run %q in the audit log", kind, actionID, runID)
	return e[0]
}

// run returns a pending or approved run as the reviewer CLI lists it.
func (d *daemon) run(t *testing.T, id string) api.Run {
	t.Helper()
	out, errs, code := d.cli("runs", "list", "--json")
	if code != 0 {
		t.Fatalf("runs list: %s", errs)
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("runs list --json: %v", err)
	}
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no run %s in %s", id, out)
	return api.Run{}
}

func TestMCPStdioAgainstTheGateway(t *testing.T) {
	t.Parallel()
	d := startMCPDaemon(t, mcpApprovalTimeout)
	cs, events, _ := startMCP(t, d.socket)
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff([]string{"get_action", "list_targets", "ssh_exec", "ssh_get", "ssh_put"}, slices.Sorted(slices.Values(names))); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %s", err, mcptest.Text(res))
	}
	var list mcp.TargetList
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &list)
	var got []string
	for _, tg := range list.Targets {
		got = append(got, tg.Name+"/"+string(tg.Accounts[0].Approval))
	}
	if diff := cmp.Diff([]string{"box-run/run", "box-call/call"}, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}

	m := &mcpStdio{d: d, cs: cs, events: events}
	t.Run("approve: one run for the session, anchored at airlock mcp", m.approve)
	t.Run("get_action", m.getAction)
	t.Run("deny", m.deny)
	t.Run("expire", m.expire)
	for _, tt := range mcpCancelCases {
		t.Run(tt.name, func(t *testing.T) { m.cancel(t, tt) })
	}
	t.Run("bad arguments and unknown tool", m.badArguments)
	t.Run("closing the session ends the run", m.closeSession)
	t.Run("TypeScript SDK over stdio", m.typeScript)
}

// mcpStdio is one `airlock mcp` session over stdio, m.cs, against the
// gateway d; m.first is the action the approval phase ran, which later
// phases look up.
type mcpStdio struct {
	d      *daemon
	cs     *sdk.ClientSession
	events *mcptest.Events
	first  api.Action
}

func (m *mcpStdio) approve(t *testing.T) {
	ctx := context.Background()
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := m.cs.CallTool(ctx, execParams(map[string]any{"target": "box-run", "command": "echo hello; echo oops >&2"}))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	wait := m.events.Wait(t, api.StateWaitingApproval)
	pending := m.d.pending(1)
	if pending[0].Kind != "run" || pending[0].ID != wait.ApprovalID {
		t.Fatalf("pending %+v, waiting event %+v", pending[0], wait)
	}
	if r := m.d.run(t, pending[0].RunID); r.Anchor == nil || filepath.Base(r.Anchor.Executable) != "airlock" || !slices.Contains(r.Anchor.Argv, "mcp") {
		t.Errorf("the run is not anchored at airlock mcp: %+v", r)
	}
	if _, errs, code := m.d.cli("approvals", "approve", pending[0].ID); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	res := <-done
	m.first = mcptest.Structured[api.Action](t, res)
	if res.IsError || m.first.Stdout != "hello\n" || m.first.Stderr != "oops\n" || m.first.Approval.DecidedBy != "alice" {
		t.Fatalf("result %+v: %s", m.first, mcptest.Text(res))
	}
	// The approved run's next actions pass without asking; failures
	// are errors carrying the action.
	res, err := m.cs.CallTool(ctx, execParams(map[string]any{"target": "box-run", "command": "exit 3"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := mcptest.Structured[api.Action](t, res); !res.IsError || a.Outcome != sshexec.Exited || a.ExitCode == nil || *a.ExitCode != 3 || a.RunID != m.first.RunID {
		t.Errorf("exit 3: isError %v, %+v", res.IsError, a)
	}
}

func (m *mcpStdio) getAction(t *testing.T) {
	ctx := context.Background()
	res, err := m.cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_action", Arguments: map[string]any{"action_id": m.first.ID}})
	if err != nil || res.IsError {
		t.Fatalf("get_action: %v %s", err, mcptest.Text(res))
	}
	if diff := cmp.Diff(m.first, mcptest.Structured[api.Action](t, res)); diff != "" {
		t.Errorf("get_action (-want +got):\n%s", diff)
	}
}

func (m *mcpStdio) deny(t *testing.T) {
	ctx := context.Background()
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := m.cs.CallTool(ctx, execParams(map[string]any{"target": "box-call", "command": "touch /tmp/never"}))
		done <- res
	}()
	pending := m.d.pending(1)
	if pending[0].Kind != "call" || pending[0].Command != "touch /tmp/never" {
		t.Fatalf("pending %+v", pending[0])
	}
	m.d.cli("approvals", "deny", pending[0].ID, "--reason", "not this one")
	res := <-done
	if a := mcptest.Structured[api.Action](t, res); !res.IsError || a.Outcome != sshexec.Denied || a.Approval.Reason != "not this one" {
		t.Errorf("deny: isError %v, %+v", res.IsError, a)
	}
	if !strings.Contains(mcptest.Text(res), "do not retry without asking a human") {
		t.Errorf("the text does not pass on the next step:\n%s", mcptest.Text(res))
	}
}

func (m *mcpStdio) expire(t *testing.T) {
	ctx := context.Background()
	// A gateway of its own, whose requests expire soon: nobody
	// decides, and the call says so.
	short := startMCPDaemon(t, mcpShortApprovalWait)
	cs, _, _ := startMCP(t, short.socket)
	res, err := cs.CallTool(ctx, execParams(map[string]any{"target": "box-call", "command": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if a := mcptest.Structured[api.Action](t, res); !res.IsError || a.Outcome != sshexec.Expired {
		t.Errorf("expire: isError %v, %+v", res.IsError, a)
	}
}

// mcpCancelCase cancels a call to command on target once its action
// reaches the state until.
type mcpCancelCase struct {
	name    string
	target  string
	command string
	until   api.State
}

var mcpCancelCases = []mcpCancelCase{
	{"cancel while waiting for a reviewer", "box-call", "touch /tmp/never", api.StateWaitingApproval},
	{"cancel while the command runs", "box-run", "echo started; sleep 30", api.StateRunning},
}

func (m *mcpStdio) cancel(t *testing.T, tt mcpCancelCase) {
	m.events.Reset()
	cctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := m.cs.CallTool(cctx, execParams(map[string]any{"target": tt.target, "command": tt.command}))
		errc <- err
	}()
	requested := m.events.Wait(t, api.StateRequested)
	m.events.Wait(t, tt.until)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool: %v, want context.Canceled", err)
	}
	f := m.d.waitAudit(t, "action.finished", requested.ActionID, "")
	if f["outcome"] != "cancelled" {
		t.Errorf("audited outcome %v (%v), want cancelled", f["outcome"], f["detail"])
	}
}

func (m *mcpStdio) badArguments(t *testing.T) {
	ctx := context.Background()
	res, err := m.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"target": "box-run", "timeout_s": "ten"}})
	if err != nil || !res.IsError {
		t.Errorf("bad arguments: %v, isError %v", err, res != nil && res.IsError)
	}
	_, err = m.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_shell", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Errorf("unknown tool: %v, want a JSON-RPC error", err)
	}
}

func (m *mcpStdio) closeSession(t *testing.T) {
	m.cs.Close()
	m.d.waitAudit(t, "run.ended", "", m.first.RunID)
}

func (m *mcpStdio) typeScript(t *testing.T) {
	airlock, _ := binaries(t)
	cmd := mcptest.Client(t, "stdio", airlock, "mcp")
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+m.d.socket)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.d.approveRun(t, "hello-from-typescript")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	checkTypeScriptSteps(t, mcptest.Steps(t, out.Bytes()))
}

// checkTypeScriptSteps checks what the TypeScript client saw; the HTTP
// test in package gateway checks the same steps.
func checkTypeScriptSteps(t *testing.T, steps map[string]json.RawMessage) {
	t.Helper()
	exec := mcptest.Step(t, steps, "exec")
	var a api.Action
	json.Unmarshal(exec.Structured, &a)
	if exec.IsError || exec.Thrown || a.Stdout != "hello-from-typescript\n" || a.Stderr != "to-stderr\n" {
		t.Errorf("exec: %+v", exec)
	}
	if !slices.ContainsFunc(exec.Progress, func(m string) bool { return strings.Contains(m, "a human is being asked") }) {
		t.Errorf("no progress while waiting for the reviewer: %q", exec.Progress)
	}
	if r := mcptest.Step(t, steps, "exec_failing"); !r.IsError || r.Thrown {
		t.Errorf("exit 3: %+v", r)
	}
	if r := mcptest.Step(t, steps, "get_action"); r.IsError || r.Thrown || !strings.Contains(string(r.Structured), a.ID) {
		t.Errorf("get_action: %+v", r)
	}
	if r := mcptest.Step(t, steps, "list_targets"); r.IsError || !strings.Contains(string(r.Structured), `"box-run"`) {
		t.Errorf("list_targets: %+v", r)
	}
	if r := mcptest.Step(t, steps, "bad_arguments"); !r.IsError && !r.Thrown {
		t.Errorf("bad arguments: %+v", r)
	}
	if r := mcptest.Step(t, steps, "unknown_tool"); !r.Thrown && !r.IsError {
		t.Errorf("unknown tool: %+v", r)
	}
	mcptest.CheckAgentContract(t, steps)
	if _, ok := steps["closed"]; !ok {
		t.Error("the client did not close cleanly")
	}
}

// approveRun approves the pending run approval whose first command
// contains marker (an earlier cancelled call may still be pending).
func (d *daemon) approveRun(t *testing.T, marker string) {
	t.Helper()
	testkit.Eventually(t, func() bool {
		for _, a := range d.pending(1) {
			if a.Kind == "run" && strings.Contains(a.Command, marker) {
				if _, errs, code := d.cli("approvals", "approve", a.ID); code != 0 {
					t.Fatalf("approve: %s", errs)
				}
				return true
			}
		}
		return false
	}, "no run approval for %q appeared", marker)
}

func TestMCPStdioWithoutAGateway(t *testing.T) {
	t.Parallel()
	socket := filepath.Join(t.TempDir(), "run", "airlock.sock")
	cs, _, stderr := startMCP(t, socket)
	ctx := context.Background()
	for _, call := range []*sdk.CallToolParams{
		{Name: "ssh_exec", Arguments: map[string]any{"target": "box", "command": "true"}},
		{Name: "list_targets", Arguments: map[string]any{}},
		{Name: "get_action", Arguments: map[string]any{"action_id": "act_x"}},
	} {
		res, err := cs.CallTool(ctx, call)
		if err != nil {
			t.Fatalf("%s: %v, want a tool error result", call.Name, err)
		}
		if !res.IsError || !strings.Contains(mcptest.Text(res), "not running") {
			t.Errorf("%s: isError %v, text %q; want an error saying the gateway is not running", call.Name, res.IsError, mcptest.Text(res))
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("the server did not survive: %v", err)
	}
	// Logs go to stderr; stdout carries only the protocol (or the session
	// above would have broken).
	if !strings.Contains(stderr.String(), "no gateway yet") {
		t.Errorf("stderr: %q", stderr.String())
	}
}

// TestMCPFileTools: ssh_put sends a file of the session's transfer
// directory and ssh_get saves one there, each one approved action whose
// bytes never enter the result; paths outside the directory, links and
// existing files are refused.
func TestMCPFileTools(t *testing.T) {
	t.Parallel()
	d := startMCPDaemon(t, mcpApprovalTimeout)
	data := t.TempDir()
	cs := mcpWithFiles(t, d.socket, data)
	ctx := context.Background()
	root := filepath.Join(data, "airlock", "files")
	if st, err := os.Stat(root); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the transfer directory: %v %v", st, err)
	}
	secret := "do not leak me " + strings.Repeat("x", 40) + "\n"
	os.WriteFile(filepath.Join(root, "app.yml"), []byte(secret), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	remote := filepath.Join(sshtest.WritableDir(t), "app.yml")

	call := func(name string, args map[string]any) *sdk.CallToolResult {
		t.Helper()
		done := make(chan *sdk.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			done <- res
		}()
		// Approve what asks (box-call: every call), until the call ends.
		for {
			select {
			case res := <-done:
				return res
			case <-time.After(100 * time.Millisecond):
			}
			out, _, _ := d.cli("approvals", "list", "--json")
			var list []api.Approval
			json.Unmarshal([]byte(out), &list)
			for _, a := range list {
				d.cli("approvals", "approve", a.ID)
			}
		}
	}
	res := call("ssh_put", map[string]any{"target": "box-call", "local_path": "app.yml", "path": remote, "mode": "0640"})
	if res == nil || res.IsError {
		t.Fatalf("ssh_put: %s", mcptest.Text(res))
	}
	if b, _ := os.ReadFile(remote); string(b) != secret {
		t.Fatalf("the target's file: %q", b)
	}
	if strings.Contains(mcptest.Text(res), "do not leak me") {
		t.Errorf("the put's result holds the file: %s", mcptest.Text(res))
	}
	res = call("ssh_get", map[string]any{"target": "box-call", "path": remote, "local_path": "back/app.yml"})
	if res == nil || res.IsError || !strings.Contains(mcptest.Text(res), "local_path back/app.yml") || strings.Contains(mcptest.Text(res), "do not leak me") {
		t.Fatalf("ssh_get: %s", mcptest.Text(res))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "back", "app.yml")); string(b) != secret {
		t.Fatalf("the saved file: %q", b)
	}
	// Refused before anything is asked: outside the directory, through a
	// link, over an existing file.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"ssh_put", map[string]any{"target": "box-call", "local_path": "../app.yml", "path": remote}},
		{"ssh_put", map[string]any{"target": "box-call", "local_path": "/etc/passwd", "path": remote}},
		{"ssh_put", map[string]any{"target": "box-call", "local_path": "link", "path": remote}},
		{"ssh_get", map[string]any{"target": "box-call", "path": remote, "local_path": "app.yml"}},
		{"ssh_get", map[string]any{"target": "box-call", "path": remote, "local_path": "link/x"}},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || !res.IsError {
			t.Errorf("%s %v: %v %s", c.tool, c.args, err, mcptest.Text(res))
		}
	}
	if b, _ := os.ReadFile("/etc/passwd"); len(b) == 0 {
		t.Fatal("cannot check /etc/passwd")
	}
}
