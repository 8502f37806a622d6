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

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// BenchmarkServeRSS100 runs `airlock serve` as its own process and keeps
// 100 actions in flight at once (each `sleep 1; echo done` on a real
// sshd), then reports the daemon's peak resident set size (VmHWM).
func BenchmarkServeRSS100(b *testing.B) {
	sshtest.Need(b)
	s, err := sshtest.StartSSHD(sshtest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfgFile, state, port := writeConfig(b, s, "run")
	src, _ := os.ReadFile(cfgFile)
	// Room for all 100 at once.
	os.WriteFile(cfgFile, []byte(strings.Replace(string(src), `target "box" {`, "target \"box\" {\n  max_parallel = 128", 1)), 0o600)
	os.WriteFile(filepath.Join(filepath.Dir(cfgFile), "pw"), []byte("correct horse battery staple\n"), 0o600)
	if _, errs, code := runCLIEnv(b, map[string]string{"AIRLOCK_PASSWORD_FILE": filepath.Join(filepath.Dir(cfgFile), "pw")}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		b.Fatalf("reviewer add: %s", errs)
	}
	d := startDaemon(b, cfgFile, state, port)
	ctl, err := api.ReadControl(d.socket)
	if err != nil {
		b.Fatal(err)
	}
	agent := api.NewLocalClient(d.socket, ctl.Token)
	ctx := context.Background()
	// Approve this process's run once.
	done := make(chan error, 1)
	go func() {
		_, err := agent.RunAction(ctx, api.ActionRequest{Target: "box", Command: "true"}, api.Events{})
		done <- err
	}()
	list := d.pending(1)
	d.cli("approvals", "approve", list[0].ID)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
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

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(tb testing.TB, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}
