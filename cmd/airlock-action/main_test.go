package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// env is one sshd whose authorized_keys forces the airlock-action binary,
// built for the test, with the policy below.
type env struct {
	dir    string // world-traversable: the login user reads the binary and policy
	bin    string
	policy string
	log    string
	sshd   *sshtest.SSHD
	key    ssh.Signer // forced to airlock-action by authorized_keys
	ca     ssh.Signer // trusted by sshd (TrustedUserCAKeys)
}

var (
	shared    *env
	sharedErr error
)

const testPolicy = `
log_file = "DIR/log/action.log"

verb "touch" {
  argv = ["/usr/bin/touch", "--", "{file}"]
  param "file" { path_under = "DIR/data" }
}
verb "echo" {
  argv = ["/bin/echo", "{word}"]
  param "word" { regex = "[a-z0-9]+" }
}
verb "count" {
  argv = ["/usr/bin/seq", "{n}"]
  param "n" { int = [1, 5] }
}
verb "restart" {
  argv = ["/bin/echo", "restarting", "{service}"]
  param "service" { enum = ["web", "worker"] }
}
verb "fail" {
  argv = ["/bin/sh", "-c", "exit 3"]
}
verb "hang" {
  argv    = ["/bin/sleep", "30"]
  timeout = "500ms"
}
verb "privileges" {
  argv = ["/bin/grep", "-E", "^(NoNewPrivs|Cap(Inh|Prm|Eff|Amb)):", "/proc/self/status"]
}
verb "environment" {
  argv = ["/usr/bin/env"]
}
verb "linger" {
  argv    = ["/bin/sh", "-c", "echo $$ > {file}; exec /bin/sleep 30"]
  param "file" { path_under = "DIR/data" }
  timeout = "1m"
}
`

