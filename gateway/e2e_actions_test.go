package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func TestRemoteRunLifecycle(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	run, err := g.agentClient(t, "test-agent").CreateRun(ctx)
	if err != nil || !strings.HasPrefix(run.Token, "airlock_run_") {
		t.Fatalf("create run: %+v %v", run, err)
	}
	if run.TokenExpiresAt == nil || time.Until(*run.TokenExpiresAt) < config.DefaultMaxRunTTL-time.Minute {
		t.Errorf("create run: token_expires_at %v, want about %v from now", run.TokenExpiresAt, config.DefaultMaxRunTTL)
	}
	rc := api.NewHTTPClient(g.base, run.Token)
	ch := make(chan actionResult, 1)
	go func() {
		a, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo remote"}, api.Events{})
		ch <- actionResult{a: a, err: err}
	}()
	g.decideNext("run", "approve", "")
	r := <-ch
	if r.err != nil || r.a.Stdout != "remote\n" || r.a.RunID != run.ID {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	// A refused request still belongs to its run: the agent can read it
	// back, and the audit log places it.
	bad, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Account: "root", Command: "true"}, api.Events{})
	if err != nil || bad.Outcome != sshexec.Rejected || bad.RunID != run.ID {
		t.Fatalf("refused request: %+v %v, want rejected in run %s", bad, err, run.ID)
	}
	if got, err := rc.Action(ctx, bad.ID); err != nil || got.Outcome != sshexec.Rejected {
		t.Errorf("reading the refused action back: %+v %v", got, err)
	}
	if err := rc.EndRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	a, err := rc.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "true"}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected || a.RunID != run.ID {
		t.Fatalf("action of an ended run: %+v %v, want rejected in run %s", a, err, run.ID)
	}
	if got, err := rc.Action(ctx, a.ID); err != nil || got.ID != a.ID {
		t.Errorf("reading an action of the ended run back: %+v %v", got, err)
	}
}

func TestSocketAndControlFileModes(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	for path, want := range map[string]os.FileMode{
		filepath.Dir(g.cfg.Listen.Socket): 0o700,
		g.cfg.Listen.Socket:               0o600,
		filepath.Join(filepath.Dir(g.cfg.Listen.Socket), "control.json"): 0o600,
		g.cfg.StateDir: 0o700,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}
}

func TestRefusesToStartWithWorldWritableSocketDir(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "sockdir", "airlock.sock")
	os.Mkdir(filepath.Dir(sock), 0o700)
	os.Chmod(filepath.Dir(sock), 0o777)
	cfg, err := config.Load(gatewaytest.Config{StateDir: filepath.Join(dir, "state"), NoHTTP: true, Socket: sock,
		Credentials: map[string]string{"key": s.ClientKeyFile},
		Targets:     []gatewaytest.Target{{Name: "box", Address: s.Addr, HostKey: s.HostKey, Accounts: []gatewaytest.Account{{Name: s.User, Credential: "key"}}}},
	}.Write(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(context.Background())
	var ude *securefile.Error
	if !errors.As(err, &ude) || ude.Problem != securefile.WritableByOthers {
		t.Fatalf("Serve: %v, want *securefile.Error for a directory others may write", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(sock), "control.json")); err == nil {
		t.Error("the control file was published in a world-writable directory")
	}
	srv.Close(context.Background())
}

func TestTokenRotationCutsLiveConnections(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	// A live connection: an action waiting for approval.
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "true"})
	g.waitPending(1)
	if err := g.agent.Do(ctx, http.MethodPost, "/v1/token/rotate", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err == nil {
		t.Fatalf("the waiting connection survived the rotation: %+v", r.a)
	}
	// The old token no longer works; the new one does.
	if _, err := g.agent.Targets(ctx); err == nil {
		t.Error("the old token still works")
	}
	ctl, _ := api.ReadControl(g.cfg.Listen.Socket)
	if _, err := api.NewLocalClient(g.cfg.Listen.Socket, ctl.Token).Targets(ctx); err != nil {
		t.Errorf("the new token does not work: %v", err)
	}
}

// waitPending waits until the reviewer sees at least n pending approvals
// and returns them.
func (g *testGateway) waitPending(n int) []api.Approval {
	g.t.Helper()
	var pending []api.Approval
	testkit.EventuallyErr(g.t, func() (err error) {
		if pending, err = g.reviewer.Approvals(context.Background(), "pending"); err == nil && len(pending) < n {
			err = fmt.Errorf("%d pending", len(pending))
		}
		return err
	}, "%d pending approvals to appear", n)
	return pending
}

