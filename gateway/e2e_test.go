package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/httpapi"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// tailPolicySize is what output = "tail" returns of each stream.
const tailPolicySize = 64 << 10

const testReviewer = "alice"

// testGateway is a running gateway for one test.
type testGateway struct {
	t        testing.TB
	srv      *Server
	cfg      *config.Config
	cancel   context.CancelFunc
	done     chan error
	agent    *api.Client               // over the local socket
	base     string                    // HTTP base URL
	httpc    *http.Client              // trusts the listener's certificate
	reviewer *api.Client               // logged in as testReviewer
	logs     *gatewaytest.LockedBuffer // everything the gateway logged
}

type gwOptions struct {
	extraConfig string
	hostKeyLine string // overrides the pinned host key of every target
	options     func(*Options)
	mutate      func(*config.Config)
	// clientKey is the credential's key file (default: the sshd's own
	// client key). Tests that count logins use a key of their own, so
	// that parallel tests on the shared sshd do not disturb the count.
	clientKey string
	// tls serves HTTP over TLS with these files (its CA, for
	// client_ca_file, may be empty).
	tls *tlsFiles
}

// tlsFiles are a listener's TLS certificate and key, and the CA of the
// client certificates it accepts.
type tlsFiles struct{ cert, key, clientCA string }

// startGateway writes a configuration for the sshd s with targets
// "box-run" (run mode), "box-call" (call mode), "box-tail" and "box-none"
// (output policies), starts the gateway and logs a reviewer in.
func startGateway(t testing.TB, s *sshtest.SSHD, o gwOptions) *testGateway {
	t.Helper()
	dir := t.TempDir()
	clientKey := o.clientKey
	if clientKey == "" {
		clientKey = s.ClientKeyFile
	}
	var hostKey any = s.CurrentHostKey()
	if o.hostKeyLine != "" {
		hostKey = o.hostKeyLine
	}
	c := gatewaytest.Config{StateDir: filepath.Join(dir, "state"), HTTP: "127.0.0.1:0", ApprovalTimeout: "20s",
		Credentials: map[string]string{"key": clientKey}, Extra: o.extraConfig}
	if o.tls != nil {
		c.TLSCert, c.TLSKey, c.ClientCAFile = o.tls.cert, o.tls.key, o.tls.clientCA
	}
	for _, tg := range []struct{ name, mode, output string }{
		{"box-run", "run", "full"}, {"box-call", "call", "full"}, {"box-tail", "run", "tail"}, {"box-none", "run", "none"},
	} {
		c.Targets = append(c.Targets, gatewaytest.Target{Name: tg.name, Address: s.Addr, HostKey: hostKey,
			Accounts: []gatewaytest.Account{{Name: s.User, Credential: "key", Approval: tg.mode, MaxTimeout: "2m", Output: tg.output}}})
	}
	cfgFile := c.Write(t, dir)
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if o.mutate != nil {
		o.mutate(cfg)
	}
	return runGateway(t, cfg, o)
}

