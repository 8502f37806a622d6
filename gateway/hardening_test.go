package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec"
)

// fromAddress is an HTTP client whose connections come from ip (any
// 127.0.0.0/8 address reaches the loopback listener): another client
// address, as the gateway sees it.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: testkit.Patience}
}

// postLogin sends one POST /v1/login and returns its status.
func postLogin(t *testing.T, c *http.Client, base, name, password string) int {
	t.Helper()
	body, _ := json.Marshal(api.LoginRequest{Reviewer: name, Password: password})
	res, err := c.Post(base+"/v1/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestHostileLoginFloodIsBoundedInTheAuditLog: a sustained flood of failed
// logins from many addresses, with a new name each time (long names
// included), adds a bounded number of small entries to the audit log,
// which is never pruned.
func TestHostileLoginFloodIsBoundedInTheAuditLog(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	before := len(g.auditEntries("auth.failed", ""))
	name := func(n int) string {
		b := make([]byte, n)
		rand.Read(b)
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[int(b[i])%36]
		}
		return string(b)
	}
	huge := strings.Repeat("x", 200<<10)
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var attempts sync.Mutex
	total := 0
	for i := range 40 {
		c := fromAddress(fmt.Sprintf("127.0.1.%d", i+1))
		wg.Go(func() {
			for n := 0; time.Now().Before(stop); n++ {
				who := name(64)
				if n%3 == 0 {
					who = huge + name(8)
				}
				postLogin(t, c, g.base, who, "guess")
				attempts.Lock()
				total++
				attempts.Unlock()
			}
		})
	}
	wg.Wait()
	es := g.auditEntries("auth.failed", "")[before:]
	t.Logf("%d login attempts from 40 addresses in 3 s: %d auth.failed entries", total, len(es))
	if len(es) > 60 {
		t.Errorf("%d auth.failed entries in a minute's window, want at most 60", len(es))
	}
	size := 0
	for _, e := range es {
		b, _ := json.Marshal(e.Fields)
		size += len(b)
		if s, _ := e.Fields["subject"].(string); len(s) > 100 {
			t.Errorf("an auth.failed subject of %d bytes: %.80q…", len(s), s)
		}
	}
	if size > 60*300 {
		t.Errorf("the flood added %d bytes of fields to the audit log", size)
	}
}

// Who asks over HTTP is proved, never named: no run without an agent
// token, no name of the caller's choosing; the requester is the agent's
// subject, and an agent's name is checked when it is issued.
func TestRemoteRunsNeedAnAgentToken(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	var ae *api.Error
	if _, err := api.NewHTTPClient(g.base, "").CreateRun(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(ae.Err.Message, "airlock agent add") {
		t.Errorf("an anonymous run: %v, want 401 naming airlock agent add", err)
	}
	bot := g.agentClient(t, "ci-bot.v2_x")
	if err := bot.Do(ctx, http.MethodPost, "/v1/runs", map[string]string{"name": "root"}, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("a run naming itself: %v, want 400", err)
	}
	run, err := bot.CreateRun(ctx)
	if err != nil || !regexp.MustCompile(`^agent:ci-bot\.v2_x/agt_[0-9a-f]{32}$`).MatchString(run.Requester) {
		t.Errorf("requester %q, %v", run.Requester, err)
	}
	for _, name := range []string{"ci-bot\u202eexe.sh", strings.Repeat("a", 65), "two words", "ci/bot"} {
		if _, err := g.srv.eng.Admin().AddAgent(ctx, name, nil, 0); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("agent name %.20q…: %v, want invalid", name, err)
		}
	}
	// A wrong or revoked agent token creates nothing, and is counted.
	wrong := api.NewHTTPClient(g.base, "airlock_agent_0123456789abcdef0123456789abcdef_"+strings.Repeat("A", 43))
	if _, err := wrong.CreateRun(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("a wrong agent token: %v, want 401", err)
	}
	if _, err := g.srv.eng.Admin().RevokeAgent(ctx, "ci-bot.v2_x", "operator:test"); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.CreateRun(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("a revoked agent token: %v, want 401", err)
	}
}

// An agent's limits bind its runs whatever a reviewer approves: an action
// elsewhere is rejected and no reviewer is asked.
func TestAgentLimitsBindItsRuns(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	ctx := context.Background()
	a, err := g.srv.eng.Admin().AddAgent(ctx, "limited", []string{"box-run"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	run, err := api.NewHTTPClient(g.base, a.Token).CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agent := api.NewHTTPClient(g.base, run.Token)
	out, err := agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "id"}, api.Events{})
	if err != nil || out.Outcome != sshexec.Rejected || !strings.Contains(out.Detail, "do not cover this target or account") {
		t.Fatalf("outside its limits: %v %+v", err, out)
	}
	if pending, _ := g.reviewer.Approvals(ctx, "pending"); len(pending) != 0 {
		t.Errorf("a reviewer was asked about an action outside the agent's limits: %+v", pending)
	}
	done := make(chan *api.Action, 1)
	go func() {
		a, _ := agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo inside"}, api.Events{})
		done <- a
	}()
	g.decideNext("run", "approve", "")
	if a := <-done; a == nil || !a.Success() || a.Stdout != "inside\n" {
		t.Errorf("inside its limits: %+v", a)
	}
	if _, err := g.srv.eng.Admin().AddAgent(ctx, "nowhere", []string{"no-such-box"}, 0); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("a limit naming no target: %v", err)
	}
}

