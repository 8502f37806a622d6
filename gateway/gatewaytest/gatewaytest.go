// Package gatewaytest runs gateways for tests, one way for every suite:
// Config writes the configuration (the one place test configurations are
// built), Binaries builds the commands once per test process, and Daemon
// runs `airlock serve` as its own process with a reviewer, the CLI and
// clients at hand. Suites that need the gateway in process (its internal
// hooks) start gateway.New on a Config's file instead.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
)

// The reviewer every Daemon has.
const (
	Reviewer = "alice"
	Password = testkit.Password
)

// Config is a gateway configuration.
type Config struct {
	// StateDir is state_dir. Required.
	StateDir string
	// HTTP is listen.http; "" leaves the default, which tests never want:
	// use "127.0.0.1:0" (NewDaemon does), and read the address the
	// gateway bound (Daemon.HTTPURL, gateway.Server.HTTPAddr). NoHTTP
	// turns the listener off.
	HTTP   string
	NoHTTP bool
	// Socket is listen.socket; "" leaves the default (state_dir/run).
	Socket string
	// TLSCert, TLSKey and ClientCAFile are listen's tls_cert, tls_key
	// and client_ca_file.
	TLSCert, TLSKey, ClientCAFile string
	// ApprovalTimeout is approval.timeout; "" leaves the default.
	ApprovalTimeout string
	// Credentials are private-key credentials: name → key file.
	Credentials map[string]string
	// CA are credentials that sign per-action certificates (ca = true).
	CA      []string
	Targets []Target
	// Extra is appended as it is (more blocks).
	Extra string
}

// Target is one target block.
type Target struct {
	Name, Address string
	// HostKey is the pinned key, as an authorized_keys line or an
	// ssh.PublicKey.
	HostKey     any
	MaxParallel int // 0: the default
	Accounts    []Account
}

// Account is one account block of a target.
type Account struct {
	Name, Credential string
	Approval         string // "run" or "call"; "" the default (call)
	MaxTimeout       string // "" the default
	Output           string // "" the default (full)
	MaxStdin         string // "" the default (1 MiB)
}

// HCL is the configuration file's text.
func (c Config) HCL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir = %q\n", c.StateDir)
	if c.HTTP != "" || c.NoHTTP || c.Socket != "" || c.TLSCert != "" {
		b.WriteString("listen {\n")
		if c.HTTP != "" || c.NoHTTP {
			fmt.Fprintf(&b, "  http = %q\n", c.HTTP)
		}
		if c.Socket != "" {
			fmt.Fprintf(&b, "  socket = %q\n", c.Socket)
		}
		for _, kv := range [][2]string{{"tls_cert", c.TLSCert}, {"tls_key", c.TLSKey}, {"client_ca_file", c.ClientCAFile}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "  %s = %q\n", kv[0], kv[1])
			}
		}
		b.WriteString("}\n")
	}
	if c.ApprovalTimeout != "" {
		fmt.Fprintf(&b, "approval {\n  timeout = %q\n}\n", c.ApprovalTimeout)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Credentials)) {
		fmt.Fprintf(&b, "credential %q {\n  private_key_file = %q\n}\n", name, c.Credentials[name])
	}
	for _, name := range c.CA {
		fmt.Fprintf(&b, "credential %q {\n  ca = true\n}\n", name)
	}
	for _, t := range c.Targets {
		fmt.Fprintf(&b, "target %q {\n  address   = %q\n", t.Name, t.Address)
		switch k := t.HostKey.(type) {
		case string:
			fmt.Fprintf(&b, "  host_keys = [%q]\n", strings.TrimSpace(k))
		case ssh.PublicKey:
			fmt.Fprintf(&b, "  host_keys = [%q]\n", KeyLine(k))
		}
		if t.MaxParallel != 0 {
			fmt.Fprintf(&b, "  max_parallel = %d\n", t.MaxParallel)
		}
		for _, a := range t.Accounts {
			fmt.Fprintf(&b, "  account %q {\n    credential = %q\n", a.Name, a.Credential)
			for _, kv := range [][2]string{{"approval", a.Approval}, {"max_timeout", a.MaxTimeout}, {"output", a.Output}, {"max_stdin", a.MaxStdin}} {
				if kv[1] != "" {
					fmt.Fprintf(&b, "    %s = %q\n", kv[0], kv[1])
				}
			}
			b.WriteString("  }\n")
		}
		b.WriteString("}\n")
	}
	b.WriteString(c.Extra)
	return b.String()
}

