package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
	"golang.org/x/sys/unix"
)

// The agent's contract, through the built airlock-ssh against `airlock
// serve` and a real sshd: what the agent gets is the whole output, or it
// is told what it did not get.

var (
	sshdOnce sync.Once
	shared   *sshtest.SSHD
	sharedEr error

	gwOnce sync.Once
	gw     *gatewaytest.Daemon
	gwDir  string
	gwErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The package's daemon would outlive the test process (its parent
	// gone, init's child): stop it, and remove what it wrote.
	if gw != nil {
		gw.Stop(syscall.SIGTERM)
		os.RemoveAll(gwDir)
	}
	if shared != nil {
		shared.Close()
	}
	gatewaytest.RemoveBinaries()
	os.Exit(code)
}

// gateway is one `airlock serve` for the package, on one real sshd, with a
// target per output policy ("box": full, "tailbox": tail, "nonebox":
// none), every account approved per run. A reviewer approves every
// request it is asked (the tests here are about what the agent gets).
func gateway(t testing.TB) *gatewaytest.Daemon {
	t.Helper()
	sshtest.Need(t)
	sshdOnce.Do(func() { shared, sharedEr = sshtest.StartSSHD(sshtest.Options{}) })
	if sharedEr != nil {
		t.Fatal(sharedEr)
	}
	gwOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-ssh-contract-")
		if err != nil {
			gwErr = err
			return
		}
		gwDir = dir
		var targets []gatewaytest.Target
		for name, a := range map[string]gatewaytest.Account{
			"box": {Output: "full"}, "tailbox": {Output: "tail"}, "nonebox": {Output: "none"},
			"smallin": {MaxStdin: "1KiB"}, "callbox": {Approval: "call"},
		} {
			a.Name, a.Credential, a.MaxTimeout = shared.User, "key", "10m"
			if a.Approval == "" {
				a.Approval = "run"
			}
			targets = append(targets, gatewaytest.Target{Name: name, Address: shared.Addr, HostKey: shared.HostKey, Accounts: []gatewaytest.Account{a}})
		}
		// "twobox" has no default account: the agent names one.
		targets = append(targets, gatewaytest.Target{Name: "twobox", Address: shared.Addr, HostKey: shared.HostKey, Accounts: []gatewaytest.Account{
			{Name: shared.User, Credential: "key", Approval: "run"}, {Name: "ghost", Credential: "key", Approval: "run"}}})
		secretFile := filepath.Join(dir, "db-secret")
		if gwErr = os.WriteFile(secretFile, []byte(contractSecret+"\n"), 0o600); gwErr != nil {
			return
		}
		cfg := gatewaytest.Config{StateDir: filepath.Join(dir, "state"), Credentials: map[string]string{"key": shared.ClientKeyFile}, Targets: targets,
			Extra: fmt.Sprintf("secret \"db\" {\n  file = %q\n  accounts = [\"box\"]\n}\n", secretFile)}
		// The daemon lives as long as the test process: TestMain stops it
		// and removes what it wrote.
		gw = gatewaytest.NewDaemon(&processTB{TB: t}, dir, cfg, gatewaytest.DaemonOptions{})
		go approveEverything(gw)
	})
	if gwErr != nil {
		t.Fatal(gwErr)
	}
	return gw
}

// processTB lends a test's TB to the package's daemon without tying the
// daemon's life to that test.
type processTB struct{ testing.TB }

func (p *processTB) Cleanup(func()) {}

// seen holds every approval request the reviewer approved, by id; held,
// the commands it leaves undecided while a test holds them there.
var seen, held sync.Map

// approveEverything is a reviewer who approves every request.
func approveEverything(d *gatewaytest.Daemon) {
	ctx := context.Background()
	var c *api.Client
	for {
		time.Sleep(50 * time.Millisecond)
		if c == nil {
			l, err := api.NewHTTPClient(d.HTTPURL, "").Login(ctx, gatewaytest.Reviewer, gatewaytest.Password)
			if err != nil {
				continue
			}
			c = api.NewHTTPClient(d.HTTPURL, l.Token)
		}
		pending, err := c.Approvals(ctx, "pending")
		if err != nil {
			c = nil // log in again
			continue
		}
		for _, p := range pending {
			if _, wait := held.Load(p.Command); wait {
				continue
			}
			seen.Store(p.ID, p)
			c.Decide(ctx, p.ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: p.Digest})
		}
	}
}

