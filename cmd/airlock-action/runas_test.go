package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// runAsPolicy has run_as verbs that start processes as root which ignore
// SIGHUP and SIGTERM — one in the verb's process group, one that leaves
// it (setsid), one more — and write their pids (and the shell's) to a
// file; one that prints its environment; and a verb without run_as that
// runs sudo itself, whose root process the account can never signal.
const runAsPolicy = `
log_file = "DIR/log/runas.log"

verb "spawn" {
  run_as  = "root"
  argv    = ["/bin/sh", "-c", "trap '' HUP TERM; /bin/sleep 300 & echo $! >> \"$1\"; /usr/bin/setsid /bin/sleep 301 & echo $! >> \"$1\"; /bin/sleep 302 & echo $! >> \"$1\"; echo $$ >> \"$1\"; wait", "spawn", "{file}"]
  param "file" { path_under = "DIR/data" }
  timeout = "1s"
}
verb "spawn-linger" {
  run_as  = "root"
  argv    = ["/bin/sh", "-c", "trap '' HUP TERM; /bin/sleep 300 & echo $! >> \"$1\"; /usr/bin/setsid /bin/sleep 301 & echo $! >> \"$1\"; /bin/sleep 302 & echo $! >> \"$1\"; echo $$ >> \"$1\"; wait", "spawn", "{file}"]
  param "file" { path_under = "DIR/data" }
  timeout = "1m"
}
verb "environment-root" {
  run_as = "root"
  argv   = ["/usr/bin/env"]
}
verb "sudo-sleep" {
  argv    = ["/usr/bin/sudo", "-n", "-u", "root", "--", "/bin/sleep", "SLEEP"]
  timeout = "1m"
}
`

// runAsEnv installs runAsPolicy, a key forced to it, and the sudoers
// rules that airlock-action --check prints for it (plus the one sudo-sleep
// needs), for the test user; all are removed when t ends.
func runAsEnv(t *testing.T) (e *env, key ssh.Signer, log, sleepArg string) {
	t.Helper()
	e = sharedEnv(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root (it installs sudoers rules for another user); CI runs as root")
		}
		t.Skip("needs root: it installs sudoers rules for another user")
	}
	if _, err := os.Stat("/usr/bin/sudo"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("sudo is not installed; run `make test-deps`")
		}
		t.Skip("sudo is not installed; run `make test-deps`")
	}
	// A number no other sudoers rule or process uses.
	sleepArg = strconv.Itoa(100000 + os.Getpid())
	src := strings.ReplaceAll(strings.ReplaceAll(runAsPolicy, "DIR", e.dir), "SLEEP", sleepArg)
	pf := filepath.Join(e.dir, "runas.hcl")
	if err := os.WriteFile(pf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	check := exec.Command(e.bin, "--check", "--policy", pf)
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("--check: %v\n%s", err, out.String())
	}
	rules := ""
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if r, ok := strings.CutPrefix(sc.Text(), "  ("); ok {
			rules += e.sshd.User + " ALL=(" + r + "\n"
		}
	}
	if strings.Count(rules, "\n") != 3 {
		t.Fatalf("--check printed %d sudoers rules for the 3 run_as verbs:\n%s", strings.Count(rules, "\n"), out.String())
	}
	rules += e.sshd.User + " ALL=(root) NOPASSWD: /bin/sleep " + sleepArg + "\n"
	// sudo ignores names with a dot in /etc/sudoers.d.
	sudoers := fmt.Sprintf("/etc/sudoers.d/airlock-action-test-%d", os.Getpid())
	if err := os.WriteFile(sudoers, []byte(rules), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sudoers) })
	if vout, err := exec.Command("visudo", "-c", "-f", sudoers).CombinedOutput(); err != nil {
		t.Fatalf("visudo: %v\n%s\n%s", err, vout, rules)
	}
	key = sshtest.NewKey()
	line, err := deploy.AuthorizedKeysLine(key.PublicKey(), deploy.LineOptions{
		Target: "runas", Account: e.sshd.User, Command: e.bin + " --policy " + pf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.InstallLine(e.sshd.AuthorizedKeysFile(), line); err != nil {
		t.Fatal(err)
	}
	return e, key, filepath.Join(e.dir, "log", "runas.log"), sleepArg
}

// pidsIn reads the pids a spawn verb wrote.
func pidsIn(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %q", file, b)
		}
		pids = append(pids, pid)
	}
	return pids
}

// atLeast is nil when n processes or more were started, else says which
// were.
func atLeast(pids []int, n int) error {
	if len(pids) < n {
		return fmt.Errorf("%d of %d started: %v", len(pids), n, pids)
	}
	return nil
}

// logLine waits for the log line of the request that has want in it.
func logLine(t *testing.T, log, want string) string {
	t.Helper()
	var line string
	testkit.EventuallyErr(t, func() error {
		b, _ := os.ReadFile(log)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, want) {
				line = l
				return nil
			}
		}
		return fmt.Errorf("log:\n%s", b)
	}, "no log line with %q", want)
	return line
}