// Write writes the configuration to dir/airlock.hcl and returns the path.
func (c Config) Write(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "airlock.hcl")
	if err := os.WriteFile(path, []byte(c.HCL()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// KeyLine is a public key as one authorized_keys line, without newline.
func KeyLine(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries builds airlock and airlock-ssh once per test
// process and returns the directory holding them. Call RemoveBinaries
// from TestMain when the tests are done.
func Binaries(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "airlock-bin-")
		if binErr != nil {
			return
		}
		for _, p := range []string{"airlock", "airlock-ssh"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, p), "github.com/airlockgw/airlock/cmd/"+p)
			if p == "airlock-ssh" {
				// Static, as `make build` ships it (it starts once per
				// action); airlock needs cgo for SQLite.
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("go build %s: %v: %s", p, err, out)
				return
			}
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binDir
}

// Binary is the path of one command Binaries built.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(Binaries(tb), name)
}

// RemoveBinaries removes what Binaries built.
func RemoveBinaries() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Daemon is an `airlock serve` process.
type Daemon struct {
	tb testing.TB
	// ConfigFile, Socket, HTTPURL (http://…) and PasswordFile (the
	// reviewer's, for the CLI) are where it is. HTTPURL is the address
	// the daemon logged it listens on: a restarted daemon (Start) may
	// listen on another.
	ConfigFile   string
	Socket       string
	HTTPURL      string
	PasswordFile string
	// Log is what it wrote.
	Log *LockedBuffer

	start func(*exec.Cmd) error
	// noHTTP skips asking the HTTP listener (it is in another network
	// namespace); its address is still read from the log.
	noHTTP bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// DaemonOptions configure a Daemon.
type DaemonOptions struct {
	// Start starts the command; nil: cmd.Start. (A test runs the daemon in
	// another network namespace with it.)
	Start func(*exec.Cmd) error
	// NoHTTPCheck does not wait for the HTTP listener to answer from here.
	NoHTTPCheck bool
}

// NewDaemon writes the configuration to dir, adds the reviewer (airlock
// reviewer add) and runs the daemon (Run).
func NewDaemon(tb testing.TB, dir string, c Config, o DaemonOptions) *Daemon {
	tb.Helper()
	if c.HTTP == "" {
		c.HTTP = "127.0.0.1:0"
	}
	d := &Daemon{Socket: c.Socket}
	if d.Socket == "" {
		d.Socket = filepath.Join(c.StateDir, "run", "airlock.sock")
	}
	d.ConfigFile = c.Write(tb, dir)
	d.PasswordFile = filepath.Join(dir, "pw")
	if err := os.WriteFile(d.PasswordFile, []byte(Password+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	d.tb = tb
	if _, errs, code := d.CLI("reviewer", "add", Reviewer, "--config", d.ConfigFile); code != 0 {
		tb.Fatalf("reviewer add: %s", errs)
	}
	d.Run(tb, o)
	return d
}

// Run starts the daemon of d's ConfigFile (its Socket set to where that
// configuration listens, PasswordFile to the reviewer's password for CLI;
// HTTPURL is set from the daemon's log); it is stopped with SIGTERM when
// the test ends, and its log shown if the test failed.
func (d *Daemon) Run(tb testing.TB, o DaemonOptions) {
	tb.Helper()
	d.tb, d.Log, d.start, d.noHTTP = tb, &LockedBuffer{}, o.Start, o.NoHTTPCheck
	d.Start()
	tb.Cleanup(func() {
		d.Stop(syscall.SIGTERM)
		if tb.Failed() {
			tb.Logf("airlock serve log (tail):\n%s", Tail(d.Log.String(), 8000))
		}
	})
}

// Start starts the daemon and waits until the socket (and, unless told
// otherwise, the HTTP listener) answers. HTTPURL is set to the address the
// daemon logged it listens on.
func (d *Daemon) Start() {
	d.tb.Helper()
	os.Remove(filepath.Join(filepath.Dir(d.Socket), api.ControlFileName))
	cmd := exec.Command(Binary(d.tb, "airlock"), "serve", "--config", d.ConfigFile)
	cmd.Stdout, cmd.Stderr = d.Log, d.Log
	start := d.start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	logStart := len(d.Log.String())
	if err := start(cmd); err != nil {
		d.tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	err := testkit.PollErr(testkit.Patience, func() error {
		select {
		case <-done:
			return testkit.Stop(errors.New("airlock serve exited at start"))
		default:
		}
		if addr := ListeningHTTP(d.Log.String()[logStart:]); addr != "" {
			d.HTTPURL = "http://" + addr
		}
		ctl, err := api.ReadControl(d.Socket)
		if err != nil {
			return err
		}
		if _, err := api.NewLocalClient(d.Socket, ctl.Token).Targets(context.Background()); err != nil {
			return err
		}
		// The HTTP listener's line comes after the socket's: a daemon
		// whose listener the test cannot reach (noHTTP) is not started
		// for the test until the line names its address either.
		if d.HTTPURL == "" || !d.noHTTP && !d.Healthy() {
			return errors.New("the HTTP listener does not answer")
		}
		return nil
	})
	if err != nil {
		d.tb.Fatalf("airlock serve did not start: %v\n%s", err, d.Log.String())
	}
}

// ListeningHTTP is the address a gateway's log (text or JSON) says its
// HTTP listener listens on, from its line "listening http=…"; "" when
// there is none yet.
func ListeningHTTP(log string) string {
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, "{") {
			var e struct {
				Message string `json:"@message"`
				HTTP    string `json:"http"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Message == "listening" && e.HTTP != "" {
				return e.HTTP
			}
			continue
		}
		if _, rest, ok := strings.Cut(line, " listening: "); ok {
			for f := range strings.FieldsSeq(rest) {
				if addr, ok := strings.CutPrefix(f, "http="); ok {
					return addr
				}
			}
		}
	}
	return ""
}

// Stop sends sig and waits for the daemon to exit (killing it if it has
// not within testkit.Patience).
func (d *Daemon) Stop(sig syscall.Signal) {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(testkit.Patience):
		cmd.Process.Kill()
		<-done
	}
}

// PID is the running daemon's.
func (d *Daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd.Process.Pid
}

// Exited reports whether the daemon process has ended.
func (d *Daemon) Exited() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Healthy reports whether /healthz answers 200.
func (d *Daemon) Healthy() bool {
	resp, err := http.Get(d.HTTPURL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Agent is a client over the local socket with the current local token.
func (d *Daemon) Agent() *api.Client {
	d.tb.Helper()
	ctl, err := api.ReadControl(d.Socket)
	if err != nil {
		d.tb.Fatal(err)
	}
	return api.NewLocalClient(d.Socket, ctl.Token)
}

// Reviewer logs the reviewer in over HTTP.
func (d *Daemon) Reviewer() *api.Client {
	d.tb.Helper()
	l, err := api.NewHTTPClient(d.HTTPURL, "").Login(context.Background(), Reviewer, Password)
	if err != nil {
		d.tb.Fatalf("login: %v", err)
	}
	return api.NewHTTPClient(d.HTTPURL, l.Token)
}

// Env is the environment the CLI runs with as the reviewer and operator.
func (d *Daemon) Env() []string {
	return append(os.Environ(), "AIRLOCK_URL="+d.HTTPURL, "AIRLOCK_REVIEWER="+Reviewer,
		"AIRLOCK_PASSWORD_FILE="+d.PasswordFile, "AIRLOCK_CONFIG="+d.ConfigFile)
}

// CLI runs the airlock command as the reviewer and operator.
func (d *Daemon) CLI(args ...string) (stdout, stderr string, code int) {
	d.tb.Helper()
	cmd := exec.Command(Binary(d.tb, "airlock"), args...)
	cmd.Env = d.Env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.tb.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// CopyKeys copies a gateway's keys directory (stateDir/keys) into another
// state directory, owner-only, as an operator does for a second replica.
func CopyKeys(tb testing.TB, fromStateDir, toStateDir string) {
	tb.Helper()
	from, to := filepath.Join(fromStateDir, "keys"), filepath.Join(toStateDir, "keys")
	if err := os.MkdirAll(to, 0o700); err != nil {
		tb.Fatal(err)
	}
	files, err := os.ReadDir(from)
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(from, f.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f.Name()), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// Tail is the last n bytes of s, marked as cut when they are not all.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// LockedBuffer is a bytes.Buffer a process writes while the test reads
// it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
