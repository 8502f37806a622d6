package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec"
)

// pendingBackend is a gateway whose action waits for a reviewer until the
// test decides, as a real one does; it records whether the action was
// cancelled.
type pendingBackend struct {
	fakeBackend
	decide    chan struct{}
	cancelled chan struct{}
	waiting   *api.Action
}

func newPendingBackend() *pendingBackend {
	waiting := &api.Action{ID: "act_held", RunID: "run_0123456789abcdef0123456789abcdef", Target: "box", Account: "deploy", Command: "rm -f x",
		TimeoutS: 60, State: api.StateWaitingApproval, Approval: api.ApprovalInfo{Mode: api.ModeCall, ID: "apr_held", Why: "destructive: rm -f x"}}
	b := &pendingBackend{decide: make(chan struct{}), cancelled: make(chan struct{}), waiting: waiting}
	b.actions = map[string]*api.Action{waiting.ID: waiting}
	b.run = func(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
		ev.State(api.StateEvent{State: api.StateRequested, ActionID: waiting.ID})
		ev.State(api.StateEvent{State: api.StateWaitingApproval, ApprovalID: "apr_held", Kind: "call", Message: "waiting for a reviewer to approve this call; destructive: rm -f x"})
		select {
		case <-b.decide:
		case <-ctx.Done():
			close(b.cancelled)
			return nil, ctx.Err()
		}
		done := finished(sshexec.Exited, exitCode(0))
		done.ID = waiting.ID
		b.mu.Lock()
		b.actions[waiting.ID] = done
		b.mu.Unlock()
		return done, nil
	}
	return b
}

// Without wait_s, ssh_exec answers by max_wait with the action waiting for
// its reviewer — why, its id, how to follow it — and the action goes on:
// the call is over, so nothing the host does to it reaches the action.
func TestExecAnswersByMaxWaitAndTheActionGoesOn(t *testing.T) {
	t.Parallel()
	b := newPendingBackend()
	cs, _ := connect(t, b, mcp.Options{MaxWait: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ToolExec, Arguments: map[string]any{"target": "box", "command": "rm -f x"}})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // as a host whose timeout fires after the answer
	got := mcptest.Structured[mcp.ActionResult](t, res)
	text := mcptest.Text(res)
	if res.IsError || got.ID != "act_held" || got.State != api.StateWaitingApproval || got.Outcome.Valid() || got.Approval.Why != "destructive: rm -f x" {
		t.Errorf("result: isError %v, %+v", res.IsError, got)
	}
	if want := (&mcp.Follow{Tool: "get_action", ActionID: "act_held", WaitS: 1}); got.Follow == nil || *got.Follow != *want {
		t.Errorf("follow = %+v, want %+v", got.Follow, want)
	}
	for _, want := range []string{"act_held", "waiting for a human reviewer (approval apr_held) because: destructive: rm -f x", `get_action, action_id "act_held"`} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	decideAndFollow(t, b, cs, "action")
	select {
	case <-b.cancelled:
		t.Error("the action was cancelled")
	default:
	}
}

