package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/web/webtest"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// remoteProbe is a command that runs for a minute on the target and then
// leaves a marker: the shell and its sleep write their pids where the test
// reads them, so that the test can tell the command started, and that it
// is gone (and never got to the marker) once the action was cancelled.
type remoteProbe struct {
	t   testing.TB
	dir string
}

func newRemoteProbe(t testing.TB) *remoteProbe {
	dir, err := os.MkdirTemp("", "airlock-endrun-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777) // the remote account writes here
	return &remoteProbe{t: t, dir: dir}
}

// command runs `sleep 60; touch marker`, with the pids written first.
func (p *remoteProbe) command() string {
	return fmt.Sprintf("echo $$ > %[1]s/shell; sleep 60 & echo $! > %[1]s/sleep; wait; touch %[1]s/marker", p.dir)
}

// pids are the remote shell's and its sleep's, once both are written.
func (p *remoteProbe) pids() []int {
	var out []int
	for _, f := range []string{"shell", "sleep"} {
		b, _ := os.ReadFile(filepath.Join(p.dir, f))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// waitRunning waits until the remote command runs.
func (p *remoteProbe) waitRunning() {
	p.t.Helper()
	testkit.Eventually(p.t, func() bool { return len(p.pids()) == 2 }, "the remote command never started")
}

// checkGone checks that the remote processes are gone and the marker was
// never made.
func (p *remoteProbe) checkGone() {
	p.t.Helper()
	for _, pid := range p.pids() {
		testkit.Eventually(p.t, func() bool { return !sshtest.ProcessAlive(pid) }, "remote process %d outlived the cancel", pid)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "marker")); err == nil {
		p.t.Error("the cancelled command went on to make its marker")
	}
}

// checkCancelled checks an action's outcome: cancelled, its end confirmed,
// the detail starting with why.
func checkCancelled(t testing.TB, a *api.Action, why string) {
	t.Helper()
	if a == nil || a.Outcome != sshexec.Cancelled || a.Termination != sshexec.Confirmed || !strings.HasPrefix(a.Detail, why) {
		t.Fatalf("got %+v, want cancelled, confirmed, detail starting %q", a, why)
	}
	if a.NextStep == nil || a.NextStep.Retry != api.RetryNo {
		t.Errorf("next step after a stop: %+v, want no retry", a.NextStep)
	}
}

// checkStoppedRecord checks action.finished of id: cancelled, and why.
func (g *testGateway) checkStoppedRecord(id, why, by string) {
	g.t.Helper()
	fin := g.auditEntries("action.finished", id)
	if len(fin) != 1 {
		g.t.Fatalf("%d action.finished entries for %s, want 1", len(fin), id)
	}
	f := fin[0].Fields
	if f["outcome"] != "cancelled" || f["stopped_why"] != why || (by != "" && f["stopped_by"] != by) {
		g.t.Errorf("action.finished of %s: %v, want cancelled and stopped {why %s, by %s}", id, fin[0].Fields, why, by)
	}
	g.verifyAudit()
}

// approvedRun starts a first action in g's local run and approves the run.
func (g *testGateway) approvedRun() string {
	g.t.Helper()
	first := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	r := <-first
	if r.err != nil || r.a.Outcome != sshexec.Exited {
		g.t.Fatalf("first action: %+v %v", r.a, r.err)
	}
	return r.a.RunID
}

func TestRevokedRunCancelsItsRunningAction(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	run := g.approvedRun()
	p := newRemoteProbe(t)
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: p.command()})
	p.waitRunning()
	var ended api.Run
	if err := g.reviewer.Do(context.Background(), http.MethodDelete, "/v1/runs/"+run+"?reason="+url.QueryEscape("wrong box"), nil, &ended); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkCancelled(t, r.a, "the run ended: revoked by "+testReviewer+": wrong box")
	p.checkGone()
	g.checkStoppedRecord(r.a.ID, "run_ended", testReviewer)
}