// agent runs the built airlock-ssh with args; stdout goes to out. Its
// standard input is empty.
func agent(t *testing.T, d *gatewaytest.Daemon, out io.Writer, args ...string) (stderr string, code int) {
	t.Helper()
	return agentIn(t, d, strings.NewReader(""), out, args...)
}

// agentIn is agent with standard input in.
func agentIn(t *testing.T, d *gatewaytest.Daemon, in io.Reader, out io.Writer, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(gatewaytest.Binary(t, "airlock-ssh"), args...)
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.Socket)
	cmd.Stdin = in
	if _, isFile := in.(*os.File); in != nil && !isFile {
		cmd.Stdin = readyPipe(t, in)
	}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	err := cmd.Run()
	if c, ok := cmd.Stdin.(io.Closer); ok && cmd.Stdin != in {
		c.Close()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return errb.String(), 0
}

// readyPipe is a pipe that already holds the start of in when the
// agent starts (as a producer's pipe does once it has written): the
// rest follows from a goroutine, and the pipe closes after it. Exec's
// own copying would start only after the agent did, and on a busy
// machine later than airlock-ssh's grace for a silent pipe.
func readyPipe(t *testing.T, in io.Reader) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 32<<10) // fits in the pipe's buffer
	n, rerr := io.ReadFull(in, first)
	if _, err := w.Write(first[:n]); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Close()
		if rerr == nil {
			io.Copy(w, in)
		}
	}()
	return r
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// slowReader reads r, first waiting pause (while the gateway's buffers
// fill), then in small bites.
func slowReader(r io.Reader, pause time.Duration) []byte {
	time.Sleep(pause)
	var b bytes.Buffer
	p := make([]byte, 16<<10)
	for {
		n, err := r.Read(p)
		b.Write(p[:n])
		if err != nil {
			return b.Bytes()
		}
	}
}

func TestSlowReaderGetsEveryByte(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	want := seqOutput(3000000) // 22,888,896 bytes, over the output store's cap
	pr, pw := io.Pipe()
	got := make(chan []byte, 1)
	go func() { got <- slowReader(pr, 3*time.Second) }()
	stderr, code := agent(t, d, pw, "--timeout", "600", "box", "--", "seq 1 3000000")
	pw.Close()
	out := <-got
	if code != 0 || !bytes.Equal(out, want) {
		t.Fatalf("exit %d, %d bytes (want 0 and %d bytes, equal: %v); stderr:\n%s", code, len(out), len(want), bytes.Equal(out, want), stderr)
	}
	if strings.Contains(stderr, "truncated") {
		t.Fatalf("a whole output reported cut: %s", stderr)
	}
}

func TestCutOutputIsNeverSilent(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	t.Run("a reader stalled past the deadline", func(t *testing.T) {
		t.Parallel()
		// The reader takes nothing until the action's deadline has
		// passed: the gateway stops waiting for it and the command is
		// stopped. Whatever the command wrote by then either reached the
		// reader whole, or the cut is reported: never a silent loss. (Which
		// one happens depends on what the buffers held when the deadline
		// came; both are checked against what was recorded.)
		pr, pw := io.Pipe()
		got := make(chan []byte, 1)
		go func() { got <- slowReader(pr, 8*time.Second) }()
		stderr, code := agent(t, d, pw, "--timeout", "3", "box", "--", "seq 1 3000000")
		pw.Close()
		out := <-got
		m := regexp.MustCompile(`\(action (act_[a-z0-9]+)\)`).FindStringSubmatch(stderr)
		if code != 255 || !strings.Contains(stderr, "airlock-ssh: timed_out: ") || m == nil {
			t.Fatalf("exit %d after %d bytes; stderr:\n%s\nwant 255 and timed_out", code, len(out), stderr)
		}
		recorded := recordedStdoutBytes(t, d, m[1])
		if i := strings.Index(stderr, "stdout truncated"); i >= 0 {
			var delivered, total int64
			if _, err := fmt.Sscanf(stderr[i:], "stdout truncated: delivered %d of %d bytes", &delivered, &total); err != nil {
				t.Fatalf("%v: %q", err, stderr[i:])
			}
			if delivered != int64(len(out)) || delivered >= total || total != recorded {
				t.Errorf("reported %d of %d delivered; the reader got %d, the gateway recorded %d", delivered, total, len(out), recorded)
			}
		} else if int64(len(out)) != recorded {
			t.Errorf("no cut reported, but the reader got %d bytes of the %d recorded", len(out), recorded)
		}
	})
	t.Run("the object over the output cap", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		stderr, code := agent(t, d, &out, "--json", "box", "--", "seq 1 3000000")
		if code != 255 || !strings.Contains(stderr, "stdout truncated: the action object holds 8388608 of 22888896 bytes") {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		stderr, code = agent(t, d, io.Discard, "--json", "--accept-truncation", "box", "--", "seq 1 3000000")
		if code != 0 || !strings.Contains(stderr, "stdout truncated") {
			t.Fatalf("--accept-truncation: exit %d; stderr:\n%s\nwant 0, the cut still reported", code, stderr)
		}
	})
}