// A page of stored output comes alone, with the arguments of the next
// page: not the action's output again.
func TestGetActionPageIsOnlyThePage(t *testing.T) {
	t.Parallel()
	a := finished(sshexec.Exited, exitCode(0))
	a.Stdout, a.StdoutBytes = strings.Repeat("x", 40000), 40000
	b := &pagedBackend{fakeBackend: fakeBackend{actions: map[string]*api.Action{a.ID: a}}, data: a.Stdout}
	cs, _ := connect(t, b, mcp.Options{})
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGetAction,
		Arguments: map[string]any{"action_id": a.ID, "stream": "stdout", "offset": 100, "limit": 50}})
	if err != nil || res.IsError {
		t.Fatalf("get_action: %v %s", err, mcptest.Text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var fields map[string]json.RawMessage
	json.Unmarshal(raw, &fields)
	for _, f := range []string{"stdout", "stdout_tail", "stderr", "command", "approval"} {
		if _, ok := fields[f]; ok {
			t.Errorf("the page's structured content repeats %s: %s", f, raw)
		}
	}
	got := mcptest.Structured[mcp.PageResult](t, res)
	if got.Page == nil || got.Page.Offset != 100 || got.Page.Bytes != 50 || got.NextPage == nil ||
		*got.NextPage != (mcp.PageArgs{ActionID: a.ID, Stream: "stdout", Offset: 150, Limit: 50}) {
		t.Errorf("page result %+v (next %+v)", got, got.NextPage)
	}
	if text := mcptest.Text(res); len(text) > 400 || !strings.Contains(text, "offset 150 and limit 50") {
		t.Errorf("page text (%d bytes):\n%s", len(text), text)
	}
}

// pagedBackend serves pages of one stored stream.
type pagedBackend struct {
	fakeBackend
	data string
}

func (p *pagedBackend) Output(ctx context.Context, id, stream string, offset, limit int64) (*api.OutputPage, error) {
	end := min(offset+limit, int64(len(p.data)))
	pg := &api.OutputPage{ActionID: id, Stream: stream, Offset: offset, Bytes: end - offset, Data: p.data[offset:end], Total: int64(len(p.data))}
	if end < int64(len(p.data)) {
		pg.NextOffset = &end
	}
	return pg, nil
}

// heldFilesBackend is pendingBackend with the file tools' part: what a
// get fetches is the text given.
type heldFilesBackend struct {
	*pendingBackend
	content string
}

func (*heldFilesBackend) Upload(context.Context, io.Reader, int64) (*api.Upload, error) {
	return nil, errors.New("the fake takes no uploads")
}

func (h *heldFilesBackend) Fetch(_ context.Context, _ *api.Action, w io.Writer) (int64, error) {
	n, err := io.WriteString(w, h.content)
	return int64(n), err
}

// An ssh_get answered in flight saves its file once the action succeeds,
// and get_action says so.
func TestHeldGetSavesItsFileWhenItSucceeds(t *testing.T) {
	t.Parallel()
	b := &heldFilesBackend{pendingBackend: newPendingBackend(), content: "listen 80\n"}
	root := t.TempDir()
	cs, _ := connect(t, b, mcp.Options{MaxWait: 50 * time.Millisecond, FileRoot: root})
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGet,
		Arguments: map[string]any{"target": "box", "path": "/etc/app.conf", "local_path": "got/app.conf"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.Structured[mcp.FileResult](t, res); res.IsError || got.State != api.StateWaitingApproval || got.LocalPath != "" ||
		!strings.Contains(mcptest.Text(res), "once the get succeeds, the file is saved to local_path got/app.conf") {
		t.Errorf("held get: isError %v, %+v\n%s", res.IsError, got, mcptest.Text(res))
	}
	if _, err := os.Stat(filepath.Join(root, "got", "app.conf")); err == nil {
		t.Fatal("the file was saved before the get succeeded")
	}
	close(b.decide)
	// The fake's get_action does not wait: ask until the action is done.
	testkit.EventuallyErr(t, func() error {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGetAction, Arguments: map[string]any{"action_id": "act_held"}})
		if err != nil || !strings.Contains(mcptest.Text(res), "the file was saved to local_path got/app.conf") {
			return fmt.Errorf("get_action: %v\n%s", err, mcptest.Text(res))
		}
		return nil
	}, "get_action to report the saved file")
	if b, err := os.ReadFile(filepath.Join(root, "got", "app.conf")); err != nil || string(b) != "listen 80\n" {
		t.Errorf("saved file: %q, %v", b, err)
	}
}

