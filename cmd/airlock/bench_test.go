package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// benchDaemon runs `airlock serve` as its own process on a real sshd
// with target box (maxParallel slots), and returns it with an agent whose
// run is approved already.
func benchDaemon(b *testing.B, maxParallel int) (*daemon, *api.Client) {
	b.Helper()
	sshtest.Need(b)
	s, err := sshtest.StartSSHD(sshtest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	cfgFile, state := writeConfig(b, s, "run")
	src, _ := os.ReadFile(cfgFile)
	os.WriteFile(cfgFile, []byte(strings.Replace(string(src), `target "box" {`, fmt.Sprintf("target \"box\" {\n  max_parallel = %d", maxParallel), 1)), 0o600)
	os.WriteFile(filepath.Join(filepath.Dir(cfgFile), "pw"), []byte(testkit.Password+"\n"), 0o600)
	if _, errs, code := runCLIEnv(b, map[string]string{"AIRLOCK_PASSWORD_FILE": filepath.Join(filepath.Dir(cfgFile), "pw")}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		b.Fatalf("reviewer add: %s", errs)
	}
	d := startDaemon(b, cfgFile, state)
	ctl, err := api.ReadControl(d.socket)
	if err != nil {
		b.Fatal(err)
	}
	agent := api.NewLocalClient(d.socket, ctl.Token)
	// Approve this process's run once.
	done := make(chan error, 1)
	go func() {
		_, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "true"}, api.Events{})
		done <- err
	}()
	list := d.pending(1)
	d.cli("approvals", "approve", list[0].ID)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return d, agent
}

// BenchmarkServeRSS100 keeps 100 actions in flight at once (each `sleep 1;
// echo done` on a real sshd), then reports the daemon's peak resident set
// size (VmHWM).
func BenchmarkServeRSS100(b *testing.B) {
	d, agent := benchDaemon(b, 128) // room for all 100 at once
	ctx := context.Background()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				a, err := agent.RunAction(ctx, api.ActionRequest{Target: "box", Command: "sleep 1; echo done"}, api.Events{})
				if err == nil && !a.Success() {
					err = fmt.Errorf("%s: %s", a.Outcome, a.Detail)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(vmHWM(b, d.PID()))/1024, "peak-RSS-MiB")
}

// BenchmarkServeRSSLargeOutput runs 50 actions one after the other that
// each write 16 MiB of random bytes (8 MiB to stdout, 8 MiB to stderr:
// the store's cap of each), then reports the daemon's resident set
// (VmRSS) and its peak (VmHWM): the engine keeps no output in memory once
// it is stored.
func BenchmarkServeRSSLargeOutput(b *testing.B) {
	d, agent := benchDaemon(b, 4)
	ctx := context.Background()
	const cmd = "head -c 8388608 /dev/urandom; head -c 8388608 /dev/urandom >&2"
	for b.Loop() {
		for range 50 {
			a, err := agent.RunAction(ctx, api.ActionRequest{Target: "box", Command: cmd}, api.Events{})
			if err == nil && (!a.Success() || a.StdoutBytes != 8<<20 || a.StderrBytes != 8<<20) {
				err = fmt.Errorf("%s: %s, %d + %d bytes", a.Outcome, a.Detail, a.StdoutBytes, a.StderrBytes)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(procStatus(b, d.PID(), "VmRSS:"))/1024, "RSS-MiB")
	b.ReportMetric(float64(vmHWM(b, d.PID()))/1024, "peak-RSS-MiB")
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(tb testing.TB, pid int) int { return procStatus(tb, pid, "VmHWM:") }

// procStatus reads one "kB" line of /proc/PID/status.
func procStatus(tb testing.TB, pid int, key string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}