// The engine keeps no action's output in memory: a finished action holds
// metadata, and its output is read from the output store when asked for —
// also for an action rebuilt from the audit log (after a restart, or once
// it left memory), which so no longer answers with empty output.
func TestOutputIsReadFromTheStore(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "printf 'from the store'; printf 'and err' >&2"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || r.a.Stdout != "from the store" || r.a.Stderr != "and err" {
		t.Fatalf("the action's answer: %+v %v", r.a, r.err)
	}
	held, err := g.srv.eng.Actions().Action(context.Background(), r.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap := held.Snapshot(); snap.Stdout != "" || snap.Stderr != "" || snap.StdoutBytes != 14 {
		t.Errorf("the engine holds %q/%q (%d bytes), want no output and its size", snap.Stdout, snap.Stderr, snap.StdoutBytes)
	}
	got, err := g.agent.Action(context.Background(), r.a.ID)
	if err != nil || got.Stdout != "from the store" || got.Stderr != "and err" {
		t.Errorf("GET in memory: %+v %v", got, err)
	}

	// After a restart the action comes back from the audit log, with its
	// output.
	cfg := g.cfg
	g.stop()
	g2 := runGateway(t, cfg, gwOptions{})
	again, err := g2.reviewer.Action(context.Background(), r.a.ID)
	if err != nil || again.Stdout != "from the store" || again.Stderr != "and err" || again.StdoutTruncated {
		t.Errorf("GET after a restart: %+v %v", again, err)
	}
}

// A reviewer reading output through the API is recorded, as on the pages:
// GET of an action with output, and following its events. When the record
// cannot be made, the output is withheld (503).
func TestReviewerAPIReadsAreAudited(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	refuseReads := &atomic.Bool{}
	g := startGateway(t, s, gwOptions{options: func(o *Options) {
		o.auditWrap = func(a engine.Appender) engine.Appender {
			return failingAudit{a, func(e auditchain.Entry) bool { return e.Kind == auditchain.KindOutputRead && refuseReads.Load() }}
		}
	}})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo reviewed"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v", r.a, r.err)
	}
	id := (<-g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo read by a reviewer"})).a.ID
	reads := func() []auditEntry { return g.auditEntries("output.read", id) }

	got, err := g.reviewer.Action(context.Background(), id)
	if err != nil || got.Stdout != "read by a reviewer\n" {
		t.Fatalf("reviewer GET: %+v %v", got, err)
	}
	if rs := reads(); len(rs) != 1 || rs[0].Fields["reviewer"] != testReviewer || rs[0].Fields["via"] != "api" {
		t.Errorf("output.read after a reviewer's GET: %+v", rs)
	}
	// The agent reading its own action is not a reviewer's read.
	if _, err := g.agent.Action(context.Background(), id); err != nil || len(reads()) != 1 {
		t.Errorf("the agent's GET: %v, %d output.read entries", err, len(reads()))
	}
	// Following the events (of a finished action: the stream ends at once).
	resp := g.reviewerEvents(t, id)
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(stream), "read by a reviewer") {
		t.Errorf("the event stream: %s", stream)
	}
	if rs := reads(); len(rs) != 2 || rs[1].Fields["via"] != "api-events" {
		t.Errorf("output.read after following the events: %+v", rs)
	}
	// No record, no output.
	refuseReads.Store(true)
	_, err = g.reviewer.Action(context.Background(), id)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Errorf("reviewer GET with the audit log refusing: %v, want 503", err)
	}
}

