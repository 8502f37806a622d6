package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// patience bounds a test's wait for something that must happen. It only
// turns a hang into a failure: a wait ends as soon as the condition
// holds, so a busy machine makes the suite slower, never red.
const patience = time.Minute

const (
	reviewerName = "alice"
	reviewerPass = "correct horse battery staple"
)

// soak reports whether the long variants run (make soak).
func soak() bool { return os.Getenv("AIRLOCK_SOAK") == "1" }

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// TestMain removes the binaries built for the package.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary returns the path of a command built once per test process.
func binary(t testing.TB, name string) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "airlock-systemtest-bin-")
		if binErr != nil {
			return
		}
		for _, p := range []string{"airlock", "airlock-ssh"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, p), "github.com/airlockgw/airlock/cmd/"+p).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("go build %s: %v: %s", p, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, name)
}

// target is one target block of a generated configuration.
type target struct {
	name, address, hostKey, user, credential string
	mode                                     string // "run" (default) or "call"
	maxParallel                              int
}

// config describes a gateway configuration.
type config struct {
	targets     []target
	credentials map[string]string // name → private key file
	extra       string
}

// gw is an `airlock serve` process.
type gw struct {
	t       testing.TB
	dir     string
	cfgFile string
	state   string
	socket  string
	httpURL string
	pwFile  string
	netns   string // run the daemon in this network namespace

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// newGateway writes the configuration, adds the reviewer and starts the
// daemon; it is stopped with SIGTERM when the test ends.
func newGateway(t testing.TB, c config) *gw {
	t.Helper()
	return newGatewayIn(t, c, "")
}

func newGatewayIn(t testing.TB, c config, netns string) *gw {
	t.Helper()
	return newGatewayDir(t, t.TempDir(), c, netns)
}

// newGatewayAt is newGateway with its files (the state directory is
// DIR/state) under dir.
func newGatewayAt(t testing.TB, dir string, c config) *gw {
	t.Helper()
	return newGatewayDir(t, dir, c, "")
}

func newGatewayDir(t testing.TB, dir string, c config, netns string) *gw {
	t.Helper()
	g := &gw{t: t, dir: dir, state: filepath.Join(dir, "state"), log: &lockedBuffer{}, netns: netns}
	g.socket = filepath.Join(g.state, "run", "airlock.sock")
	port := freePort(t)
	g.httpURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir = %q\nlisten {\n  http = \"127.0.0.1:%d\"\n}\napproval {\n  timeout = \"30s\"\n}\n", g.state, port)
	for name, file := range c.credentials {
		fmt.Fprintf(&b, "credential %q {\n  private_key_file = %q\n}\n", name, file)
	}
	for _, tg := range c.targets {
		mode := tg.mode
		if mode == "" {
			mode = "run"
		}
		mp := tg.maxParallel
		if mp == 0 {
			mp = 16
		}
		fmt.Fprintf(&b, "target %q {\n  address = %q\n  host_keys = [%q]\n  max_parallel = %d\n  account %q {\n    credential = %q\n    approval = %q\n    max_timeout = \"2m\"\n  }\n}\n",
			tg.name, tg.address, tg.hostKey, mp, tg.user, tg.credential, mode)
	}
	b.WriteString(c.extra)
	g.cfgFile = filepath.Join(dir, "airlock.hcl")
	if err := os.WriteFile(g.cfgFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	g.pwFile = filepath.Join(dir, "pw")
	if err := os.WriteFile(g.pwFile, []byte(reviewerPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := g.cli("reviewer", "add", reviewerName, "--config", g.cfgFile); code != 0 {
		t.Fatalf("reviewer add: %s", out)
	}
	g.start()
	t.Cleanup(func() {
		g.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("airlock serve log (tail):\n%s", tail(g.log.String(), 8000))
		}
	})
	return g
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts the daemon and waits until the socket and HTTP answer.
func (g *gw) start() {
	g.t.Helper()
	os.Remove(filepath.Join(filepath.Dir(g.socket), api.ControlFileName))
	cmd := exec.Command(binary(g.t, "airlock"), "serve", "--config", g.cfgFile)
	cmd.Stdout, cmd.Stderr = g.log, g.log
	var err error
	if g.netns != "" {
		err = inNetNS(g.netns, cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		g.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	g.mu.Lock()
	g.cmd, g.done = cmd, done
	g.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := api.ReadControl(g.socket); err == nil {
			if _, err := g.agent().Targets(context.Background()); err == nil {
				if g.netns != "" || g.healthy() {
					return
				}
			}
		}
		select {
		case <-done:
			g.t.Fatalf("airlock serve exited at start:\n%s", g.log.String())
		default:
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("airlock serve did not start:\n%s", g.log.String())
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// stop sends sig and waits for the daemon to exit.
func (g *gw) stop(sig syscall.Signal) {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.cmd = nil
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (g *gw) pid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd.Process.Pid
}

// exited reports whether the daemon process has ended.
func (g *gw) exited() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// agent is a client over the local socket with the current local token.
func (g *gw) agent() *api.Client {
	ctl, err := api.ReadControl(g.socket)
	if err != nil {
		g.t.Fatal(err)
	}
	return api.NewLocalClient(g.socket, ctl.Token)
}

func (g *gw) healthy() bool {
	resp, err := http.Get(g.httpURL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == 200
}

// reviewer logs the reviewer in over HTTP.
func (g *gw) reviewer() *api.Client {
	g.t.Helper()
	l, err := api.NewHTTPClient(g.httpURL, "").Login(context.Background(), reviewerName, reviewerPass)
	if err != nil {
		g.t.Fatalf("login: %v", err)
	}
	return api.NewHTTPClient(g.httpURL, l.Token)
}

// remoteAgent creates a remote run and returns a client presenting its
// token.
func (g *gw) remoteAgent() (*api.Client, *api.Run) {
	g.t.Helper()
	run, err := api.NewHTTPClient(g.httpURL, "").CreateRun(context.Background())
	if err != nil {
		g.t.Fatalf("create run: %v", err)
	}
	return api.NewHTTPClient(g.httpURL, run.Token), run
}

// approveRun sends a first action through c, approves the run it waits
// for and checks that the action ran.
func (g *gw) approveRun(c *api.Client, rv *api.Client, tgt string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan *api.Action, 1)
	errc := make(chan error, 1)
	go func() {
		a, err := c.RunAction(ctx, api.ActionRequest{Target: tgt, Command: "exit 0"}, api.Events{})
		if err != nil {
			errc <- err
			return
		}
		res <- a
	}()
	for {
		pending, err := rv.Approvals(ctx, "pending")
		if err != nil {
			g.t.Fatal(err)
		}
		if len(pending) > 0 {
			if _, err := rv.Decide(ctx, pending[0].ID, api.DecisionRequest{Decision: "approve"}); err != nil {
				g.t.Fatal(err)
			}
			break
		}
		select {
		case err := <-errc:
			g.t.Fatalf("first action: %v", err)
		case <-ctx.Done():
			g.t.Fatal("no approval request")
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case a := <-res:
		if !a.Success() {
			g.t.Fatalf("first action: %s %s", a.Outcome, a.Detail)
		}
	case err := <-errc:
		g.t.Fatalf("first action: %v", err)
	}
}

// cli runs the airlock binary with the reviewer's environment.
func (g *gw) cli(args ...string) (string, int) {
	g.t.Helper()
	cmd := exec.Command(binary(g.t, "airlock"), args...)
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+g.httpURL, "AIRLOCK_REVIEWER="+reviewerName,
		"AIRLOCK_PASSWORD_FILE="+g.pwFile, "AIRLOCK_CONFIG="+g.cfgFile)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		g.t.Fatal(err)
	}
	return string(out), code
}

// entry is one exported audit entry.
type entry struct {
	Seq      int64          `json:"seq"`
	Kind     string         `json:"kind"`
	ActionID string         `json:"action_id"`
	RunID    string         `json:"run_id"`
	Fields   map[string]any `json:"fields"`
}

// audit exports the whole audit log with `airlock audit export` and checks
// that seqs run from 0 without a gap.
func (g *gw) audit() []entry {
	g.t.Helper()
	cmd := exec.Command(binary(g.t, "airlock"), "audit", "export", "--config", g.cfgFile)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		g.t.Fatalf("audit export: %v: %s", err, errb.String())
	}
	var es []entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			g.t.Fatalf("audit export line %q: %v", sc.Text(), err)
		}
		if e.Seq != int64(len(es)) {
			g.t.Fatalf("audit seq %d at position %d: seqs are not contiguous", e.Seq, len(es))
		}
		es = append(es, e)
	}
	return es
}

// verify runs `airlock audit verify` and fails the test unless it exits 0.
func (g *gw) verify() string {
	g.t.Helper()
	out, code := g.cli("audit", "verify", "--config", g.cfgFile)
	if code != 0 {
		g.t.Errorf("audit verify: exit %d: %s", code, out)
	}
	return out
}

// finished maps action ids to the outcome of their action.finished
// entries, and counts action.requested entries.
func finished(es []entry) (outcomes map[string][]string, requested int) {
	outcomes = map[string][]string{}
	for _, e := range es {
		switch e.Kind {
		case "action.requested":
			requested++
		case "action.finished":
			o, _ := e.Fields["outcome"].(string)
			outcomes[e.ActionID] = append(outcomes[e.ActionID], o)
		}
	}
	return outcomes, requested
}

// procStats reads the daemon's open file descriptors, its peak RSS and its
// goroutines (from /metrics).
type procStats struct {
	fds, goroutines int
	hwmKiB          int
}

func (g *gw) stats() procStats {
	g.t.Helper()
	pid := g.pid()
	var s procStats
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		g.t.Fatal(err)
	}
	s.fds = len(ents)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			s.hwmKiB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	s.goroutines = g.metric("go_goroutines")
	return s
}

// metric reads one unlabelled gauge from GET /metrics.
func (g *gw) metric(name string) int {
	g.t.Helper()
	resp, err := http.Get(g.httpURL + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	g.t.Fatalf("no %s in /metrics", name)
	return 0
}

// settle waits until the daemon's fds and goroutines are back within slack
// of base and returns what it last saw.
func (g *gw) settle(base procStats, slack int, within time.Duration) (procStats, bool) {
	deadline := time.Now().Add(within)
	for {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		s := g.stats()
		if s.fds <= base.fds+slack && s.goroutines <= base.goroutines+slack {
			return s, true
		}
		if time.Now().After(deadline) {
			return s, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func keyLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// clientKey writes a key file the gateway logs in with and authorizes it
// on every sshd given.
func clientKey(t testing.TB, sshds ...*sshtest.SSHD) (ssh.Signer, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "client_ed25519")
	signer, err := sshtest.NewKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sshds {
		if err := s.Authorize(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
			t.Fatal(err)
		}
	}
	return signer, file
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", freePort(t))
}
