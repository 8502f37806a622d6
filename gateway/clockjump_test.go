package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/web"
)

// Setting the system clock back while the gateway runs neither lengthens
// an approved run nor damages the audit log. The fake clock drives
// approvals and audit entry times; it moves wall and elapsed time
// separately.
func TestClockSetBackDoesNotLengthenRun(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }})
	ctx := context.Background()
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("first action: %+v %v", r.a, r.err)
	}
	clk.Jump(-3 * time.Hour)
	clk.Advance(config.DefaultRunTTL - time.Second)
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo still"}, api.Events{})
	if err != nil || !a.Success() {
		t.Fatalf("action within the run's hour: %+v %v", a, err)
	}
	// By the wall clock three hours remain; by elapsed time, none: the
	// next action runs only if a reviewer renews the run.
	clk.Advance(time.Second)
	late := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo too late"})
	if ap := g.decideNext("run", "deny", "not again"); ap.Renews == "" {
		t.Errorf("the action after the run's hour asked %+v; want a renewal of the run", ap)
	}
	r := <-late
	if r.err != nil {
		t.Fatal(r.err)
	}
	if a := r.a; a.Outcome != sshexec.Denied || a.StartedAt != nil {
		t.Fatalf("action after the run's hour: %+v, want it asked for a renewal and denied before start", a)
	}
	rep := g.verifyAudit()
	if rep.TimeSetBack == nil || rep.TimeSetBack.Largest < 2*time.Hour {
		t.Errorf("verify: time_set_back = %+v, want the clock's step back noted", rep.TimeSetBack)
	}
	// The reviewer page's verification says so too.
	rv, _, err := web.NewEngineBackend(g.srv.eng.Review(), g.srv.eng.Runs(), g.srv.eng.Audit()).Login(ctx, testReviewer, testkit.Password, "", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := web.NewEngineBackend(g.srv.eng.Review(), g.srv.eng.Runs(), g.srv.eng.Audit()).VerifyAudit(ctx, rv)
	if err != nil || !v.Intact || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "system clock was set back") {
		t.Errorf("page verification: intact %v, notes %q, %v", v.Intact, v.Notes, err)
	}
}

// A remote run's token reads nothing once it is past its lifetime, and
// nothing once a reviewer revoked its run; before that, the agent reads
// its actions, refused ones and those of a run it ended included.
func TestRunTokenReadsEndWithItsLifetimeOrRevocation(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }})
	ctx := context.Background()
	newRun := func() (*api.Client, *api.Run, *api.Action) {
		run, err := g.agentClient(t, "test-agent").CreateRun(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rc := api.NewHTTPClient(g.base, run.Token)
		a, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Account: "nobody", Command: "true"}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || a.RunID != run.ID {
			t.Fatalf("refused request: %+v %v", a, err)
		}
		if _, err := rc.Action(ctx, a.ID); err != nil {
			t.Fatalf("reading it back: %v", err)
		}
		return rc, run, a
	}
	status := func(err error) int {
		var ae *api.Error
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}

	revoked, run, a := newRun()
	rv := g.reviewer
	if err := rv.EndRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := revoked.Action(ctx, a.ID); err == nil {
		t.Errorf("a revoked run's token still reads its action: %+v", got)
	}

	expiring, _, b := newRun()
	clk.Advance(config.DefaultMaxRunTTL) // the token's lifetime, by default
	if _, err := expiring.Action(ctx, b.ID); status(err) != http.StatusUnauthorized {
		t.Errorf("an expired token reading its action: %v, want 401", err)
	}
	if _, err := expiring.Targets(ctx); status(err) != http.StatusUnauthorized {
		t.Errorf("an expired token listing targets: %v, want 401", err)
	}
}