// Requests waiting for a decision are capped per run and per requester
// (approval.max_pending_per_run, max_pending_per_requester): one past a
// cap ends rejected at once with a detail that says which cap, and no
// reviewer is asked. A decision makes room again.
func TestPendingRequestsAreCapped(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{mutate: func(c *config.Config) {
		c.Approval.MaxPendingPerRun, c.Approval.MaxPendingPerRequester = 2, 3
	}})
	ctx := context.Background()
	pending := func(want int) []api.Approval {
		t.Helper()
		var ps []api.Approval
		testkit.EventuallyErr(t, func() (err error) {
			if ps, err = g.reviewer.Approvals(ctx, "pending"); err != nil {
				return testkit.Stop(err)
			}
			if len(ps) != want {
				return fmt.Errorf("%d pending requests, want %d", len(ps), want)
			}
			return nil
		}, "the pending requests")
		return ps
	}
	type result struct {
		a   *api.Action
		err error
	}
	start := func(c *api.Client, cmd string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			a, err := c.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: cmd}, api.Events{})
			ch <- result{a, err}
		}()
		return ch
	}
	refused := func(c *api.Client, cap string) {
		t.Helper()
		a, err := c.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "echo one too many"}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, cap) || !strings.Contains(a.Detail, "waiting for a decision") {
			t.Fatalf("past the cap: %s %q %v, want rejected naming %s", a.Outcome, a.Detail, err, cap)
		}
	}

	// Runs of one agent token share a requester (agent:ci-bot/agt_…).
	bot := g.agentClient(t, "ci-bot")
	newRun := func() (*api.Client, *api.Run) {
		t.Helper()
		run, err := bot.CreateRun(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return api.NewHTTPClient(g.base, run.Token), run
	}
	first, firstRun := newRun()
	var waiting []<-chan result
	for i := range 2 {
		waiting = append(waiting, start(first, fmt.Sprintf("echo first %d", i)))
		pending(i + 1)
	}
	refused(first, "approval.max_pending_per_run")
	// The same caller's second run: one more fits under the requester's
	// cap, then none.
	second, _ := newRun()
	waiting = append(waiting, start(second, "echo second"))
	pending(3)
	refused(second, "approval.max_pending_per_requester")
	// Another requester is not affected.
	other, _ := g.remoteAgent("other-bot")
	waiting = append(waiting, start(other, "echo other"))
	ps := pending(4)

	// A decision on the first run's request makes room in it; then
	// everything is denied to end the test.
	for _, p := range ps {
		if p.RunID == firstRun.ID {
			if _, err := g.reviewer.Decide(ctx, p.ID, api.DecisionRequest{Decision: api.DecisionDeny, Reason: "enough", Digest: p.Digest}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	pending(3)
	waiting = append(waiting, start(first, "echo after a decision"))
	for _, p := range pending(4) {
		if _, err := g.reviewer.Decide(ctx, p.ID, api.DecisionRequest{Decision: api.DecisionDeny, Reason: "enough", Digest: p.Digest}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range waiting {
		if r := <-ch; r.err != nil || r.a.Outcome != sshexec.Denied {
			t.Errorf("a request within the caps: %s %q %v, want denied", r.a.Outcome, r.a.Detail, r.err)
		}
	}
}

// A reviewer following an action's events is a watcher: a stream the
// reviewer does not read never holds the agent's command back (the
// agent's own stream does, by design), and it still ends with the result.
func TestReviewerStreamNeverHoldsTheAgentBack(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	dir, err := os.MkdirTemp("", "airlock-gate-") // where the target's user can look
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	gate := filepath.Join(dir, "go")
	ids := make(chan string, 1)
	done := make(chan actionResult, 1)
	go func() {
		a, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", TimeoutS: 120,
			Command: "while [ ! -e " + gate + " ]; do sleep 0.1; done; seq 1 3000000"},
			api.Events{State: func(s api.StateEvent) {
				if s.ActionID != "" {
					select {
					case ids <- s.ActionID:
					default:
					}
				}
			}})
		done <- actionResult{a, err, nil}
	}()
	g.decideNext("run", "approve", "")
	id := <-ids
	resp := g.reviewerEvents(t, id)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reviewer's stream: %s", resp.Status)
	}
	// The reviewer's stream is open and read slowly: 40 KB/s, at which the
	// 22 MB the command writes would take minutes, past the action's
	// deadline, if the stream held it back. (A reader that stops for good
	// is cut by the write timeout, which is another matter.) Now the
	// output comes.
	last, fast := make(chan string, 1), make(chan struct{})
	go func() {
		var ev string
		api.ReadEvents(&slowReader{r: resp.Body, fast: fast}, func(event string, _ []byte) error { ev = event; return nil })
		last <- ev
	}()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The action's own deadline (120 s) bounds the wait: held back by
	// the unread stream, it would end timed_out, not exited. (Patience,
	// a minute, is too short for 22 MB through the race detector on a
	// machine whose cores are busy.)
	var r actionResult
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the agent's action did not end within its own deadline")
	}
	if r.err != nil || !r.a.Success() || r.a.StdoutBytes != 22888896 {
		t.Fatalf("the agent's action: %v %+v", r.err, r.a)
	}
	close(fast) // the result is one large event: read it at once
	if ev := <-last; ev != "finished" {
		t.Errorf("the reviewer's stream ended with %q, want the result", ev)
	}
}

// slowReader reads at most 4 KiB each 100 ms — a reviewer's page on a
// slow link, much slower than a command's output — until fast is closed.
type slowReader struct {
	r    io.Reader
	fast <-chan struct{}
}

func (s *slowReader) Read(p []byte) (int, error) {
	select {
	case <-s.fast:
		return s.r.Read(p)
	case <-time.After(100 * time.Millisecond):
		return s.r.Read(p[:min(len(p), 4096)])
	}
}

// A request refused for a field's size is recorded with a bounded prefix
// of it, and answered with one: a 5 MiB reason or target cannot fill the
// audit log or the memory that keeps recent actions.
func TestHugeFieldsAreClippedInRecords(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	for _, req := range []api.ActionRequest{
		{Target: "box-run", Command: "id", Reason: strings.Repeat("R", 5<<20)},
		{Target: strings.Repeat("t", 5<<20), Command: "id"},
		{Target: "box-run", Command: strings.Repeat("c", 1<<20)},
	} {
		a, err := g.agent.RunAction(context.Background(), req, api.Events{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Outcome != sshexec.Rejected || len(a.Reason)+len(a.Target)+len(a.Command)+len(a.Detail) > 64<<10 {
			t.Errorf("%s: reason %d, target %d, command %d, detail %d bytes", a.Outcome, len(a.Reason), len(a.Target), len(a.Command), len(a.Detail))
		}
		for _, e := range g.auditEntries("action.requested", a.ID) {
			for name, v := range e.Fields {
				if s, ok := v.(string); ok && len(s) > 64<<10 {
					t.Errorf("action.requested %s holds %d bytes", name, len(s))
				}
			}
		}
	}
}

// reviewerEvents opens a reviewer's event stream of action id.
func (g *testGateway) reviewerEvents(t *testing.T, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/actions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+reviewerToken(t, g))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Only what an agent or the CLI sends reaches the API: a Host the gateway
// does not answer for (DNS rebinding) is refused on every route, and a
// browser's cross-site request or a body that is not JSON on /v1 — what a
// page on another site could send — creates nothing and counts nothing.
func TestRebindingAndCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{})
	send := func(method, path, body string, header map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, g.base+path, strings.NewReader(body))
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	a, err := g.srv.eng.Admin().AddAgent(context.Background(), "rebind-test", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	agentToken := a.Token
	runsBefore, err := g.reviewer.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j := "application/json"
	for _, tt := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
	}{
		{"rebinding: create a run", "POST", "/v1/runs", "{}", map[string]string{"Host": "rebind.attacker.example:7422", "Content-Type": j}, http.StatusMisdirectedRequest},
		{"rebinding: the pages", "GET", "/ui/login", "", map[string]string{"Host": "rebind.attacker.example"}, http.StatusMisdirectedRequest},
		{"rebinding: health", "GET", "/healthz", "", map[string]string{"Host": "localhost.attacker.example"}, http.StatusMisdirectedRequest},
		{"cross-site text/plain POST, empty", "POST", "/v1/runs", "", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site JSON POST", "POST", "/v1/runs", "{}", map[string]string{"Content-Type": j, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"same-site but another origin", "POST", "/v1/login", "{}", map[string]string{"Content-Type": j, "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"a form, no browser headers", "POST", "/v1/runs", "name=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"an empty body without a type", "POST", "/v1/runs", "", nil, http.StatusUnsupportedMediaType},
		{"the agent's own request", "POST", "/v1/runs", "{}", map[string]string{"Content-Type": j, "Authorization": "Bearer " + agentToken}, http.StatusCreated},
		{"localhost by name", "GET", "/healthz", "", map[string]string{"Host": "LOCALHOST:7422"}, http.StatusOK},
	} {
		if resp := send(tt.method, tt.path, tt.body, tt.header); resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
	}
	runs, err := g.reviewer.Runs(context.Background())
	if err != nil || len(runs) != len(runsBefore)+1 {
		t.Errorf("runs: %d before, %d after, want one more (the agent's own): %v", len(runsBefore), len(runs), err)
	}
}

// A reviewer linked to an agent (reviewer "alice" { agents = [...] })
// cannot approve its runs: the page and the API refuse, nothing runs.
func TestLinkedReviewerCannotApproveHerAgent(t *testing.T) {
	t.Parallel()
	g := startGateway(t, sharedSSHD(t), gwOptions{extraConfig: "reviewer \"" + testReviewer + "\" {\n  agents = [\"alices-bot\"]\n}\n"})
	ctx := context.Background()
	c, _ := g.remoteAgent("alices-bot")
	res := make(chan *api.Action, 1)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		a, _ := c.RunAction(actx, api.ActionRequest{Target: "box-run", Command: "echo must not run"}, api.Events{})
		res <- a
	}()
	pending := g.waitPending(1)
	_, err := g.reviewer.Decide(ctx, pending[0].ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: pending[0].Digest})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("alice approving her own agent's run: %v, want 403", err)
	}
	cancel()
	if a := <-res; a != nil && a.Outcome != sshexec.Cancelled {
		t.Errorf("the action: %s %q, want cancelled (never approved)", a.Outcome, a.Detail)
	}
}
