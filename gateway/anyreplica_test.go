package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaIDOf is the replica id g logged when it joined.
func replicaIDOf(t *testing.T, g *testGateway) string {
	t.Helper()
	m := regexp.MustCompile(`joined the replicas: replica=(\S+)`).FindStringSubmatch(g.logs.String())
	if m == nil {
		t.Fatalf("no replica id in the log: %s", g.logs.String())
	}
	return m[1]
}

// remoteRunOnTwoReplicas starts replicas A and B on one database and a
// remote run of agent name whose first action, command through A, a
// reviewer approves: it returns the replicas, the run's token and that
// action.
func remoteRunOnTwoReplicas(t *testing.T, name, command string) (a, b *testGateway, token string, first *api.Action) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	a = startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	b = addReplica(t, a)
	run, err := a.agentClient(t, name).CreateRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan actionResult, 1)
	go func() {
		ac, err := api.NewHTTPClient(a.base, run.Token).RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: command}, api.Events{})
		ch <- actionResult{a: ac, err: err}
	}()
	a.decideNext("run", "approve", "")
	r := <-ch
	if r.err != nil || !r.a.Success() {
		t.Fatalf("the first action through A: %+v %v", r.a, r.err)
	}
	return a, b, run.Token, r.a
}

// A remote agent's actions are read through any replica: one finished
// through A is found through B with its output; one running on A is
// shown through B as running there, and B's event stream ends with its
// outcome once A records it. Another agent's run gets the same not found
// for that action as for one that does not exist.
func TestPostgresActionThroughAnyReplica(t *testing.T) {
	t.Parallel()
	a, b, token, first := remoteRunOnTwoReplicas(t, "ci-agent", "echo done-on-a; echo err-on-a >&2")
	viaA, viaB := api.NewHTTPClient(a.base, token), api.NewHTTPClient(b.base, token)
	ctx := context.Background()

	// Finished through A, read through B with its output.
	got, err := viaB.Action(ctx, first.ID)
	if err != nil || got.Outcome != sshexec.Exited || got.Stdout != "done-on-a\n" || got.Stderr != "err-on-a\n" || got.Replica != "" {
		t.Fatalf("A's finished action through B: %+v %v", got, err)
	}

	// Another agent's run learns nothing of it: the answer is the one
	// for an id that does not exist.
	other, err := b.agentClient(t, "other-agent").CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otherB := api.NewHTTPClient(b.base, other.Token)
	_, errTheirs := otherB.Action(ctx, first.ID)
	_, errNone := otherB.Action(ctx, "act_doesnotexist")
	var theirs, none *api.Error
	if !errors.As(errTheirs, &theirs) || !errors.As(errNone, &none) || theirs.Err.Code != api.CodeNotFound || theirs.Status != none.Status ||
		strings.ReplaceAll(theirs.Err.Message, first.ID, "ID") != strings.ReplaceAll(none.Err.Message, "act_doesnotexist", "ID") {
		t.Errorf("another run's read of the action: %v; of none: %v; want the same not found", errTheirs, errNone)
	}
	if _, err := otherB.WaitAction(ctx, first.ID, api.Events{}); !errors.As(err, &theirs) || theirs.Err.Code != api.CodeNotFound {
		t.Errorf("another run's events of the action: %v, want not found", err)
	}

	// Running on A, followed through B.
	id, err := viaA.StartAction(ctx, api.ActionRequest{Target: "box-run", Command: "sleep 2; echo late-on-a"})
	if err != nil {
		t.Fatal(err)
	}
	// (A answers before it records the request: B knows the action once
	// it is in the log.)
	var running *api.Action
	testkit.EventuallyErr(t, func() error {
		if running, err = viaB.Action(ctx, id); err != nil {
			return err
		}
		if running.Outcome.Valid() {
			return testkit.Stop(fmt.Errorf("the action finished before it was seen running: %+v", running))
		}
		if running.State != api.StateRunning {
			return fmt.Errorf("state %s", running.State)
		}
		return nil
	}, "B to show A's action running")
	if want := replicaIDOf(t, a); running.Replica != want {
		t.Errorf("the running action through B names replica %q, want A's %q", running.Replica, want)
	}
	// A reviewer on B cannot stop it there, and is told where it runs
	// (not that it finished).
	if _, err := b.reviewer.CancelAction(ctx, id, "from b"); err == nil || !strings.Contains(err.Error(), "runs on the gateway replica "+running.Replica) {
		t.Errorf("cancel through B of A's running action: %v", err)
	}
	var states []api.State
	final, err := viaB.WaitAction(ctx, id, api.Events{State: func(s api.StateEvent) { states = append(states, s.State) }})
	if err != nil || final.Outcome != sshexec.Exited || final.Stdout != "late-on-a\n" || final.Replica != "" {
		t.Fatalf("following A's action through B: %+v %v", final, err)
	}
	if len(states) == 0 || states[0] != api.StateRunning {
		t.Errorf("states through B: %v, want running first", states)
	}
	if got, err := viaB.Action(ctx, id); err != nil || got.Outcome != sshexec.Exited || got.Stdout != "late-on-a\n" {
		t.Errorf("A's action read through B after it finished: %+v %v", got, err)
	}
}

// A local agent's run made through replica A's socket: its action is read
// through replica B's socket on the same host (the same process space),
// which checks the caller against the run's anchor.
func TestPostgresLocalActionThroughOtherReplica(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	a := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: storageBlock(dsn)})
	b := addReplica(t, a)
	res := a.runAsync(api.ActionRequest{Target: "box-run", Command: "echo local-on-a"})
	a.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() {
		t.Fatalf("the action through A: %+v %v", r.a, r.err)
	}
	got, err := b.agent.Action(context.Background(), r.a.ID)
	if err != nil || got.Outcome != sshexec.Exited || got.Stdout != "local-on-a\n" || got.RunID != r.a.RunID {
		t.Fatalf("A's local action through B's socket: %+v %v", got, err)
	}
}

// MCP's get_action through another replica: a session on B with the
// run's token follows an action running on A (wait_s) to its outcome.
func TestPostgresMCPGetActionThroughAnyReplica(t *testing.T) {
	t.Parallel()
	a, b, token, _ := remoteRunOnTwoReplicas(t, "mcp-agent", "true")
	viaA := api.NewHTTPClient(a.base, token)
	ctx := context.Background()
	id, err := viaA.StartAction(ctx, api.ActionRequest{Target: "box-run", Command: "sleep 2; echo mcp-late"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, func() error {
		got, err := viaA.Action(ctx, id)
		if err == nil && got.State != api.StateRunning {
			err = fmt.Errorf("state %s", got.State)
		}
		return err
	}, "the action to run on A")

	cs, err := sdk.NewClient(&sdk.Implementation{Name: "airlock-test", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   b.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_action", Arguments: map[string]any{"action_id": id, "wait_s": 60}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mcptest.Structured[api.Action](t, res); res.IsError || got.Outcome != sshexec.Exited || got.Stdout != "mcp-late\n" {
		t.Errorf("get_action through B of A's running action: %+v\n%s", got, mcptest.Text(res))
	}
}