func TestRevokedAgentTokenCancelsItsRunsAction(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	run, err := g.agentClient(t, "ci-bot").CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc := api.NewHTTPClient(g.base, run.Token)
	p := newRemoteProbe(t)
	res := make(chan actionResult, 1)
	go func() {
		a, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: p.command()}, api.Events{})
		res <- actionResult{a: a, err: err}
	}()
	g.decideNext("run", "approve", "")
	p.waitRunning()
	if _, err := g.srv.eng.Admin().RevokeAgent(ctx, "ci-bot", "operator"); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkCancelled(t, r.a, "the run ended: its agent token was revoked by operator")
	p.checkGone()
	g.checkStoppedRecord(r.a.ID, "run_ended", "operator")
	if got, err := g.srv.eng.Runs().Get(ctx, run.ID); err != nil || got.EndReason != "agent_revoked" {
		t.Errorf("the run after its token was revoked: %+v %v, want ended agent_revoked", got.Run, err)
	}
}

// actionIDLine is airlock-ssh's last line for an outcome other than exited.
var actionIDLine = regexp.MustCompile(`\(action (act_[a-z0-9]+)\)`)

func TestAnchorKilledCancelsItsRunningAction(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	p := newRemoteProbe(t)
	// airlock run is the run's anchor; airlock-ssh, its child, asks for
	// the action and waits for it.
	anchor := exec.Command(gatewaytest.Binary(t, "airlock"), "run", "--", gatewaytest.Binary(t, "airlock-ssh"), "box-run", "--", p.command())
	anchor.Env = append(os.Environ(), "AIRLOCK_SOCKET="+g.cfg.Listen.Socket)
	var stdout, stderr bytes.Buffer
	anchor.Stdout, anchor.Stderr = &stdout, &stderr
	if err := anchor.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { anchor.Process.Kill() })
	g.decideNext("run", "approve", "")
	p.waitRunning()
	if err := anchor.Process.Kill(); err != nil { // SIGKILL: nothing of it says goodbye
		t.Fatal(err)
	}
	anchor.Wait() // and its output pipes, which airlock-ssh holds until it ends
	m := actionIDLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("airlock-ssh said no action id; stderr: %s", stderr.String())
	}
	a, err := g.reviewer.Action(context.Background(), m[1])
	if err != nil {
		t.Fatal(err)
	}
	checkCancelled(t, a, "the run ended: its agent process exited")
	if !strings.Contains(stderr.String(), "cancelled: the run ended: its agent process exited") {
		t.Errorf("airlock-ssh's stderr does not say why: %s", stderr.String())
	}
	p.checkGone()
	g.checkStoppedRecord(a.ID, "run_ended", "")
}

