package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

const (
	reviewerName = gatewaytest.Reviewer
	reviewerPass = gatewaytest.Password
)

// soak reports whether the long variants run (make soak).
func soak() bool { return os.Getenv("AIRLOCK_SOAK") == "1" }

// TestMain removes the binaries built for the package.
func TestMain(m *testing.M) {
	code := m.Run()
	gatewaytest.RemoveBinaries()
	os.Exit(code)
}

// binary returns the path of a command built once per test process.
func binary(t testing.TB, name string) string { return gatewaytest.Binary(t, name) }

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
	*gatewaytest.Daemon
	t       testing.TB
	dir     string
	cfgFile string
	state   string
	socket  string
	pwFile  string
	netns   string // the daemon runs in this network namespace

	mu         sync.Mutex
	agentToken string // issued by remoteAgent, once
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
	gc := gatewaytest.Config{StateDir: filepath.Join(dir, "state"), HTTP: "127.0.0.1:0", ApprovalTimeout: "30s",
		Credentials: c.credentials, Extra: c.extra}
	for _, tg := range c.targets {
		mode := tg.mode
		if mode == "" {
			mode = "run"
		}
		mp := tg.maxParallel
		if mp == 0 {
			mp = 16
		}
		gc.Targets = append(gc.Targets, gatewaytest.Target{Name: tg.name, Address: tg.address, HostKey: tg.hostKey, MaxParallel: mp,
			Accounts: []gatewaytest.Account{{Name: tg.user, Credential: tg.credential, Approval: mode, MaxTimeout: "2m"}}})
	}
	var o gatewaytest.DaemonOptions
	if netns != "" {
		o = gatewaytest.DaemonOptions{NoHTTPCheck: true, Start: func(cmd *exec.Cmd) error { return inNetNS(netns, cmd.Start) }}
	}
	d := gatewaytest.NewDaemon(t, dir, gc, o)
	return &gw{Daemon: d, t: t, dir: dir, cfgFile: d.ConfigFile, state: gc.StateDir, socket: d.Socket,
		pwFile: d.PasswordFile, netns: netns}
}

// start restarts the daemon after a stop.
func (g *gw) start() { g.t.Helper(); g.Start() }

// stop sends sig and waits for the daemon to exit.
func (g *gw) stop(sig syscall.Signal) { g.Stop(sig) }

func (g *gw) pid() int { return g.PID() }

// exited reports whether the daemon process has ended.
func (g *gw) exited() bool { return g.Exited() }

// agent is a client over the local socket with the current local token.
func (g *gw) agent() *api.Client { return g.Agent() }

func (g *gw) healthy() bool { return g.Healthy() }

// reviewer logs the reviewer in over HTTP.
func (g *gw) reviewer() *api.Client { return g.Reviewer() }

// remoteAgent creates a remote run with an agent token an operator
// issued through the CLI (airlock agent add), and returns a client
// presenting the run's token.
func (g *gw) remoteAgent() (*api.Client, *api.Run) {
	g.t.Helper()
	g.mu.Lock()
	if g.agentToken == "" {
		out, errs, code := g.CLI("agent", "add", "--config", g.ConfigFile, "system-agent")
		if code != 0 {
			g.mu.Unlock()
			g.t.Fatalf("airlock agent add: exit %d: %s", code, errs)
		}
		g.agentToken = strings.TrimSpace(out)
	}
	token := g.agentToken
	g.mu.Unlock()
	run, err := api.NewHTTPClient(g.HTTPURL, token).CreateRun(context.Background())
	if err != nil {
		g.t.Fatalf("create run: %v", err)
	}
	return api.NewHTTPClient(g.HTTPURL, run.Token), run
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

// cli runs the airlock binary with the reviewer's environment; it returns
// stdout then stderr.
func (g *gw) cli(args ...string) (string, int) {
	g.t.Helper()
	out, errs, code := g.CLI(args...)
	return out + errs, code
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
	resp, err := http.Get(g.HTTPURL + "/metrics")
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
	var s procStats
	ok := testkit.Poll(within, func() bool {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		s = g.stats()
		return s.fds <= base.fds+slack && s.goroutines <= base.goroutines+slack
	})
	return s, ok
}

func keyLine(k ssh.PublicKey) string { return gatewaytest.KeyLine(k) }

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

// closedAddr returns a loopback address where nothing listens, for as
// long as the test runs: a TCP socket bound to the port but never
// listening holds it, so that no other process (another test's server)
// can take it meanwhile, and a connection to it is refused.
func closedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
