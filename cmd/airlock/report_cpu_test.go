package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Where the gateway's CPU goes. A CPU profile of airlock serve, taken
// through its profile listener while airlock-ssh actions run 16 at a
// time, is summed by the label every goroutine working for an action
// carries (engine.ProfileLabel: the action's phase, HTTP handling, the
// audit writer); what carries no label is the Go runtime's own work
// (garbage collection, the scheduler) and the gateway's timers. Beside
// it, the floor: the CPU of the same SSH connections made by bare
// sshexec.Run in this process, which the gateway cannot go under.

// cpuProfileSeconds is how long each profile runs.
const cpuProfileSeconds = 20

// pprofAddr is the address of the daemon's profile listener: the one it
// listens on besides its HTTP listener.
func pprofAddr(t *testing.T, d *daemon) string {
	t.Helper()
	addrs, err := testkit.ListeningAddrs(d.PID())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if "http://"+a != d.HTTPURL {
			return a
		}
	}
	t.Fatalf("the gateway listens on %v: no profile listener beside %s", addrs, d.HTTPURL)
	return ""
}

// profileGateway takes a CPU profile of airlock serve (at addr) while
// run's actions run, conc at a time, and returns its breakdown: the
// profile, the number of actions that finished while it ran, and the
// process's CPU time per action over the same time, as the kernel counts
// it (/proc: everything, where the profile's samples miss the kernel's
// work on the process's behalf, such as loopback network delivery).
func profileGateway(t *testing.T, addr string, gw gatewayProbe, run func() error, conc int) cpuBreakdown {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan struct{})
	got := make(chan result, 1)
	var finished atomic.Int64
	var during atomic.Bool
	during.Store(true)
	c0, h0 := gw.cpu(t), time.Duration(helperCPU.Load())
	go func() {
		defer close(done)
		// The profile runs for its seconds and is written once they end;
		// the load below is sized to outlast them.
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, cpuProfileSeconds))
		during.Store(false)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{b, err}
	}()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := run(); err != nil {
					t.Errorf("profiling load: %v", err)
					return
				}
				if during.Load() {
					finished.Add(1)
				}
			}
		})
	}
	r := <-got
	c1, h1 := gw.cpu(t), time.Duration(helperCPU.Load())
	wg.Wait()
	if r.err != nil {
		t.Fatalf("profile: %v", r.err)
	}
	b := breakdown(t, r.b, finished.Load())
	b.prof, b.conc = r.b, conc
	b.process = (c1 - c0) / time.Duration(finished.Load())
	b.helper = (h1 - h0) / time.Duration(finished.Load())
	return b
}

// cpuShare is CPU time per action of one part of the gateway.
type cpuShare struct {
	name      string
	perAction time.Duration
	top       []string // the functions that take most of it, flat
}

// cpuBreakdown is a profile of airlock serve summed per label, and its
// heaviest functions, per action.
type cpuBreakdown struct {
	actions int64
	total   time.Duration // per action
	parts   []cpuShare    // heaviest first
	top     []cpuShare    // the heaviest functions overall, flat
	floor   time.Duration // bare sshexec.Run's CPU per action, in process
	conc    int           // actions at a time
	process time.Duration // airlock serve's CPU per action from /proc
	// helper is the CPU per action of airlock-ssh's processes, start to
	// exit (helperCPU), when the load runs them.
	helper time.Duration
	prof   []byte
}

// unlabelled names the samples that carry no label.
const unlabelled = "runtime and timers (no label)"

