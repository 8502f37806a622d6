package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// TestDemoScript runs the scripted tour, so that the README's first
// command cannot rot.
func TestDemoScript(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "demo")
	var out, errb bytes.Buffer
	code := dispatch([]string{"demo", "--script", "--keep", keep}, &out, &errb)
	if code != 0 {
		t.Fatalf("airlock demo --script: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"hello from the demo target", "denied", "host_key_mismatch", "intact"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out.String())
		}
	}
	// The investigator's step has signed checkpoints to verify.
	if m := regexp.MustCompile(`intact: \d+ entries, (\d+) signed checkpoints`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("the investigator's step verified no signed checkpoint:\n%s", out.String())
	}
	// --keep keeps a working state directory: the audit log verifies with
	// the CLI from its configuration.
	if _, err := os.Stat(filepath.Join(keep, "state", "audit.db")); err != nil {
		t.Fatal(err)
	}
	code2, stdout, stderr := runCLI(t, "audit", "verify", "--config", filepath.Join(keep, "airlock.hcl"))
	if code2 != 0 {
		t.Errorf("audit verify of the kept demo: exit %d: %s %s", code2, stdout, stderr)
	}
}

func TestDemoRemovesItsTemporaryState(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var out, errb bytes.Buffer
	if code := dispatch([]string{"demo", "--script"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// The tour offers nothing that needs the demo still running.
	for _, gone := range []string{"login link", "another terminal", "try:"} {
		if strings.Contains(out.String(), gone) {
			t.Errorf("the tour's output offers %q, which is gone when it ends:\n%s", gone, out.String())
		}
	}
	ents, _ := os.ReadDir(os.Getenv("TMPDIR"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "airlock-demo-") {
			t.Errorf("%s was left behind", e.Name())
		}
	}
}

// The tour works detached — setsid, no terminal, its parent gone, as a
// service or a cron job would start it: an agent whose ancestors end at
// init still anchors a run.
func TestDemoScriptDetached(t *testing.T) {
	airlock, _ := binaries(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	pidFile := filepath.Join(dir, "pid")
	// The shell starts the tour in a session of its own and exits: the
	// tour's parent becomes init (or the nearest subreaper).
	script := "setsid " + airlock + " demo --script > " + out + " 2>&1 < /dev/null & echo $! > " + pidFile
	if b, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if !testkit.Poll(3*testkit.Patience, func() bool { return !proctree.Alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("the detached tour did not end")
	}
	text, _ := os.ReadFile(out)
	if !strings.Contains(string(text), "the tour is over") || strings.Contains(string(text), "could not be identified") {
		t.Fatalf("the detached tour:\n%s", text)
	}
}

// What the interactive demo prints works as pasted in another terminal:
// the agent's airlock-ssh line, the reviewer's export line and approve
// line. (The binaries here were built together, so the demo names the
// airlock-ssh next to it.)
func TestDemoPrintedCommandsWork(t *testing.T) {
	t.Parallel()
	airlock := gatewaytest.Binary(t, "airlock")
	demo := exec.Command(airlock, "demo")
	demo.Dir = t.TempDir()
	demo.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	stdout, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	demo.Stderr = &gatewaytest.LockedBuffer{}
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { demo.Process.Signal(os.Interrupt); demo.Wait() }()
	var agentLine, exportLine, listLine, approveLine string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "AIRLOCK_SOCKET=") && strings.Contains(l, "airlock-ssh demo"):
			agentLine = l
		case strings.HasPrefix(l, "export AIRLOCK_URL="):
			exportLine = l
		case strings.HasSuffix(l, " approvals list"):
			listLine = l
		case strings.HasSuffix(l, " approvals approve ID"):
			approveLine = l
		}
		if strings.HasPrefix(l, "Press Ctrl-C") {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	if agentLine == "" || exportLine == "" || listLine == "" || approveLine == "" {
		t.Fatalf("the demo did not print the commands to paste: %q %q %q %q", agentLine, exportLine, listLine, approveLine)
	}
	paste := func(lines ...string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", strings.Join(lines, "\n"))
		cmd.Dir = t.TempDir() // another terminal, elsewhere
		return cmd
	}
	var agentOut gatewaytest.LockedBuffer
	agent := paste(agentLine)
	agent.Stdout, agent.Stderr = &agentOut, &agentOut
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	idRE := regexp.MustCompile(`apr_[0-9a-f]{32}`)
	var id string
	testkit.EventuallyErr(t, func() error {
		out, _ := paste(exportLine, listLine).CombinedOutput()
		if id = idRE.FindString(string(out)); id == "" {
			return fmt.Errorf("it says: %s", out)
		}
		return nil
	}, "the pasted approvals list never showed the agent's request")
	if out, err := paste(exportLine, strings.Replace(approveLine, " ID", " "+id, 1)).CombinedOutput(); err != nil {
		t.Fatalf("the pasted approve: %v: %s", err, out)
	}
	if err := agent.Wait(); err != nil || !strings.Contains(agentOut.String(), "Linux") {
		t.Errorf("the pasted agent line: %v: %s", err, agentOut.String())
	}
}

// Run with go run, the demo builds the helpers it names from the module
// it runs in.
func TestDemoBuildsItsHelpersFromTheCheckout(t *testing.T) {
	t.Parallel()
	if moduleRoot() == "" {
		t.Skip("not inside the module")
	}
	e := &demoEnv{dir: t.TempDir()}
	var errb bytes.Buffer
	dir, hint := e.helpers(context.Background(), &errb)
	if dir == "" {
		t.Fatalf("no helpers: %s %s", hint, errb.String())
	}
	for _, b := range []string{"airlock", "airlock-ssh"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: %v", b, err)
		}
	}
}