func TestReviewerCancelsOneActionFromTheCLI(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	run := g.approvedRun()
	p := newRemoteProbe(t)
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: p.command()})
	p.waitRunning()
	id := g.actionOfRunInFlight(run)
	// The body is decoded strictly, the reason bounded; neither stops it.
	var ae *api.Error
	for _, body := range []any{map[string]any{"reason": "x", "why": "y"}, api.CancelRequest{Reason: strings.Repeat("x", api.MaxReason+1)}} {
		if err := g.reviewer.Do(context.Background(), http.MethodPost, "/v1/actions/"+id+"/cancel", body, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("cancel with %v: %v, want 400", body, err)
		}
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(testkit.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := exec.Command(gatewaytest.Binary(t, "airlock"), "actions", "cancel", "--url", g.base, "--reviewer", testReviewer, "--reason", "runs too long", id)
	cli.Env = append(os.Environ(), "AIRLOCK_PASSWORD_FILE="+pw)
	out, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(out), id+": cancelled: cancelled by reviewer "+testReviewer+": runs too long") {
		t.Fatalf("airlock actions cancel: %v: %s", err, out)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkCancelled(t, r.a, "cancelled by reviewer "+testReviewer+": runs too long")
	p.checkGone()
	g.checkStoppedRecord(id, "reviewer", testReviewer)
	// The run goes on: a reviewer stopped one action, not the run.
	next := <-g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	if next.err != nil || next.a.Outcome != sshexec.Exited {
		t.Errorf("the next action of the run: %+v %v, want exited", next.a, next.err)
	}
	// Cancelling it again finds nothing to cancel.
	if _, err := g.reviewer.CancelAction(context.Background(), id, ""); !errors.As(err, &ae) || ae.Err.Code != api.CodeConflict {
		t.Errorf("cancelling a finished action: %v, want a conflict", err)
	}
}

// actionOfRunInFlight is the id of the one action of run in flight.
func (g *testGateway) actionOfRunInFlight(run string) string {
	g.t.Helper()
	var id string
	testkit.Eventually(g.t, func() bool {
		for _, a := range g.srv.eng.Actions().Recent() {
			if a.RunID == run && a.State == api.StateRunning {
				id = a.ID
				return true
			}
		}
		return false
	}, "no action of run %s is running", run)
	return id
}

// BenchmarkRunEndCancels measures how long a running action takes to end
// once its run is revoked: from `DELETE /v1/runs/{id}` (airlock runs end)
// to the action's recorded cancelled outcome, with the remote command's
// end confirmed. Each iteration is one run with one running command.
func BenchmarkRunEndCancels(b *testing.B) {
	g := startGateway(b, sharedSSHD(b), gwOptions{})
	ctx := context.Background()
	ac := g.agentClient(b, "bench-bot")
	var total time.Duration
	for b.Loop() {
		run, err := ac.CreateRun(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rc := api.NewHTTPClient(g.base, run.Token)
		p := newRemoteProbe(b)
		res := make(chan actionResult, 1)
		go func() {
			a, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: p.command()}, api.Events{})
			res <- actionResult{a: a, err: err}
		}()
		g.decideNext("run", "approve", "")
		p.waitRunning()
		start := time.Now()
		if err := g.reviewer.Do(ctx, http.MethodDelete, "/v1/runs/"+run.ID, nil, nil); err != nil {
			b.Fatal(err)
		}
		r := <-res
		total += time.Since(start)
		if r.err != nil || r.a.Outcome != sshexec.Cancelled || r.a.Termination != sshexec.Confirmed {
			b.Fatalf("%+v %v", r.a, r.err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/end-to-cancelled")
}

func TestReviewerCancelsOneActionFromThePage(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	browser := webtest.Browser(t)
	tab := webtest.Tab(t, browser)
	run := g.approvedRun()
	p := newRemoteProbe(t)
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: p.command()})
	p.waitRunning()
	id := g.actionOfRunInFlight(run)
	// A form without the session's CSRF token changes nothing.
	resp, err := uiClient(t, g.base).PostForm(g.base+"/ui/actions/"+id+"/cancel", url.Values{"reason": {"forged"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cancel without a CSRF token: %s, want 403", resp.Status)
	}
	if err := webtest.Login(tab, g.base, testReviewer, testkit.Password); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(g.base+"/ui/actions/"+id), chromedp.WaitVisible(chromedp.ID("cancel-action")),
		chromedp.SendKeys(chromedp.CSS(`.cancel-form input[name=reason]`), "not now"),
		chromedp.Click(chromedp.ID("cancel-action"))); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `document.getElementById('flash') && document.getElementById('flash').textContent.includes('Cancelled action')`, testkit.Patience); err != nil {
		t.Fatal(err)
	}
	page, err := webtest.Eval[string](tab, `document.querySelector('dl.facts').textContent`)
	if err != nil || !strings.Contains(page, "cancelled by reviewer "+testReviewer+": not now") || !strings.Contains(page, "termination: confirmed") {
		t.Errorf("the action's page after the cancel: %q %v", page, err)
	}
	if n, err := webtest.Eval[int](tab, `document.querySelectorAll('#cancel-action').length`); err != nil || n != 0 {
		t.Errorf("a finished action still offers Cancel: %d %v", n, err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkCancelled(t, r.a, "cancelled by reviewer "+testReviewer+": not now")
	p.checkGone()
	g.checkStoppedRecord(id, "reviewer", testReviewer)
}