// addReviewer adds a reviewer to the state database offline, as
// `airlock reviewer add` does.
func addReviewer(t testing.TB, cfg *config.Config, name, password string) {
	t.Helper()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var acc *approvals.Accounts
	db, err := engine.OpenStorage(context.Background(), cfg)
	if err == nil && db != nil {
		defer db.Close()
		acc, err = approvals.OpenAccountsDB(context.Background(), db, approvals.DefaultArgon2)
	} else if err == nil {
		acc, err = approvals.OpenAccounts(context.Background(), filepath.Join(cfg.StateDir, "state.db"), approvals.DefaultArgon2)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	if err := acc.Add(context.Background(), name, approvals.NewSecret(password), "test"); err != nil && !errors.Is(err, approvals.ErrReviewerExists) {
		t.Fatal(err)
	}
}

func runGateway(t testing.TB, cfg *config.Config, o gwOptions) *testGateway {
	t.Helper()
	logs := &gatewaytest.LockedBuffer{}
	opts := Options{Config: cfg, Logger: hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(testWriter{t}, logs), Level: hclog.Trace}), ShutdownGrace: 5 * time.Second}
	if _, bench := t.(*testing.B); bench {
		opts.Logger = nil
	}
	if o.options != nil {
		o.options(&opts)
	}
	ctx := context.Background()
	addReviewer(t, cfg, testReviewer, testkit.Password)
	srv, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	g := &testGateway{t: t, srv: srv, cfg: cfg, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { g.done <- srv.Serve(sctx) }()
	select {
	case <-srv.Ready():
	case err := <-g.done:
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(g.stop)
	ctl, err := api.ReadControl(cfg.Listen.Socket)
	if err != nil {
		t.Fatal(err)
	}
	g.agent = api.NewLocalClient(cfg.Listen.Socket, ctl.Token)
	g.base, g.httpc = "http://"+srv.HTTPAddr(), http.DefaultClient
	if cfg.Listen.TLSCert != "" {
		g.base, g.httpc = "https://"+srv.HTTPAddr(), tlsClient(t, cfg.Listen.TLSCert, nil)
	}
	login, err := api.NewHTTPClient(g.base, "").WithHTTP(g.httpc).Login(ctx, testReviewer, testkit.Password)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	g.reviewer = api.NewHTTPClient(g.base, login.Token).WithHTTP(g.httpc)
	return g
}

func (g *testGateway) stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	g.cancel = nil
	if err := <-g.done; err != nil {
		g.t.Errorf("Serve: %v", err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// decideNext waits for one pending approval and decides it.
func (g *testGateway) decideNext(kind, decision, reason string) api.Approval {
	g.t.Helper()
	return g.decideNextWith(kind, api.DecisionRequest{Decision: api.Decision(decision), Reason: reason})
}

// decideNextWith waits for one pending approval and decides it with d
// (bound to the digest it read).
func (g *testGateway) decideNextWith(kind string, d api.DecisionRequest) api.Approval {
	g.t.Helper()
	a := g.waitPending(1)[0]
	if string(a.Kind) != kind {
		g.t.Fatalf("pending approval is a %s, want a %s", a.Kind, kind)
	}
	d.Digest = a.Digest
	if _, err := g.reviewer.Decide(context.Background(), a.ID, d); err != nil {
		g.t.Fatalf("decide: %v", err)
	}
	return a
}

// runAsync starts an action and returns a channel with its result.
func (g *testGateway) runAsync(req api.ActionRequest) <-chan actionResult {
	ch := make(chan actionResult, 1)
	go func() {
		var waits []api.StateEvent
		var mu sync.Mutex
		a, err := g.agent.RunAction(context.Background(), req, api.Events{State: func(s api.StateEvent) {
			mu.Lock()
			waits = append(waits, s)
			mu.Unlock()
		}})
		ch <- actionResult{a, err, waits}
	}()
	return ch
}

type actionResult struct {
	a      *api.Action
	err    error
	states []api.StateEvent
}

func (g *testGateway) verifyAudit() *auditchain.Report {
	g.t.Helper()
	rep, err := g.srv.eng.Audit().Verify(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	if !rep.Intact() {
		g.t.Fatalf("audit chain damaged: %+v", rep.First())
	}
	return rep
}

// auditEntry is an entry as GET /v1/audit/entries gives it.
type auditEntry struct {
	Kind     string         `json:"kind"`
	ActionID string         `json:"action_id"`
	Fields   map[string]any `json:"fields"`
}

// auditEntries reads the whole audit log through the reviewer API, the
// entries of kind (all when "") and, when actionID is set, of that action.
func (g *testGateway) auditEntries(kind, actionID string) []auditEntry {
	g.t.Helper()
	raw, err := g.reviewer.AuditEntries(context.Background(), -1)
	if err != nil {
		g.t.Fatal(err)
	}
	var all, out []auditEntry
	if err := json.Unmarshal(raw, &all); err != nil {
		g.t.Fatal(err)
	}
	for _, e := range all {
		if (kind == "" || e.Kind == kind) && (actionID == "" || e.ActionID == actionID) {
			out = append(out, e)
		}
	}
	return out
}

func TestRunApprovalThenActionsPass(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo hello; echo oops >&2"})
	ap := g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.a.Success() || r.a.Stdout != "hello\n" || r.a.Stderr != "oops\n" {
		t.Fatalf("action: %+v", r.a)
	}
	if r.a.Approval.Mode != "run" || r.a.Approval.ID != ap.ID || r.a.Approval.DecidedBy != testReviewer {
		t.Errorf("approval info %+v, want run approval %s by %s", r.a.Approval, ap.ID, testReviewer)
	}
	sawWait := false
	for _, st := range r.states {
		if st.State == api.StateWaitingApproval && st.ApprovalID == ap.ID {
			sawWait = true
		}
	}
	if !sawWait {
		t.Errorf("no waiting_approval event with the approval id; events %+v", r.states)
	}
	// The approved run's next actions pass without asking.
	for i := range 3 {
		a, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: fmt.Sprintf("exit %d", i)}, api.Events{})
		if err != nil || a.Outcome != sshexec.Exited || *a.ExitCode != i {
			t.Fatalf("action %d: %+v %v", i, a, err)
		}
	}
	if p, _ := g.reviewer.Approvals(context.Background(), "pending"); len(p) != 0 {
		t.Errorf("approved run raised %d more requests", len(p))
	}
	// The action object is readable by the agent and the reviewer.
	for _, c := range []*api.Client{g.agent, g.reviewer} {
		got, err := c.Action(context.Background(), r.a.ID)
		if err != nil || got.Outcome != sshexec.Exited || got.Stdout != "hello\n" {
			t.Errorf("GET action: %+v %v", got, err)
		}
	}
	rep := g.verifyAudit()
	if rep.Entries < 10 {
		t.Errorf("only %d audit entries", rep.Entries)
	}
}

func TestCallModeAsksEveryTime(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	for i, decision := range []string{"approve", "approve", "deny"} {
		res := g.runAsync(api.ActionRequest{Target: "box-call", Command: fmt.Sprintf("echo call %d", i)})
		ap := g.decideNext("call", decision, "not today")
		if ap.Command != fmt.Sprintf("echo call %d", i) {
			t.Errorf("the reviewer saw %q", ap.Command)
		}
		r := <-res
		if r.err != nil {
			t.Fatal(r.err)
		}
		want := sshexec.Exited
		if decision == "deny" {
			want = sshexec.Denied
		}
		if r.a.Outcome != want {
			t.Fatalf("call %d: outcome %s, want %s (%s)", i, r.a.Outcome, want, r.a.Detail)
		}
		if decision == "deny" && (r.a.Approval.Reason != "not today" || !strings.Contains(api.NextStep(r.a), "not today")) {
			t.Errorf("denial reason not passed on: %+v", r.a.Approval)
		}
		if decision == "deny" {
			// The action's own record says why, for `airlock audit show`.
			es := g.auditEntries("action.finished", r.a.ID)
			if len(es) != 1 || es[0].Fields["approval_reason"] != "not today" || es[0].Fields["outcome"] != "denied" {
				t.Errorf("the denied action's action.finished does not carry the reviewer's reason")
			}
		}
	}
	g.verifyAudit()
}

func TestApprovalTimeoutExpires(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) { c.Approval.Timeout = time.Second }})
	a, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-call", Command: "true"}, api.Events{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != sshexec.Expired || a.Approval.Decision != "expired" {
		t.Fatalf("outcome %s (%s), want expired", a.Outcome, a.Detail)
	}
	g.verifyAudit()
}

