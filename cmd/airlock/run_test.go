package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// What the command of airlock run leaves running when it exits is ended
// with it — in its process group or not (a double fork into a session of
// its own comes to airlock run, the subreaper), after SIGTERM or, for
// one that ignores it, SIGKILL — unless --keep-children.
func TestRunEndsWhatItsCommandLeft(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "run")
	d := startDaemon(t, cfgFile, state)
	airlock, _ := binaries(t)
	for _, tc := range []struct {
		name   string
		flags  []string
		script string // writes the pids it leaves behind to "$0"
		left   bool   // they are still running after airlock run
	}{
		{"a background child", nil, `sleep 1000 & echo $! >> "$0"`, false},
		{"a daemon in a session of its own", nil,
			`setsid sh -c 'sleep 1000 & echo $! >> "$0"' "$0" & while [ ! -s "$0" ]; do sleep 0.01; done`, false},
		{"a child that ignores SIGTERM", nil, `(trap "" TERM; exec sleep 1000) & echo $! >> "$0"`, false},
		{"--keep-children", []string{"--keep-children"}, `sleep 1000 & echo $! >> "$0"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			// What is left must not hold airlock run's output open.
			script := "exec >/dev/null 2>&1; " + tc.script
			args := append(append([]string{"run"}, tc.flags...), "--", "sh", "-c", script, pidFile)
			cmd := exec.Command(airlock, args...)
			cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket)
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := waitBounded(t, cmd); err != nil {
				t.Fatalf("airlock run: %v\n%s", err, out.String())
			}
			pids := readPids(t, pidFile)
			for _, pid := range pids {
				if tc.left {
					if !proctree.Alive(pid) {
						t.Errorf("process %d was ended despite --keep-children", pid)
					}
					continue
				}
				testkit.Eventually(t, func() bool { return !proctree.Alive(pid) },
					"process %d outlived airlock run:\n%s", pid, out.String())
			}
		})
	}
}

// readPids reads the pids a command wrote, one a line, and ends them when
// the test ends.
func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || len(bytes.Fields(b)) == 0 {
		t.Fatalf("the command wrote no pid: %q, %v", b, err)
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		pid, err := strconv.Atoi(string(f))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		if p, err := proctree.Read(pid); err == nil {
			t.Cleanup(func() {
				if proctree.Running(p) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
		}
	}
	return pids
}

// With a terminal, the agent's group takes it, and a stop of the agent
// (Ctrl-Z, here SIGTSTP it sends itself) stops airlock run as the shell's
// job; continued (fg), airlock run gives the terminal back and continues
// the agent. script(1) gives airlock run a terminal.
func TestRunPassesStopsToTheShell(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("needs script(1): apt-get install -y bsdutils")
	}
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "run")
	d := startDaemon(t, cfgFile, state)
	airlock, _ := binaries(t)
	line := airlock + ` run -- sh -c 'kill -TSTP $$; echo resumed'`
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	var run proctree.Proc
	testkit.Eventually(t, func() bool {
		table, err := proctree.Table()
		if err != nil {
			return false
		}
		for _, p := range proctree.Descendants(table, cmd.Process.Pid) {
			if p.Comm == "airlock" && p.State == 'T' {
				run = p
				return true
			}
		}
		return false
	}, "airlock run was not stopped with its agent:\n%s", out.String())
	// As a shell's fg: script(1) stopped itself with its child, and is
	// continued with it.
	syscall.Kill(run.PID, syscall.SIGCONT)
	syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	if err := waitBounded(t, cmd); err != nil || !bytes.Contains([]byte(out.String()), []byte("resumed")) {
		t.Errorf("after SIGCONT: %v\n%s", err, out.String())
	}
}