func TestMain(m *testing.M) {
	if dir := os.Getenv(swapEnv); dir != "" {
		os.Exit(swapLoop(dir))
	}
	if _, err := os.Stat(sshtest.SSHDPath); err == nil {
		shared, sharedErr = setup()
	}
	code := m.Run()
	if shared != nil {
		shared.sshd.Close()
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func setup() (*env, error) {
	dir, err := os.MkdirTemp("", "airlock-action-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, bin: filepath.Join(dir, "airlock-action"), policy: filepath.Join(dir, "action.hcl"), log: filepath.Join(dir, "log", "action.log")}
	if err := os.Chmod(dir, 0o755); err != nil {
		return e, err
	}
	// The login user writes the log and the data; nothing else of dir.
	for _, d := range []string{"log", "data"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o777); err != nil {
			return e, err
		}
		if err := os.Chmod(filepath.Join(dir, d), 0o777); err != nil {
			return e, err
		}
	}
	// A link inside the prefix that leads out of it.
	if err := os.Symlink(dir, filepath.Join(dir, "data", "escape")); err != nil {
		return e, err
	}
	if err := os.WriteFile(e.policy, []byte(strings.ReplaceAll(testPolicy, "DIR", dir)), 0o644); err != nil {
		return e, err
	}
	build := exec.Command(goTool(), "build", "-o", e.bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return e, fmt.Errorf("go build: %v\n%s", err, out)
	}

	caFile := filepath.Join(dir, "ca", "ca")
	if _, _, err := deploy.InitCA(caFile); err != nil {
		return e, err
	}
	if e.ca, err = deploy.LoadCA(caFile, nil); err != nil {
		return e, err
	}
	trusted := filepath.Join(dir, "trusted_user_ca_keys")
	if err := os.WriteFile(trusted, []byte(deploy.CAPublicKeyLine(e.ca.PublicKey())+"\n"), 0o644); err != nil {
		return e, err
	}
	e.sshd, err = sshtest.StartSSHD(sshtest.Options{Config: []string{"ExposeAuthInfo yes", "TrustedUserCAKeys " + trusted}})
	if err != nil {
		return e, err
	}
	e.key = sshtest.NewKey()
	line, err := deploy.AuthorizedKeysLine(e.key.PublicKey(), deploy.LineOptions{
		Target: "e2e", Account: e.sshd.User, Command: e.bin + " --policy " + e.policy,
	})
	if err != nil {
		return e, err
	}
	if _, err := deploy.InstallLine(e.sshd.AuthorizedKeysFile(), line); err != nil {
		return e, err
	}
	return e, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func sharedEnv(t *testing.T) *env {
	t.Helper()
	sshtest.Need(t)
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	shared.sshd.LogOnFailure(t)
	return shared
}

func (e *env) config(signer ssh.Signer) *sshexec.Config {
	return &sshexec.Config{
		Addr:     e.sshd.Addr,
		User:     e.sshd.User,
		Signers:  []ssh.Signer{signer},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{e.sshd.CurrentHostKey()}},
		Timeout:  30 * time.Second,
	}
}

func (e *env) logText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBinaryIsStatic(t *testing.T) {
	e := sharedEnv(t)
	f, err := elf.Open(e.bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("airlock-action has a dynamic loader (PT_INTERP): it must build with CGO_ENABLED=0")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("airlock-action links %v", libs)
	}
}

func TestAllowedThroughSSHD(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	created := filepath.Join(e.dir, "data", "created-by-touch")
	tests := []struct {
		name       string
		command    string
		wantCode   int
		wantStdout string
	}{
		{"regex", "echo hello", 0, "hello\n"},
		{"int", "count 3", 0, "1\n2\n3\n"},
		{"enum", "restart 'web'", 0, "restarting web\n"},
		{"path_under", "touch " + created, 0, ""},
		{"exit status", "fail", 3, ""},
		{"timeout", "hang", 124, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := sshexec.Run(context.Background(), e.config(e.key), tt.command)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != sshexec.Exited || res.ExitCode != tt.wantCode || string(res.Stdout) != tt.wantStdout {
				t.Errorf("got %v %d %q (stderr %q), want exited %d %q", res.Outcome, res.ExitCode, res.Stdout, res.Stderr, tt.wantCode, tt.wantStdout)
			}
		})
	}
	t.Cleanup(func() {
		if _, err := os.Stat(created); err != nil {
			t.Errorf("allowed touch did not create its file: %v", err)
		}
	})
}

// TestInjectionCorpusThroughSSHD sends requests that would run something
// else under a shell. Each tries to create a marker file outside the
// policy's reach; none may run anything, and each must be refused with
// exit 126 and one line on stderr.
func TestInjectionCorpusThroughSSHD(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	m := func(i int) string { return filepath.Join(e.dir, fmt.Sprintf("pwned-%d", i)) }
	data := filepath.Join(e.dir, "data")
	corpus := []struct {
		name    string
		command string
	}{
		{"semicolon", "echo hi; touch " + m(1)},
		{"pipe", "echo hi | touch " + m(2)},
		{"and", "echo hi && touch " + m(3)},
		{"background", "touch " + m(4) + " &"},
		{"command substitution", "echo $(touch " + m(5) + ")"},
		{"backticks", "echo `touch " + m(6) + "`"},
		{"substitution in double quotes", `echo "$(touch ` + m(7) + `)"`},
		{"newline", "echo hi\ntouch " + m(8)},
		{"carriage return", "echo hi\rtouch " + m(9)},
		{"redirection", "echo hi > " + m(10)},
		{"variable", "touch " + data + "/$IFS" + m(11)},
		{"glob", "touch " + data + "/*"},
		{"glob in the verb", "ech? hi"},
		{"tilde", "touch ~/pwned-12"},
		{"unknown verb", "touch-all " + m(13)},
		{"a shell as the verb", "sh -c 'touch " + m(14) + "'"},
		{"an absolute program as the verb", "/usr/bin/touch " + m(15)},
		{"outside the prefix", "touch " + m(16)},
		{"path traversal", "touch " + data + "/../pwned-17"},
		{"path traversal in quotes", "touch '" + data + "/a b/../../pwned-18'"},
		{"symlink escape", "touch " + data + "/escape/pwned-19"},
		{"double dash", "touch -- " + m(20)},
		{"option smuggled as the argument", "touch --reference=/etc/passwd"},
		{"option instead of a word", "echo -e"},
		{"extra argument", "restart web --now"},
		{"enum with a payload", "restart 'web;touch " + m(21) + "'"},
		{"integer out of range", "count 99999999999999999999"},
		{"integer with exponent", "count 1e3"},
		{"invalid UTF-8", "echo \xff\xfe"},
		{"bidi override", "echo a\u202eb"},
		{"very long", "echo " + strings.Repeat("a", 20000)},
		{"empty", ""},
		{"unterminated quote", "echo 'hi"},
	}
	for _, tt := range corpus {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := sshexec.Run(context.Background(), e.config(e.key), tt.command)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != sshexec.Exited || res.ExitCode != 126 {
				t.Errorf("got %v exit %d (stdout %q stderr %q), want exit 126", res.Outcome, res.ExitCode, res.Stdout, res.Stderr)
			}
			if len(res.Stdout) != 0 || bytes.Count(res.Stderr, []byte("\n")) != 1 || !bytes.HasPrefix(res.Stderr, []byte("airlock-action: refused: ")) {
				t.Errorf("stdout %q, stderr %q; want nothing and one refusal line", res.Stdout, res.Stderr)
			}
		})
	}
	t.Run("NUL", func(t *testing.T) {
		t.Parallel()
		// sshd refuses an exec request holding a NUL before any command
		// runs (and an environment variable cannot hold one); the
		// tokenizer refuses it too (see package policy).
		res, _ := sshexec.Run(context.Background(), e.config(e.key), "echo hi\x00; touch "+m(22))
		if res != nil && res.Success() {
			t.Errorf("request with a NUL succeeded: %q", res.Stdout)
		}
	})
	t.Run("login shell", func(t *testing.T) {
		t.Parallel()
		c, err := dialSSH(e, e.key)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		var stderr bytes.Buffer
		sess.Stderr = &stderr
		if err := sess.Shell(); err != nil {
			t.Fatal(err)
		}
		var ee *ssh.ExitError
		if err := sess.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 126 {
			t.Errorf("shell request: %v, want exit 126", err)
		}
	})
	t.Cleanup(func() {
		// Nothing ran: no marker anywhere under the test directory.
		filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), "pwned") {
				t.Errorf("injection ran: %s exists", p)
			}
			return nil
		})
		log := e.logText(t)
		if n := strings.Count(log, "decision=refuse"); n < len(corpus) {
			t.Errorf("log has %d refusals, want at least %d:\n%s", n, len(corpus), log)
		}
	})
}