// A get answered in flight whose action could not be followed to its end
// saves nothing, and get_action says so and what to do.
func TestHeldGetThatCannotBeFollowedSaysSo(t *testing.T) {
	t.Parallel()
	b := &heldFilesBackend{pendingBackend: newPendingBackend(), content: "listen 80\n"}
	follow := b.run
	b.run = func(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
		if _, err := follow(ctx, req, ev); err != nil {
			return nil, err
		}
		return nil, errors.New("the gateway stopped answering")
	}
	root := t.TempDir()
	cs, _ := connect(t, b, mcp.Options{MaxWait: 50 * time.Millisecond, FileRoot: root})
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGet,
		Arguments: map[string]any{"target": "box", "path": "/etc/app.conf", "local_path": "app.conf"}})
	if err != nil || res.IsError {
		t.Fatalf("held get: %v %s", err, mcptest.Text(res))
	}
	close(b.decide)
	want := "the get could not be followed to its end (the gateway stopped answering), so nothing was saved to local_path app.conf"
	testkit.EventuallyErr(t, func() error {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGetAction, Arguments: map[string]any{"action_id": "act_held"}})
		if err != nil || !strings.Contains(mcptest.Text(res), want) {
			return fmt.Errorf("get_action: %v\n%s", err, mcptest.Text(res))
		}
		return nil
	}, "get_action to say the file was not saved")
	if _, err := os.Stat(filepath.Join(root, "app.conf")); err == nil {
		t.Error("a file was saved")
	}
}

// uploadingBackend is pendingBackend that takes the put's upload.
type uploadingBackend struct {
	*pendingBackend
	got chan string
}

func (u *uploadingBackend) Upload(_ context.Context, r io.Reader, size int64) (*api.Upload, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	u.got <- string(b)
	return &api.Upload{ID: "upl_held", Size: size, SHA256: "00", ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (*uploadingBackend) Fetch(context.Context, *api.Action, io.Writer) (int64, error) {
	return 0, errors.New("the fake serves no gets")
}

// Without wait_s, ssh_put answers by max_wait with the action waiting for
// its reviewer, like ssh_exec, and the put goes on once approved.
func TestHeldPutAnswersByMaxWait(t *testing.T) {
	t.Parallel()
	b := &uploadingBackend{pendingBackend: newPendingBackend(), got: make(chan string, 1)}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "app.conf"), []byte("listen 80\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, _ := connect(t, b, mcp.Options{MaxWait: 50 * time.Millisecond, FileRoot: root})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ToolPut,
		Arguments: map[string]any{"target": "box", "local_path": "app.conf", "path": "/etc/app.conf"}})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // as a host whose timeout fires after the answer
	if got := <-b.got; got != "listen 80\n" {
		t.Errorf("uploaded %q", got)
	}
	got := mcptest.Structured[mcp.FileResult](t, res)
	if res.IsError || got.ID != "act_held" || got.State != api.StateWaitingApproval || got.Outcome.Valid() {
		t.Errorf("held put: isError %v, %+v\n%s", res.IsError, got, mcptest.Text(res))
	}
	if text := mcptest.Text(res); !strings.Contains(text, `get_action, action_id "act_held"`) {
		t.Errorf("the held put does not say how to follow it:\n%s", text)
	}
	decideAndFollow(t, b.pendingBackend, cs, "put")
}

// decideAndFollow checks that the held action of b was not cancelled with
// the call that answered, lets the reviewer decide, and follows it with
// get_action until it succeeded.
func decideAndFollow(t *testing.T, b *pendingBackend, cs *sdk.ClientSession, what string) {
	t.Helper()
	select {
	case <-b.cancelled:
		t.Fatalf("the %s was cancelled with the call that answered", what)
	default:
	}
	close(b.decide)
	testkit.EventuallyErr(t, func() error {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: mcp.ToolGetAction, Arguments: map[string]any{"action_id": "act_held"}})
		if err != nil {
			return err
		}
		if a := mcptest.Structured[mcp.ActionResult](t, res); !a.Success() || a.Follow != nil {
			return fmt.Errorf("get_action: %+v", a)
		}
		return nil
	}, "the held %s to finish", what)
}