// breakdown sums prof's CPU samples per engine.ProfileLabel and per
// function, divided by actions.
func breakdown(t *testing.T, prof []byte, actions int64) cpuBreakdown {
	p, err := profile.Parse(bytes.NewReader(prof))
	if err != nil {
		t.Fatalf("reading the CPU profile: %v", err)
	}
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 || actions == 0 {
		t.Fatalf("the profile has no CPU time in nanoseconds (%v), or no action finished while it ran (%d)", p.SampleType, actions)
	}
	byPart, byFunc := map[string]int64{}, map[string]int64{}
	partFuncs := map[string]map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		part := unlabelled
		if l := s.Label[engine.ProfileLabel]; len(l) > 0 {
			part = l[0]
		}
		byPart[part] += v
		fn := "?"
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			fn = s.Location[0].Line[0].Function.Name
		}
		byFunc[fn] += v
		if partFuncs[part] == nil {
			partFuncs[part] = map[string]int64{}
		}
		partFuncs[part][fn] += v
	}
	per := func(v int64) time.Duration { return time.Duration(v / actions) }
	b := cpuBreakdown{actions: actions, total: per(total)}
	for part, v := range byPart {
		b.parts = append(b.parts, cpuShare{name: part, perAction: per(v), top: heaviest(partFuncs[part], 3, total)})
	}
	slices.SortFunc(b.parts, func(x, y cpuShare) int { return cmp.Compare(y.perAction, x.perAction) })
	for _, fn := range heaviest(byFunc, 15, 0) {
		b.top = append(b.top, cpuShare{name: fn, perAction: per(byFunc[fn])})
	}
	return b
}

// heaviest returns the n heaviest keys of m, with their share of total
// when total is set.
func heaviest(m map[string]int64, n int, total int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { return cmp.Compare(m[y], m[x]) })
	keys = keys[:min(n, len(keys))]
	if total > 0 {
		for i, k := range keys {
			keys[i] = fmt.Sprintf("%s %.0f%%", shortFunc(k), 100*float64(m[k])/float64(total))
		}
	}
	return keys
}

// shortFunc is a function name without its module path.
func shortFunc(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// benchSSHConfig is the connection every in-process path makes to s: its
// key, its pinned host key.
func benchSSHConfig(s *sshtest.SSHD) *sshexec.Config {
	return &sshexec.Config{Addr: s.Addr, User: s.User, Signers: []ssh.Signer{s.ClientSigner},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}}, Timeout: 30 * time.Second}
}

// clientCPU is the CPU time per action of n bare sshexec.Run calls to s,
// conc at a time, in this process (getrusage): the SSH client's own work
// for one fresh connection, which any gateway that opens one must do.
func clientCPU(t *testing.T, s *sshtest.SSHD, n, conc int) time.Duration {
	cfg := benchSSHConfig(s)
	run := func() error {
		r, err := sshexec.Run(context.Background(), cfg, "true")
		if err == nil && !r.Success() {
			err = fmt.Errorf("%v: %s", r.Outcome, r.Detail)
		}
		return err
	}
	if _, _, err := runBatch(run, conc, conc); err != nil { // warm up
		t.Fatal(err)
	}
	before := selfCPU(t)
	if _, _, err := runBatch(run, n, conc); err != nil {
		t.Fatal(err)
	}
	return (selfCPU(t) - before) / time.Duration(n)
}

// selfCPU is this process's user and system time so far.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMarkdown is the report's section on the gateway's CPU.
func (r *report) cpuMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Where the gateway's CPU goes\n\n")
	fmt.Fprintf(b, "A CPU profile of `airlock serve` (%d s, through `telemetry.pprof_listen`) while `airlock-ssh box true` ran 16 at a time, "+
		"summed by the label each goroutine working for an action carries (`%s`: the action's phase as in the table above, "+
		"`http` for reading requests and writing answers, `audit` for the audit log's writer), divided by the actions that finished "+
		"meanwhile. The SSH connection's goroutines are made during the handshake and keep its label: decrypting what the "+
		"connection receives counts under *handshake*. `TestBenchCPU` (`AIRLOCK_BENCH_CPU=DIR`) measures this part alone.\n\n",
		cpuProfileSeconds, engine.ProfileLabel)
	b.WriteString(r.cpu.markdown())
}

