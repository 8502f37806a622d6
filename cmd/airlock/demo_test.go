package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
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
	deadline := time.Now().Add(3 * patience)
	for proctree.Alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the detached tour did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	text, _ := os.ReadFile(out)
	if !strings.Contains(string(text), "the tour is over") || strings.Contains(string(text), "could not be identified") {
		t.Fatalf("the detached tour:\n%s", text)
	}
}