func TestPolicyOutputIsPrinted(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	t.Run("tail", func(t *testing.T) {
		var out bytes.Buffer
		stderr, code := agent(t, d, &out, "tailbox", "--", "echo hi; echo oops >&2; exit 4")
		if code != 4 || out.String() != "hi\n" || !strings.HasPrefix(withoutWaiting(stderr), "oops\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
		out.Reset()
		stderr, code = agent(t, d, &out, "tailbox", "--", "seq 1 100000")
		want := seqOutput(100000)
		if code != 0 || !bytes.Equal(out.Bytes(), want[len(want)-64<<10:]) {
			t.Fatalf("exit %d, %d bytes; stderr %q; want the last 64 KiB", code, out.Len(), stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("stdout: the account's output policy (tail) returns the last %d of %d bytes", 64<<10, len(want))) {
			t.Fatalf("no note of what was withheld: %q", stderr)
		}
	})
	t.Run("none", func(t *testing.T) {
		var out bytes.Buffer
		stderr, code := agent(t, d, &out, "nonebox", "--", "echo hi; echo oops >&2; exit 3")
		if code != 3 || out.Len() != 0 {
			t.Fatalf("exit %d, stdout %q", code, out.String())
		}
		for _, want := range []string{"stdout withheld by the account's output policy (none): 3 bytes", "stderr withheld by the account's output policy (none): 5 bytes"} {
			if !strings.Contains(stderr, want) {
				t.Fatalf("stderr %q: want %q", stderr, want)
			}
		}
	})
}

// withoutWaiting drops the line that says a reviewer is being asked.
func withoutWaiting(stderr string) string {
	var keep []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "airlock-ssh: waiting for a reviewer") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func TestStdinIsSent(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	t.Run("a pipe", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		stderr, code := agentIn(t, d, strings.NewReader("a\nb\n"), &out, "box", "--", "cat")
		if code != 0 || out.String() != "a\nb\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
	t.Run("binary, byte-exact", func(t *testing.T) {
		t.Parallel()
		in := make([]byte, 300<<10)
		rand.Read(in)
		var out bytes.Buffer
		stderr, code := agentIn(t, d, bytes.NewReader(in), &out, "box", "--", "sha256sum")
		sum := sha256.Sum256(in)
		if code != 0 || !strings.HasPrefix(out.String(), hex.EncodeToString(sum[:])) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
	t.Run("-n sends nothing", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		stderr, code := agentIn(t, d, strings.NewReader("not for it\n"), &out, "-n", "box", "--", "cat; echo end")
		if code != 0 || out.String() != "end\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
	t.Run("a terminal sends nothing", func(t *testing.T) {
		t.Parallel()
		tty := openPTY(t)
		var out bytes.Buffer
		stderr, code := agentIn(t, d, tty, &out, "box", "--", "cat; echo end")
		if code != 0 || out.String() != "end\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
	t.Run("over the account's max_stdin", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		stderr, code := agentIn(t, d, strings.NewReader(strings.Repeat("x", 2000)), &out, "smallin", "--", "echo ran")
		if code != 255 || out.Len() != 0 || !strings.Contains(stderr, "rejected: the standard input is 2000 bytes, over the account's max_stdin of 1024 bytes") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
}

// Flags after the target are read as ssh reads them, and the command runs
// as the account they name.
func TestFlagsAfterTheTarget(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	for _, args := range [][]string{
		{"twobox", "-l", shared.User, "--", "id", "-un"},
		{"twobox", "-l" + shared.User, "id", "-un"},
		{"twobox", "-nl", shared.User, "--timeout", "30s", "--", "id", "-un"},
	} {
		var out bytes.Buffer
		stderr, code := agent(t, d, &out, args...)
		if code != 0 || out.String() != shared.User+"\n" {
			t.Errorf("airlock-ssh %q: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out.String(), stderr, shared.User)
		}
	}
	// What airlock-ssh cannot honour is refused there too, before
	// anything is asked.
	var out bytes.Buffer
	stderr, code := agent(t, d, &out, "twobox", "-l", shared.User, "-v", "--", "id")
	if code != 255 || out.Len() != 0 || !strings.Contains(stderr, "-v is refused: ") || strings.Contains(stderr, "act_") {
		t.Errorf("-v after the target: exit %d, stdout %q, stderr %q", code, out.String(), stderr)
	}
}

// --exit-codes=detailed gives each outcome a code of its own, which a
// remote status never is; a remote exit 255 stays 255, and by default
// every other end is 255 too, as ssh does.
func TestDetailedExitCodes(t *testing.T) {
	d := gateway(t)
	for _, tt := range []struct {
		name   string
		env    string
		args   []string
		want   int
		stderr string
	}{
		{"ssh: a remote 255", "", []string{"box", "--", "exit 255"}, 255, ""},
		{"ssh: rejected", "", []string{"nosuch", "--", "true"}, 255, "airlock-ssh: rejected: "},
		{"detailed: a remote 255", "", []string{"--exit-codes=detailed", "box", "--", "exit 255"}, 255, ""},
		{"detailed: a remote 7", "", []string{"--exit-codes", "detailed", "box", "--", "exit 7"}, 7, ""},
		{"detailed: a remote status in airlock's range", "", []string{"--exit-codes=detailed", "box", "--", "exit 230"}, 254, "airlock-ssh: the command exited 230, a status --exit-codes=detailed keeps"},
		{"detailed: rejected", "", []string{"--exit-codes=detailed", "nosuch", "--", "true"}, 201, "airlock-ssh: rejected: "},
		{"detailed: auth_failed, from the environment", "detailed", []string{"twobox", "-l", "ghost", "--", "true"}, 210, "airlock-ssh: auth_failed: "},
		{"detailed: timed_out, the flag after the target", "", []string{"box", "--exit-codes=detailed", "--timeout", "1", "--", "sleep 30"}, 215, "airlock-ssh: timed_out: "},
		{"detailed: nothing ran", "detailed", []string{"-q", "box", "true"}, 200, "-q is refused"},
		{"the flag before the environment", "detailed", []string{"--exit-codes=ssh", "nosuch", "--", "true"}, 255, "airlock-ssh: rejected: "},
		{"a bad environment is refused", "verbose", []string{"box", "--", "true"}, 255, "$AIRLOCK_EXIT_CODES \"verbose\": give ssh"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AIRLOCK_EXIT_CODES", tt.env)
			stderr, code := agent(t, d, io.Discard, tt.args...)
			if code != tt.want || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.want, tt.stderr)
			}
		})
	}
}

// The waiting line says how long the reviewer has: the deadline the
// gateway set for the request, which only the gateway knows (the agent
// has nothing but $AIRLOCK_SOCKET).
func TestWaitingSaysHowLongTheReviewerHas(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	var out bytes.Buffer
	stderr, code := agent(t, d, &out, "--json", "callbox", "--", "true")
	var a api.Action
	if err := json.Unmarshal(out.Bytes(), &a); code != 0 || err != nil {
		t.Fatalf("exit %d (%v), stderr %q", code, err, stderr)
	}
	m := regexp.MustCompile(`waiting for a reviewer to approve this call \(approval (apr_\w+)\); the reviewer has \S+, until (\S+) \(the gateway's approval timeout\), then it ends expired\n`).FindStringSubmatch(stderr)
	if m == nil || m[1] != a.Approval.ID {
		t.Fatalf("stderr %q: no waiting line naming approval %s and its deadline", stderr, a.Approval.ID)
	}
	v, ok := seen.Load(a.Approval.ID)
	if !ok {
		t.Fatalf("the reviewer never saw approval %s", a.Approval.ID)
	}
	if want := v.(api.Approval).ExpiresAt.UTC().Format(time.RFC3339); m[2] != want {
		t.Errorf("the agent was told the reviewer has until %s; the request expires at %s", m[2], want)
	}
}

// contractSecret is the value of the package gateway's secret "db".
const contractSecret = "contract-secret-value"

// --secret has the gateway write a secret to the command's input; the
// agent gets its output with the value replaced, and input of its own is
// refused rather than dropped.
func TestSecretFlag(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	var out bytes.Buffer
	stderr, code := agent(t, d, &out, "--secret", "db", "box", "--", `v=$(cat); echo "got $v"`)
	if code != 0 || out.String() != "got [secret db]\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
	}
	// It waited for a call approval of its own, and was told why.
	if !strings.Contains(stderr, "waiting for a reviewer to approve this call") || !strings.Contains(stderr, "it asks its own approval: it receives the gateway-held secret db") {
		t.Errorf("the wait as the agent was told it: %q", stderr)
	}
	out.Reset()
	stderr, code = agentIn(t, d, strings.NewReader("mine\n"), &out, "--secret", "db", "box", "--", "cat")
	if code != 255 || !strings.Contains(stderr, "with --secret the secret is the command's standard input") || out.Len() != 0 {
		t.Fatalf("input and a secret: exit %d, stdout %q, stderr %q", code, out.String(), stderr)
	}
	out.Reset()
	stderr, code = agentIn(t, d, strings.NewReader("mine\n"), &out, "-n", "--json", "--secret", "db", "box", "--", "cat")
	var a api.Action
	if err := json.Unmarshal(out.Bytes(), &a); code != 0 || err != nil || a.Stdout != "[secret db]\n" || a.Secret != "db" || a.SecretReplacements != 1 || strings.Contains(out.String(), contractSecret) {
		t.Fatalf("-n --secret: exit %d, stdout %q, stderr %q", code, out.String(), stderr)
	}
	stderr, code = agent(t, d, &out, "--secret", "db", "tailbox", "--", "cat")
	if code != 255 || !strings.Contains(stderr, "not granted") {
		t.Errorf("a secret not granted: exit %d, stderr %q", code, stderr)
	}
}

// The reviewer of a call sees its input and the agent's reason; the
// action object says what was sent.
func TestStdinAndReasonReachTheReviewer(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	var out bytes.Buffer
	stderr, code := agentIn(t, d, strings.NewReader("hello\n"), &out, "--json", "--reason", "to greet the box", "callbox", "--", "cat")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var a api.Action
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("hello\n"))
	if a.Stdout != "hello\n" || a.StdinBytes != 6 || a.StdinSHA256 != hex.EncodeToString(sum[:]) || a.Reason != "to greet the box" {
		t.Fatalf("action: %+v", a)
	}
	v, ok := seen.Load(a.Approval.ID)
	if !ok {
		t.Fatalf("the reviewer never saw approval %s", a.Approval.ID)
	}
	q := v.(api.Approval)
	if q.StdinBytes != 6 || q.StdinText != "hello\n" || q.StdinSHA256 != a.StdinSHA256 || q.AgentReason != "to greet the box" {
		t.Errorf("the reviewer saw %+v", q)
	}
	// The input is kept, and reads back like output (here by a reviewer,
	// whose read is recorded).
	l, err := api.NewHTTPClient(d.HTTPURL, "").Login(context.Background(), gatewaytest.Reviewer, gatewaytest.Password)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := api.NewHTTPClient(d.HTTPURL, l.Token).Output(context.Background(), a.ID, "stdin", 0, 100)
	if err != nil || pg.Data != "hello\n" || pg.Total != 6 || pg.NextOffset != nil {
		t.Errorf("the stored input: %+v %v", pg, err)
	}
}

// openPTY returns the terminal side of a new pseudo-terminal, as an agent
// run in a terminal would have on its standard input.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// recordedStdoutBytes is what the gateway recorded the command of action
// id wrote to stdout (read by the reviewer).
func recordedStdoutBytes(t *testing.T, d *gatewaytest.Daemon, id string) int64 {
	t.Helper()
	l, err := api.NewHTTPClient(d.HTTPURL, "").Login(context.Background(), gatewaytest.Reviewer, gatewaytest.Password)
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.NewHTTPClient(d.HTTPURL, l.Token).Action(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.StdoutBytes
}