// TestGatewayTimeoutEndsTheProgram: sshd refuses the gateway's "signal
// KILL" for a forced command, so when an action times out the gateway just
// closes the connection; airlock-action must notice and kill the program
// rather than let it run for the verb's whole timeout.
func TestGatewayTimeoutEndsTheProgram(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	pidFile := filepath.Join(e.dir, "data", fmt.Sprintf("linger-%d.pid", time.Now().UnixNano()))
	cfg := e.config(e.key)
	cfg.Timeout = 2 * time.Second
	cfg.KillGrace = 200 * time.Millisecond
	res, _ := sshexec.Run(context.Background(), cfg, "linger "+pidFile)
	if res == nil || res.Outcome != sshexec.TimedOut {
		t.Fatalf("got %+v, want timed_out", res)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	testkit.Eventually(t, func() bool { return !proctree.Alive(pid) }, "program %d still runs after the gateway gave up", pid)
	want := `args=["` + pidFile + `"] exit=137 client_gone=true signal=KILL termination=confirmed`
	testkit.EventuallyErr(t, func() error {
		if log := e.logText(t); !strings.Contains(log, want) {
			return fmt.Errorf("log:\n%s", log)
		}
		return nil
	}, "no log line with %q", want)
}

func dialSSH(e *env, signer ssh.Signer) (*ssh.Client, error) {
	return ssh.Dial("tcp", e.sshd.Addr, &ssh.ClientConfig{
		User:              e.sshd.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   ssh.FixedHostKey(e.sshd.CurrentHostKey()),
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           10 * time.Second,
	})
}

// TestCertificateForceCommandThroughSSHD runs airlock-action as a per-action
// certificate's force-command, with no authorized_keys line at all, and
// checks that its log line names the action.
func TestCertificateForceCommandThroughSSHD(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	id := fmt.Sprintf("act-%d", time.Now().UnixNano())
	cert, err := deploy.NewActionCert(e.ca, deploy.CertRequest{
		ActionID: id, Account: e.sshd.User, Serial: 77, Timeout: time.Minute,
		ForceCommand: e.bin + " --policy " + e.policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sshexec.Run(context.Background(), e.config(cert.Signer), "restart worker")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Success() || string(res.Stdout) != "restarting worker\n" {
		t.Fatalf("got %v %d %q %q", res.Outcome, res.ExitCode, res.Stdout, res.Stderr)
	}
	want := `decision=allow verb="restart" args=["worker"] exit=0`
	wantID := `key_id="airlock:` + id + `" serial=77`
	for _, l := range strings.Split(e.logText(t), "\n") {
		if strings.Contains(l, wantID) {
			if !strings.Contains(l, want) {
				t.Errorf("log line %q lacks %q", l, want)
			}
			return
		}
	}
	t.Errorf("no log line with %s:\n%s", wantID, e.logText(t))
}

func TestFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(good, []byte(strings.ReplaceAll(testPolicy, "DIR", dir)), 0o644)
	os.WriteFile(bad, []byte("verb \"x\" {\n  argv = [\"x\"]\n}\n"), 0o644)
	// The same policy with its log directory missing: every request would
	// be refused, which --check must say.
	nolog := filepath.Join(dir, "nolog.hcl")
	os.WriteFile(nolog, []byte(strings.ReplaceAll(testPolicy, "DIR", filepath.Join(dir, "missing"))), 0o644)
	os.Mkdir(filepath.Join(dir, "log"), 0o755)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring
	}{
		{"check valid", []string{"--check", "--policy", good}, 0, "ok, 9 verbs"},
		{"check invalid", []string{"--check", "--policy", bad}, 1, bad + ":2: "},
		{"check with a log_file that cannot be written", []string{"--check", "--policy", nolog}, 1, "every request would be refused"},
		{"explain allowed", []string{"--policy", good, "--explain", "restart web"}, 0, "argv:    /bin/echo restarting web\n"},
		{"explain refused", []string{"--policy", good, "--explain", "restart web; id"}, 126, "refused (exit 126)"},
		{"explain with a broken policy", []string{"--policy", bad, "--explain", "x"}, 1, ""},
		{"stray argument", []string{"--policy", good, "restart"}, 2, ""},
		{"unknown flag", []string{"--shell"}, 2, ""},
		// Trying a command never serves the one in $SSH_ORIGINAL_COMMAND,
		// whatever --explain holds.
		{"explain empty", []string{"--policy", good, "--explain", ""}, 2, ""},
		{"explain blank", []string{"--policy", good, "--explain", "  "}, 2, ""},
		{"explain unquoted", []string{"--policy", good, "--explain", "restart", "web"}, 2, ""},
		{"check and explain", []string{"--check", "--policy", good, "--explain", "restart web"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, []string{"SSH_ORIGINAL_COMMAND=restart web"}, &stdout, &stderr)
			if strings.Contains(stdout.String(), "restarting web") && !strings.Contains(stdout.String(), "argv:") {
				t.Errorf("a try served the request in $SSH_ORIGINAL_COMMAND: %q", stdout.String())
			}
			if code != tt.wantCode || !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("exit %d stdout %q stderr %q; want exit %d and stdout containing %q", code, stdout.String(), stderr.String(), tt.wantCode, tt.wantStdout)
			}
		})
	}
}