func TestHostKeyMismatchDialsButRunsNothing(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	other := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshtest.NewKey().PublicKey())))
	key, accepted := ownClientKey(t, s)
	g := startGateway(t, s, gwOptions{hostKeyLine: other, clientKey: key})
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "touch /tmp/never"})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.HostKeyMismatch {
		t.Fatalf("got %+v %v, want host_key_mismatch", r.a, r.err)
	}
	if !strings.Contains(api.NextStep(r.a), "do not retry") {
		t.Errorf("next step %q does not tell the agent not to retry", api.NextStep(r.a))
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted(); n != 0 {
		t.Errorf("sshd accepted %d logins although the host key was refused", n)
	}
	g.verifyAudit()
}

// failingAudit fails the appends its fail function picks: a full disk,
// for the faults a real one cannot produce on cue.
type failingAudit struct {
	engine.Appender
	fail func(auditchain.Entry) bool
}

func (f failingAudit) Append(ctx context.Context, e auditchain.Entry) (auditchain.Ref, error) {
	if f.fail(e) {
		return auditchain.Ref{}, errors.New("injected: disk full")
	}
	return f.Appender.Append(ctx, e)
}

func TestAuditFailureMeansNothingIsDialed(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	key, accepted := ownClientKey(t, s)
	g := startGateway(t, s, gwOptions{clientKey: key, options: func(o *Options) {
		o.auditWrap = func(a engine.Appender) engine.Appender {
			return failingAudit{a, func(e auditchain.Entry) bool { return e.Kind == auditchain.KindActionConnecting }}
		}
	}})
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "true"})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.AuditUnavailable || r.a.StartedAt != nil {
		t.Fatalf("got %+v %v, want audit_unavailable before start", r.a, r.err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted(); n != 0 {
		t.Errorf("the gateway logged in %d times although the intent was not recorded", n)
	}
}

// An outcome the audit log refuses after the command ran is retried until
// it is recorded — once, with the result the gateway knew — and the agent
// is told the command may have run.
func TestRefusedOutcomeIsRecordedLate(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	fails := &atomic.Int32{}
	fails.Store(3) // the result, the audit_unavailable answer, the first retry
	g := startGateway(t, s, gwOptions{options: func(o *Options) {
		o.auditWrap = func(a engine.Appender) engine.Appender {
			return failingAudit{a, func(e auditchain.Entry) bool { return e.Kind == auditchain.KindActionFinished && fails.Add(-1) >= 0 }}
		}
	}})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo ran; exit 3"})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || r.a.Outcome != sshexec.AuditUnavailable || !strings.Contains(r.a.Detail, "the command may have run (its outcome was exited)") {
		t.Fatalf("got %+v %v, want audit_unavailable saying the command may have run", r.a, r.err)
	}
	var got []auditEntry
	testkit.Poll(testkit.Patience, func() bool {
		got = g.auditEntries("action.finished", r.a.ID)
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("%d action.finished entries for the action, want 1", len(got))
	}
	f := got[0].Fields
	if f["outcome"] != "audit_unavailable" || f["recorded_late"] != true || f["exit_code"] != float64(3) || f["stdout_bytes"] != float64(4) {
		t.Errorf("late entry fields %v, want audit_unavailable, recorded_late, exit_code 3 and the stored stdout", f)
	}
	if n := fails.Load(); n >= 0 {
		t.Errorf("%d injected failures unused", n+1)
	}
	g.verifyAudit()
}

// When the gateway stops while an outcome waits for its retry, it tries
// once more before closing the log.
func TestRefusedOutcomeIsRecordedAtShutdown(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	failing := &atomic.Bool{}
	g := startGateway(t, s, gwOptions{options: func(o *Options) {
		o.auditWrap = func(a engine.Appender) engine.Appender {
			return failingAudit{a, func(e auditchain.Entry) bool { return e.Kind == auditchain.KindActionFinished && failing.Load() }}
		}
	}})
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("first action: %+v %v", r.a, r.err)
	}
	failing.Store(true)
	a, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: "exit 5"}, api.Events{})
	if err != nil || a.Outcome != sshexec.AuditUnavailable {
		t.Fatalf("got %+v %v, want audit_unavailable", a, err)
	}
	failing.Store(false) // room again, but the first retry is a second away
	g.stop()
	rd, err := auditchain.OpenReader(context.Background(), filepath.Join(g.cfg.StateDir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	recs, err := rd.ActionEntries(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []any
	for _, r := range recs {
		if r.Kind == auditchain.KindActionFinished {
			o, _ := r.Field("outcome")
			code, _ := r.Field("exit_code")
			outcomes = append(outcomes, o, code)
		}
	}
	if want := []any{"audit_unavailable", int64(5)}; !cmp.Equal(outcomes, want) {
		t.Errorf("action.finished after the stop: %v, want %v", outcomes, want)
	}
}

func TestOutputPolicies(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	// 100 KiB of output: "tail" returns the last 64 KiB, "none" nothing.
	cmd := "head -c 102400 /dev/zero | tr '\\0' x; echo END"
	res := g.runAsync(api.ActionRequest{Target: "box-tail", Command: cmd})
	g.decideNext("run", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	if len(r.a.Stdout) != tailPolicySize || !strings.HasSuffix(r.a.Stdout, "xEND\n") || !r.a.StdoutTruncated || r.a.StdoutBytes != 102404 {
		t.Errorf("tail: %d bytes returned, truncated %v, counted %d", len(r.a.Stdout), r.a.StdoutTruncated, r.a.StdoutBytes)
	}
	// The run is approved for every run-mode target: no new request.
	r = <-g.runAsync(api.ActionRequest{Target: "box-none", Command: "echo secret-output"})
	if r.err != nil || !r.a.Success() {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	if r.a.Stdout != "" || !r.a.StdoutTruncated || r.a.StdoutBytes != 14 {
		t.Errorf("none: stdout %q truncated %v counted %d", r.a.Stdout, r.a.StdoutTruncated, r.a.StdoutBytes)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	// Transport-level problems: the contract's error envelope.
	for _, tt := range []struct {
		name   string
		body   string
		ctype  string
		status int
	}{
		{"unknown field", `{"target":"box-run","command":"true","host":"10.0.0.1"}`, "application/json", http.StatusBadRequest},
		{"case-variant key", `{"Target":"box-run","command":"true"}`, "application/json", http.StatusBadRequest},
		{"duplicate key", `{"target":"box-run","target":"box-call","command":"true"}`, "application/json", http.StatusBadRequest},
		{"trailing data", `{"target":"box-run","command":"true"} {}`, "application/json", http.StatusBadRequest},
		{"not an object", `["box-run"]`, "application/json", http.StatusBadRequest},
		{"wrong content type", `{"target":"box-run","command":"true"}`, "text/plain", http.StatusUnsupportedMediaType},
		{"oversized", `{"target":"box-run","command":"` + strings.Repeat("a", httpapi.MaxActionBody) + `"}`, "application/json", http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := postRaw(g, tt.body, tt.ctype)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != tt.status {
				t.Fatalf("err = %v, want status %d", err, tt.status)
			}
		})
	}
	// Requests that decode but are not allowed: a rejected action, audited.
	// The detail says what would have been accepted.
	for _, tt := range []struct {
		name   string
		req    api.ActionRequest
		detail string
	}{
		{"unknown target", api.ActionRequest{Target: "10.0.0.1:22", Command: "true"}, `unknown target "10.0.0.1:22" (targets: box-run, box-call, box-tail, box-none)`},
		{"unknown account", api.ActionRequest{Target: "box-run", Account: "root", Command: "true"}, `has no account "root" (accounts: airlock-test)`},
		{"timeout over the cap", api.ActionRequest{Target: "box-run", Command: "true", TimeoutS: 3600}, "over the account's maximum of 120 seconds"},
		{"negative timeout", api.ActionRequest{Target: "box-run", Command: "true", TimeoutS: -5}, "must be positive"},
		{"empty command", api.ActionRequest{Target: "box-run", Command: "  "}, "the command is empty"},
		{"NUL in command", api.ActionRequest{Target: "box-run", Command: "echo a\x00b"}, "NUL"},
		{"huge command", api.ActionRequest{Target: "box-run", Command: strings.Repeat("a", engine.MaxCommandLen+1)}, "byte limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := g.agent.RunAction(ctx, tt.req, api.Events{})
			if err != nil || a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, tt.detail) {
				t.Fatalf("got %+v %v, want a rejected action saying %q", a, err, tt.detail)
			}
		})
	}
	if p, _ := g.reviewer.Approvals(ctx, "pending"); len(p) != 0 {
		t.Errorf("rejected requests raised %d approval requests", len(p))
	}
	g.verifyAudit()
}

func postRaw(g *testGateway, body, ctype string) error {
	req, _ := http.NewRequest(http.MethodPost, "http://airlock.local/v1/actions", strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	ctl, _ := api.ReadControl(g.cfg.Listen.Socket)
	req.Header.Set("Authorization", "Bearer "+ctl.Token)
	c := api.NewLocalClient(g.cfg.Listen.Socket, ctl.Token)
	return c.DoRaw(req)
}

func TestAgentCredentialsNeverReachReviewerEndpoints(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	run, err := g.agentClient(t, "test-agent").CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runClient := api.NewHTTPClient(g.base, run.Token)
	for name, c := range map[string]*api.Client{"local token": g.agent, "run token": runClient} {
		_, err := c.Approvals(ctx, "pending")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Errorf("%s: GET /v1/approvals: err = %v, want 403", name, err)
		}
		_, err = c.Decide(ctx, "apr_00000000000000000000000000000000", api.DecisionRequest{Decision: "approve"})
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Errorf("%s: decision: err = %v, want 403", name, err)
		}
		_, err = c.Runs(ctx)
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Errorf("%s: GET /v1/runs: err = %v, want 403", name, err)
		}
		_, err = c.CancelAction(ctx, "act_aaaaaaaaaaaaaaaa", "")
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Errorf("%s: cancel an action: err = %v, want 403", name, err)
		}
	}
	// No credential at all: 401.
	_, err = api.NewHTTPClient(g.base, "").Approvals(ctx, "pending")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("anonymous: err = %v, want 401", err)
	}
	// A wrong local token: 401.
	_, err = api.NewLocalClient(g.cfg.Listen.Socket, strings.Repeat("0", 32)).Targets(ctx)
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("wrong local token: err = %v, want 401", err)
	}
}