// markdown is the breakdown as the report shows it.
func (b cpuBreakdown) markdown() string {
	var w strings.Builder
	fmt.Fprintf(&w, "| part | CPU per action | share | heaviest functions (share of all samples) |\n| --- | ---: | ---: | --- |\n")
	for _, p := range b.parts {
		fmt.Fprintf(&w, "| %s | %.3f ms | %.0f%% | %s |\n", p.name, msf(p.perAction), 100*float64(p.perAction)/float64(b.total), strings.Join(p.top, " · "))
	}
	fmt.Fprintf(&w, "| **all** | **%.3f ms** | 100%% | %d actions in %d s |\n", msf(b.total), b.actions, cpuProfileSeconds)
	fmt.Fprintf(&w, "\nThe samples hold %.3f ms per action; the kernel counted %.3f ms of CPU per action for `airlock serve` over the same time "+
		"(10 ms ticks; it also counts work the samples miss, such as delivering the connections' loopback packets).\n",
		msf(b.total), msf(b.process))
	if b.helper > 0 {
		fmt.Fprintf(&w, "\n`airlock-ssh` itself, each a process from start to exit, took %.3f ms of CPU per action: the tax of a helper "+
			"process that the same request from a process that stays (the report's *api client*) does not pay.\n", msf(b.helper))
	}
	if b.floor > 0 {
		fmt.Fprintf(&w, "\n**The floor** is bare `sshexec.Run` in one process making the same connections %d at a time, counted the same way "+
			"(the process's user and system time): **%.3f ms** of CPU per action. `airlock serve` takes %.2f× that; its own share beyond "+
			"the connection is about **%.3f ms** per action (by the kernel's count less the floor; by the samples, %.3f ms outside the labels "+
			"dial, handshake, session and command).\n",
			b.conc, msf(b.floor), float64(b.process)/float64(b.floor), msf(b.process-b.floor), msf(b.total-b.connection()))
	}
	fmt.Fprintf(&w, "\nThe heaviest functions overall (flat, CPU per action):\n\n")
	for _, f := range b.top {
		fmt.Fprintf(&w, "- %.3f ms `%s`\n", msf(f.perAction), f.name)
	}
	return w.String()
}

// connection is the CPU per action of the SSH connection's labels.
func (b cpuBreakdown) connection() time.Duration {
	var d time.Duration
	for _, p := range b.parts {
		switch p.name {
		case "dial", "handshake", "session", "command":
			d += p.perAction
		}
	}
	return d
}

// TestBenchCPU profiles airlock serve under 16 parallel airlock-ssh
// actions (AIRLOCK_BENCH_CPU_CONC: another number) and writes the CPU
// breakdown (cpu.md) and the profile (cpu.pprof) to the directory
// AIRLOCK_BENCH_CPU names: the quick way to see where the gateway's CPU
// goes, without the whole report. AIRLOCK_BENCH_CPU_HELPER names another
// helper binary to run the load with (testdata/barehelper, say).
func TestBenchCPU(t *testing.T) {
	out := os.Getenv("AIRLOCK_BENCH_CPU")
	if out == "" {
		t.Skip("set AIRLOCK_BENCH_CPU=DIR to profile the gateway's CPU per action into DIR")
	}
	s := sshtest.NewSSHD(t, sshtest.Options{})
	d, _, _ := startBenchDaemon(t, s, true)
	_, sshBin := binaries(t)
	viaGateway := airlockSSHAction(d, sshBin, "true")
	approveFirst(t, d, viaGateway)
	if b := os.Getenv("AIRLOCK_BENCH_CPU_HELPER"); b != "" {
		// Another helper in airlock-ssh's place, in the run the real one
		// opened (both are the test's children): what would a different
		// helper cost?
		viaGateway = airlockSSHAction(d, b, "true")
	}
	conc := 16
	if v := os.Getenv("AIRLOCK_BENCH_CPU_CONC"); v != "" {
		var err error
		if conc, err = strconv.Atoi(v); err != nil || conc < 1 {
			t.Fatalf("AIRLOCK_BENCH_CPU_CONC=%q: want a positive number of actions at a time", v)
		}
	}
	if _, _, err := runBatch(viaGateway, 2*conc, conc); err != nil { // warm up
		t.Fatal(err)
	}
	gw := gatewayProbe{pid: d.PID(), metricsURL: d.HTTPURL + "/metrics"}
	b := profileGateway(t, pprofAddr(t, d), gw, viaGateway, conc)
	b.floor = clientCPU(t, s, 400, conc)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "cpu.pprof"), b.prof, 0o644)
	os.WriteFile(filepath.Join(out, "cpu.md"), []byte(b.markdown()), 0o644)
	t.Logf("load average %s\n%s", loadAverage(), b.markdown())
}

// approveFirst runs run once, approving the run it asks for.
func approveFirst(t *testing.T, d *daemon, run func() error) {
	t.Helper()
	first := make(chan error, 1)
	go func() { first <- run() }()
	list := d.pending(1)
	if _, errs, code := d.cli("approvals", "approve", list[0].ID, "--ttl", "8h"); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