func TestMaxParallelQueuesWithinTheDeadline(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	key, accepted := ownClientKey(t, s)
	g := startGateway(t, s, gwOptions{clientKey: key, mutate: func(c *config.Config) { c.Targets["box-run"].MaxParallel = 1 }})
	// Approve the run first.
	first := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	if r := <-first; r.err != nil || !r.a.Success() {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	// holding waits until an action started last has logged in: it holds
	// the target's one slot from before its dial to its end.
	holding := func(before int) {
		t.Helper()
		testkit.Eventually(t, func() bool { return accepted() != before }, "the action holding the slot to log in")
	}
	// One slot: the second action waits for the first.
	before := accepted()
	a := g.runAsync(api.ActionRequest{Target: "box-run", Command: "sleep 1"})
	holding(before)
	b := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	ra, rb := <-a, <-b
	if ra.err != nil || rb.err != nil || !ra.a.Success() || !rb.a.Success() {
		t.Fatalf("%+v %v / %+v %v", ra.a, ra.err, rb.a, rb.err)
	}
	if rb.a.StartedAt.Before(*ra.a.FinishedAt) {
		t.Errorf("the second action started at %v, before the first ended at %v", rb.a.StartedAt, ra.a.FinishedAt)
	}
	// Its deadline passing in the queue ends it without dialing. The
	// action holding the slot waits for a file the test writes last, so
	// it outlasts the queued one however slow the machine is.
	release := filepath.Join(os.TempDir(), "airlock-release-"+rand.Text())
	t.Cleanup(func() { os.Remove(release) })
	before = accepted()
	hold := g.runAsync(api.ActionRequest{Target: "box-run", Command: fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", release)})
	holding(before)
	before = accepted()
	short, err := g.agent.RunAction(context.Background(), api.ActionRequest{Target: "box-run", Command: "true", TimeoutS: 1}, api.Events{})
	if err != nil || short.Outcome != sshexec.TimedOut || short.Termination != sshexec.NotStarted {
		t.Fatalf("queued past its deadline: %+v %v, want timed_out/not_started", short, err)
	}
	if short.NextStep == nil || short.NextStep.Retry != api.RetryYes {
		t.Errorf("queued past its deadline, nothing ran: next step %+v, want retry yes", short.NextStep)
	}
	if accepted() != before {
		t.Error("a queued action past its deadline was dialed")
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-hold; r.err != nil || !r.a.Success() {
		t.Errorf("the action holding the slot: %+v %v", r.a, r.err)
	}
}

// TestPerActionCertificate: a credential with ca = true logs in with a
// fresh key and a certificate whose key ID names the action and whose
// serial is its action.requested entry, as the target's sshd logs.
func TestPerActionCertificate(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	dir, state, caFile := gatewayCA(t)
	s := sshtest.NewSSHD(t, sshtest.Options{Config: []string{"TrustedUserCAKeys " + caFile}})
	cfg, err := config.Load(gatewaytest.Config{StateDir: state, HTTP: "127.0.0.1:0", CA: []string{"ca"},
		Targets: []gatewaytest.Target{{Name: "box", Address: s.Addr, HostKey: s.HostKey, Accounts: []gatewaytest.Account{{Name: s.User, Credential: "ca", Approval: "call"}}}},
	}.Write(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	g := runGateway(t, cfg, gwOptions{})
	res := g.runAsync(api.ActionRequest{Target: "box", Command: "echo certified"})
	g.decideNext("call", "approve", "")
	r := <-res
	if r.err != nil || !r.a.Success() || r.a.Stdout != "certified\n" {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	recs, err := g.srv.eng.Audit().Reader().ActionEntries(context.Background(), r.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var requestedSeq int64 = -1
	var keyID string
	var serial int64
	for _, rec := range recs {
		switch rec.Kind {
		case auditchain.KindActionRequested:
			requestedSeq = rec.Seq
		case auditchain.KindActionConnecting:
			v, _ := rec.Field("cert_key_id")
			keyID, _ = v.(string)
			v, _ = rec.Field("cert_serial")
			serial, _ = v.(int64)
		}
	}
	if keyID != "airlock:"+r.a.ID || serial != requestedSeq {
		t.Errorf("action.connecting records key id %q serial %d; want airlock:%s and the action.requested seq %d", keyID, serial, r.a.ID, requestedSeq)
	}
	want := fmt.Sprintf("ID airlock:%s (serial %d)", r.a.ID, requestedSeq)
	if !s.WaitLog(want, testkit.Patience) {
		t.Errorf("sshd did not log %q", want)
	}
}

// TestSecretsNeverLeave: the local token, run tokens, reviewer tokens and
// passwords, and the private key never appear in the gateway's log (at
// trace level), in the audit log, or in API answers.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	ctl, _ := api.ReadControl(g.cfg.Listen.Socket)
	login, err := api.NewHTTPClient(g.base, "").Login(ctx, testReviewer, testkit.Password)
	if err != nil {
		t.Fatal(err)
	}
	run, err := g.agentClient(t, "test-agent").CreateRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Wrong credentials are logged as failures, without the guess.
	api.NewHTTPClient(g.base, "").Login(ctx, testReviewer, "wrong-guess-password")
	api.NewLocalClient(g.cfg.Listen.Socket, "0123456789abcdef0123456789abcdef").Targets(ctx)
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "echo ok"})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("%+v %v", r.a, r.err)
	}
	targets, err := g.reviewer.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := json.Marshal(targets)
	entries, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(s.ClientKeyFile)
	keyBody := strings.Split(string(key), "\n")[1] // a line of the PEM body
	secrets := map[string]string{
		"local token":    ctl.Token,
		"reviewer token": login.Token,
		"run token":      run.Token,
		"password":       testkit.Password,
		"wrong password": "wrong-guess-password",
		"wrong token":    "0123456789abcdef0123456789abcdef",
		"private key":    keyBody,
		"key file path":  s.ClientKeyFile,
	}
	for where, text := range map[string]string{"log": g.logs.String(), "targets": string(tb), "audit": string(entries)} {
		for what, secret := range secrets {
			if (where == "audit" || where == "log") && what == "key file path" {
				continue // the path is configuration, not a secret; only API answers omit it
			}
			if strings.Contains(text, secret) {
				t.Errorf("the %s contains the %s", where, what)
			}
		}
	}
}

// TestCallerGoingAwayCancels: an agent that goes away mid-command (Ctrl-C
// on airlock-ssh) cancels the action; the command is killed and the
// outcome recorded as cancelled, output included.
func TestCallerGoingAwayCancels(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	first := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	<-first
	ctx, cancel := context.WithCancel(context.Background())
	var id string
	var mu sync.Mutex
	_, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "echo started; sleep 30"}, api.Events{
		State: func(s api.StateEvent) {
			mu.Lock()
			if s.ActionID != "" {
				id = s.ActionID
			}
			mu.Unlock()
		},
		Output: func(stream string, p []byte) {
			if strings.Contains(string(p), "started") {
				cancel()
			}
		},
	})
	if err == nil {
		t.Fatal("the cancelled stream returned an action")
	}
	mu.Lock()
	defer mu.Unlock()
	var a *api.Action
	testkit.Poll(testkit.Patience, func() bool {
		a, err = g.reviewer.Action(context.Background(), id)
		return err == nil && a.Outcome.Valid()
	})
	if a == nil || a.Outcome != sshexec.Cancelled || a.Termination != sshexec.Confirmed || a.Stdout != "started\n" {
		t.Fatalf("after the caller went away: %+v %v, want cancelled/confirmed with the output so far", a, err)
	}
	g.verifyAudit()
}

// ownClientKey makes a key only this test uses, authorized on s, and
// returns its file and a function counting the logins sshd accepted with it.
func ownClientKey(t *testing.T, s *sshtest.SSHD) (string, func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "client_ed25519")
	pub, err := sshtest.GenerateKeyFile(file, "ed25519", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Authorize(string(ssh.MarshalAuthorizedKey(pub))); err != nil {
		t.Fatal(err)
	}
	needle := "Accepted publickey for " + s.User + " from "
	fp := ssh.FingerprintSHA256(pub)
	return file, func() int {
		n := 0
		// sshd -e ends its lines with "\r\n".
		for line := range strings.Lines(s.Log()) {
			if line = strings.TrimRight(line, "\r\n"); strings.Contains(line, needle) && strings.HasSuffix(line, fp) {
				n++
			}
		}
		return n
	}
}

// TestFailedCredentialsAreAudited: guessing shows in the audit log — the
// first failure of a caller and the one that blocks it — without the
// guesses, and without one write per guess.
func TestFailedCredentialsAreAudited(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }})
	ctx := context.Background()
	anon := api.NewHTTPClient(g.base, "")
	// 15 guesses at once: 5 checked, 4 held for their slots (1 to 15 s
	// away), the rest refused; then the tenth check blocks the address.
	var ended atomic.Int32
	for i := range 15 {
		go func() {
			defer ended.Add(1)
			anon.Login(ctx, "mallory", fmt.Sprintf("guess number %d!", i))
		}()
	}
	testkit.Eventually(t, func() bool { return ended.Load() >= 11 }, "the guesses were not answered")
	releaseHeld(t, clk, &ended, 15, 15*time.Second)
	clk.Advance(16 * time.Second)
	anon.Login(ctx, "mallory", "guess number 15!")
	wrong := api.NewLocalClient(g.cfg.Listen.Socket, strings.Repeat("ab", 16))
	for range 3 {
		wrong.Targets(ctx)
	}
	counts := map[string]int{}
	for _, e := range g.auditEntries("", "") {
		if e.Kind != "auth.failed" {
			continue
		}
		counts[fmt.Sprint(e.Fields["credential"], " ", e.Fields["subject"], " blocked=", e.Fields["blocked"])]++
	}
	want := map[string]int{
		"reviewer_password login:mallory@loopback blocked=false":     1,
		"reviewer_password login:mallory@loopback blocked=true":      1,
		"reviewer_password login-addr:loopback blocked=false":        1,
		"reviewer_password login-addr:loopback blocked=true":         1,
		"reviewer_password login-name:mallory blocked=false":         1,
		"reviewer_password login-name:mallory blocked=true":          1,
		fmt.Sprintf("local_token uid:%d blocked=false", os.Getuid()): 1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("auth.failed entries (-want +got):\n%s", diff)
	}
	raw, err := g.reviewer.AuditEntries(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "guess number") || strings.Contains(string(raw), strings.Repeat("ab", 16)) {
		t.Error("a guessed secret is in the audit log")
	}
}