// A run_as verb whose processes run as root — which the account cannot
// signal, and which ignore HUP and TERM — ends whole when its timeout
// passes or the client goes away: its supervisor, running as root under
// sudo, kills every one of them, and airlock-action says so only when
// it is true. A verb that runs sudo without run_as cannot be ended by
// the account: airlock-action says its end is unconfirmed, names the
// process, and exits 125.
func TestRunAsTerminationThroughSudo(t *testing.T) {
	e, key, log, sleepArg := runAsEnv(t)

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(e.dir, "data", fmt.Sprintf("spawn-%d", time.Now().UnixNano()))
		res, err := sshexec.Run(context.Background(), e.config(key), "spawn "+file)
		if err != nil {
			t.Fatal(err)
		}
		// Confirmed means gone: every process the verb started (as many
		// as had started when the timeout passed) is gone now, not later.
		pids := pidsIn(t, file)
		for _, pid := range pids {
			if proctree.Alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d of the verb outlived its timeout", pid)
			}
		}
		if res.Outcome != sshexec.Exited || res.ExitCode != 124 || !strings.Contains(string(res.Stderr), "every process of it was killed") {
			t.Errorf("got %v %d %q, want exit 124", res.Outcome, res.ExitCode, res.Stderr)
		}
		l := logLine(t, log, `args=["`+file+`"]`)
		if !strings.Contains(l, "exit=124 timeout=true") || !strings.Contains(l, "termination=confirmed") {
			t.Errorf("log line %q", l)
		}
		t.Logf("%d processes had started when the timeout passed", len(pids))
	})

	t.Run("client gone", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(e.dir, "data", fmt.Sprintf("linger-%d", time.Now().UnixNano()))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan *sshexec.Result, 1)
		go func() { res, _ := sshexec.Run(ctx, e.config(key), "spawn-linger "+file); ran <- res }()
		// All four (three sleeps and the shell) run as root before the
		// client goes away.
		testkit.EventuallyErr(t, func() error { return atLeast(pidsIn(t, file), 4) }, "the verb never started its processes")
		pids := pidsIn(t, file)
		for _, pid := range pids {
			if p, err := proctree.Read(pid); err != nil || p.UID != 0 {
				t.Fatalf("process %d: %+v %v; want one of root's", pid, p, err)
			}
		}
		cancel()
		<-ran
		l := logLine(t, log, `args=["`+file+`"]`)
		for _, pid := range pids {
			if proctree.Alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d of the verb outlived the client", pid)
			}
		}
		if !strings.Contains(l, "client_gone=true") || !strings.Contains(l, "termination=confirmed") {
			t.Errorf("log line %q", l)
		}
	})

	t.Run("unconfirmed", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ran := make(chan struct{})
		go func() { sshexec.Run(ctx, e.config(key), "sudo-sleep"); close(ran) }()
		var sleeper proctree.Proc
		testkit.Eventually(t, func() bool {
			table, err := proctree.Table()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range table {
				if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID)); string(cmdline) == "/bin/sleep\x00"+sleepArg+"\x00" {
					sleeper = p
				}
			}
			return sleeper.PID != 0
		}, "sudo never started the sleep")
		defer syscall.Kill(sleeper.PID, syscall.SIGKILL)
		cancel()
		<-ran
		l := logLine(t, log, `verb="sudo-sleep"`)
		for _, want := range []string{"exit=125 client_gone=true", fmt.Sprintf(`termination=unconfirmed left=["%d (\"sleep\", uid 0)"]`, sleeper.PID)} {
			if !strings.Contains(l, want) {
				t.Errorf("log line %q lacks %q", l, want)
			}
		}
		// The line tells the truth: the process it names still runs.
		if !proctree.Running(sleeper) {
			t.Errorf("the log names %d as running, but it is gone", sleeper.PID)
		}
	})
}

// The supervisor on its own: it ends as its program did (status or
// signal), refuses what is not "--reap -- /absolute/program", and on
// SIGUSR1 ends every process under it, even one that left the group.
func TestReap(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	status := func(args ...string) (syscall.WaitStatus, string) {
		t.Helper()
		cmd := exec.Command(e.bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		return cmd.ProcessState.Sys().(syscall.WaitStatus), stderr.String()
	}
	if ws, _ := status("--reap", "--", "/bin/sh", "-c", "exit 7"); ws.ExitStatus() != 7 {
		t.Errorf("exit 7: %v", ws)
	}
	if ws, _ := status("--reap", "--", "/bin/sh", "-c", "kill -TERM $$"); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("killed by TERM: %v", ws)
	}
	// Signals the Go runtime handles itself are passed on as signals
	// too, not as its crash report and exit 2.
	for _, sig := range []syscall.Signal{syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGQUIT, syscall.SIGUSR1} {
		ws, msg := status("--reap", "--", "/bin/sh", "-c", "kill -"+strings.TrimPrefix(unix.SignalName(sig), "SIG")+" $$")
		if !ws.Signaled() || ws.Signal() != sig || strings.Contains(msg, "goroutine") {
			t.Errorf("killed by %v: %v, stderr %q", sig, ws, msg)
		}
	}
	if ws, msg := status("--reap", "--", "sh", "-c", "true"); ws.ExitStatus() != 126 || !strings.Contains(msg, "absolute path") {
		t.Errorf("a relative program: %v %q", ws, msg)
	}
	if ws, msg := status("--reap", "/bin/true"); ws.ExitStatus() != 2 || !strings.Contains(msg, "usage") {
		t.Errorf("no --: %v %q", ws, msg)
	}

	file := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(e.bin, "--reap", "--", "/bin/sh", "-c", "trap '' HUP TERM USR1; /usr/bin/setsid /bin/sleep 300 & echo $! >> \"$1\"; /bin/sleep 301 & echo $! >> \"$1\"; echo $$ >> \"$1\"; wait", "sh", file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, func() error { return atLeast(pidsIn(t, file), 3) }, "the program never started its processes")
	cmd.Process.Signal(syscall.SIGUSR1)
	cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Exited() || ws.ExitStatus() != 128+int(syscall.SIGKILL) {
		t.Errorf("stopped: %v, want exit %d: a stopped verb's supervisor ends with a status, never by a signal", ws, 128+int(syscall.SIGKILL))
	}
	for _, pid := range pidsIn(t, file) {
		if proctree.Alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d outlived the supervisor's stop", pid)
		}
	}
}
