package main

import (
	"bufio"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestBenchReport is the system benchmark report: in one run, side by side
// against the same real sshd and account, it times single actions
// (`true`) through airlock-ssh and the gateway (`airlock serve` as its own
// process), bare sshexec.Run, bare x/crypto/ssh and the OpenSSH client
// without multiplexing, one at a time and 16 at a time. It writes
// docs/benchmarks-report.md (percentiles, throughput, ratios, the
// gateway's CPU per action and memory, its audit append latency under the
// load, verification throughput on the resulting log, the machine) and
// docs/benchmarks-latency.png (the latency distributions).
//
// Timings do not belong in pass/fail tests: this runs only when
// AIRLOCK_BENCH_REPORT=1 (.ci/bench-report sets it), without the race
// detector, on an otherwise idle machine. AIRLOCK_BENCH_REPORT_DIR writes
// the files elsewhere; AIRLOCK_BENCH_REPORT_SCALE (default 1) multiplies
// the number of actions.
func TestBenchReport(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_REPORT") != "1" {
		t.Skip("set AIRLOCK_BENCH_REPORT=1 (or run .ci/bench-report) to measure and write the benchmark report")
	}
	scale := 1.0
	if v := os.Getenv("AIRLOCK_BENCH_REPORT_SCALE"); v != "" {
		var err error
		if scale, err = strconv.ParseFloat(v, 64); err != nil || scale <= 0 {
			t.Fatalf("AIRLOCK_BENCH_REPORT_SCALE=%q: want a positive number", v)
		}
	}
	outDir := os.Getenv("AIRLOCK_BENCH_REPORT_DIR")
	if outDir == "" {
		outDir = filepath.Join(repoRoot(t), "docs")
	}
	profileOut := os.Getenv("AIRLOCK_BENCH_REPORT_PROFILE")
	machine := describeMachine()

	s := sshtest.NewSSHD(t, sshtest.Options{})
	d, cfgFile, state := startBenchDaemon(t, s, profileOut != "")
	_, sshBin := binaries(t)
	viaGateway := airlockSSHAction(d, sshBin, "true")
	ctx := context.Background()
	// The same request from this process, with no helper process: what
	// the socket, HTTP and the event stream cost apart from a process.
	ctl, err := api.ReadControl(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewLocalClient(ctl.Socket, ctl.Token)
	viaClient := func() error {
		a, err := client.RunAction(ctx, api.ActionRequest{Target: "box", Command: "true"}, api.Events{})
		if err == nil && !a.Success() {
			err = fmt.Errorf("api client: %v: %s", a.Outcome, a.Detail)
		}
		return err
	}
	// Every airlock-ssh this process starts belongs to one run (its
	// anchor is this process), and this process's own requests to another
	// (its anchor is its parent): approve each once.
	for _, run := range []func() error{viaGateway, viaClient} {
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

	// Where the time goes, measured in the sequential rounds.
	var timing atomic.Bool
	phaseTimes := &phaseAcc{}
	paths := append([]reportPath{
		{name: "airlock-ssh", what: "`airlock-ssh box true` through `airlock serve` (process start, local socket, run resolution, approval check, durable audit entries, one fresh SSH connection)", run: viaGateway},
		{name: "api client", what: "the same request from the benchmark process with `api.Client` over the local socket: airlock-ssh's path without its process", run: viaClient},
	}, directPaths(t, s, &timing, phaseTimes)...)
	for _, p := range paths { // warm up: page cache, first connections
		for range 3 {
			if err := p.run(); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
	}

	modes := []reportMode{
		{name: "sequential", conc: 1, actions: int(250 * scale)},
		{name: "16 parallel", conc: 16, actions: int(800 * scale)},
		{name: "32 parallel", conc: 32, actions: int(400 * scale)},
		{name: "64 parallel", conc: 64, actions: int(400 * scale)},
	}
	const rounds = 5
	gw := gatewayProbe{pid: d.PID(), metricsURL: d.HTTPURL + "/metrics"}
	for mi := range modes {
		measureMode(t, &modes[mi], paths, gw, rounds, &timing, phaseTimes)
	}
	mcpPaths := measureMCP(t, d, s, rounds, max(2, int(30*scale/rounds)))
	replicaResults := measureReplicas(t, s, viaClient, gw, rounds, max(16, int(400*scale/rounds)))
	peakBefore, _ := gw.memory(t)
	// The peak so far holds the reviewer logins' password hashing (19 MiB
	// of argon2id each) and the bursts above: start it again, so that the
	// peak below is the 100 actions'.
	gw.resetPeak(t)
	// 100 actions in flight at once, each holding its connection for two
	// seconds: the gateway's memory with that many.
	if _, _, err := runBatch(airlockSSHAction(d, sshBin, "sleep 2"), 100, 100); err != nil {
		t.Fatalf("100 concurrent actions: %v", err)
	}
	peakRSS, rss := gw.memory(t)
	t.Logf("peak RSS before the 100 concurrent actions %d KiB, after %d KiB", peakBefore, peakRSS)

	helper, floor := helperStart(t, sshBin), processFloor(t)
	if profileOut != "" {
		profileGateway(t, pprofAddr(t, d), profileOut, viaGateway, 16)
	}

	// Verification of the resulting log, once the gateway has stopped.
	d.signal(syscall.SIGTERM)
	ver := measureVerify(t, state, cfgFile)

	rep := report{machine: machine, paths: paths, modes: modes, peakRSSKiB: peakRSS, peakBeforeKiB: peakBefore, rssKiB: rss, verify: ver,
		when: time.Now().UTC()}
	rep.bars = phaseTimes.bars(modes[0], paths, helper)
	rep.helper, rep.floor = helper, floor
	rep.mcp = mcpPaths
	rep.replicas, rep.pgVersion = replicaResults, pgtest.Version()
	rep.write(t, outDir)
}

// helperStart is the helper's own start: the mean time of airlock-ssh
// --version, run 50 times.
func helperStart(t *testing.T, sshBin string) time.Duration {
	var helper time.Duration
	for range 50 {
		t0 := time.Now()
		if out, err := exec.Command(sshBin, "--version").CombinedOutput(); err != nil {
			t.Fatalf("airlock-ssh --version: %v: %s", err, out)
		}
		helper += time.Since(t0)
	}
	return helper / 50
}

// startBenchDaemon runs `airlock serve` for the report on s, with a
// reviewer alice, room for many actions at once on target box, and a
// profile listener when profile is set.
func startBenchDaemon(t *testing.T, s *sshtest.SSHD, profile bool) (d *daemon, cfgFile, state string) {
	t.Helper()
	cfgFile, state = writeConfig(t, s, "run")
	src, _ := os.ReadFile(cfgFile)
	// Room for 16 at once: the comparison is of paths, not of the default
	// max_parallel, which would queue the rest.
	cfgText := strings.Replace(string(src), `target "box" {`, "target \"box\" {\n  max_parallel = 128", 1)
	if profile {
		// The profile listener binds a port of its own; the gateway does
		// not log it (pprofAddr finds it).
		cfgText += "telemetry {\n  pprof_listen = \"127.0.0.1:0\"\n}\n"
	}
	os.WriteFile(cfgFile, []byte(cfgText), 0o600)
	pw := filepath.Join(filepath.Dir(cfgFile), "pw")
	os.WriteFile(pw, []byte(testkit.Password+"\n"), 0o600)
	if _, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": pw}, "reviewer", "add", "alice", "--config", cfgFile); code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	return startDaemon(t, cfgFile, state), cfgFile, state
}

// airlockSSHAction runs command on box with the airlock-ssh at sshBin,
// through d.
func airlockSSHAction(d *daemon, sshBin, command string) func() error {
	return func() error {
		cmd := exec.Command(sshBin, "box", command)
		cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("airlock-ssh: %v: %s", err, out)
		}
		return nil
	}
}

// directPaths are the paths that reach s without the gateway: sshexec,
// x/crypto/ssh and the OpenSSH client. While timing is set, the first two
// add the time of each of their phases to phaseTimes.
func directPaths(t *testing.T, s *sshtest.SSHD, timing *atomic.Bool, phaseTimes *phaseAcc) []reportPath {
	ctx := context.Background()
	cfg := &sshexec.Config{Addr: s.Addr, User: s.User, Signers: []ssh.Signer{s.ClientSigner},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}}, Timeout: 30 * time.Second}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600)
	host, sshPort, _ := strings.Cut(s.Addr, ":")
	return []reportPath{
		{name: "sshexec", what: "bare `sshexec.Run` in the benchmark process (pinned host key)", run: func() error {
			t0 := time.Now()
			r, err := sshexec.Run(ctx, cfg, "true")
			if err == nil && !r.Success() {
				err = fmt.Errorf("%v: %s", r.Outcome, r.Detail)
			}
			if err == nil && timing.Load() {
				tm := r.Timings
				phaseTimes.add("sshexec", []string{"dial", "handshake", "auth", "session", "command"},
					tm.Dial, tm.Handshake, tm.Auth, tm.Session, tm.Command)
				phaseTimes.add("sshexec", []string{"close"}, time.Since(t0)-(tm.Dial+tm.Handshake+tm.Auth+tm.Session+tm.Command))
			}
			return err
		}},
		{name: "xcrypto", what: "bare `x/crypto/ssh`: `Dial` with a fixed host key, `NewSession`, `Run`, `Close`", run: func() error {
			t0 := time.Now()
			c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(s.ClientSigner)},
				HostKeyCallback: ssh.FixedHostKey(s.HostKey), HostKeyAlgorithms: []string{s.HostKey.Type()}, Timeout: 30 * time.Second})
			if err != nil {
				return err
			}
			t1 := time.Now()
			sess, err := c.NewSession()
			if err != nil {
				c.Close()
				return err
			}
			t2 := time.Now()
			err = sess.Run("true")
			t3 := time.Now()
			sess.Close()
			c.Close()
			if err == nil && timing.Load() {
				phaseTimes.add("xcrypto", []string{"dial, handshake, auth", "session", "command", "close"},
					t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), time.Since(t3))
			}
			return err
		}},
		{name: "openssh", what: "`ssh -o ControlMaster=no -o ControlPath=none -o BatchMode=yes -o StrictHostKeyChecking=yes` with the same key and known_hosts line", run: func() error {
			out, err := exec.Command("ssh", "-F", "/dev/null", "-i", s.ClientKeyFile, "-p", sshPort,
				"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes",
				"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+kh, "-o", "IdentitiesOnly=yes",
				"-o", "LogLevel=ERROR", s.User+"@"+host, "true").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ssh: %v: %s", err, out)
			}
			return nil
		}},
	}
}

// measureMode runs m's actions on every path, m.conc at a time, in rounds,
// and records their latencies, the gateway's CPU and, for the sequential
// mode, where the time goes.
func measureMode(t *testing.T, m *reportMode, paths []reportPath, gw gatewayProbe, rounds int, timing *atomic.Bool, phaseTimes *phaseAcc) {
	m.results = make([]pathResult, len(paths))
	appendBefore := gw.appendHistogram(t)
	commitBefore, batchBefore := gw.histogram(t, "airlock_audit_commit_seconds"), gw.histogram(t, "airlock_audit_commit_entries")
	for r := range rounds {
		// Interleaved rounds, the order rotated each time: drift in
		// the machine's load falls on every path alike.
		for k := range paths {
			i := (k + r) % len(paths)
			n := m.actions / rounds
			var cpu0 time.Duration
			var phases0 map[string]float64
			throughGateway := paths[i].name == "airlock-ssh" || paths[i].name == "api client"
			if paths[i].name == "airlock-ssh" {
				cpu0 = gw.cpu(t)
			}
			if throughGateway {
				phases0 = gw.phaseSums(t)
			}
			timing.Store(m.conc == 1)
			lat, wall, err := runBatch(paths[i].run, n, m.conc)
			timing.Store(false)
			if err != nil {
				t.Fatalf("%s, %s: %v", paths[i].name, m.name, err)
			}
			res := &m.results[i]
			res.lat = append(res.lat, lat...)
			res.wall += wall
			if throughGateway && m.conc == 1 {
				for ph, v := range gw.phaseSums(t) {
					phaseTimes.addGateway(paths[i].name, ph, time.Duration((v-phases0[ph])*float64(time.Second)))
				}
			}
			if paths[i].name == "airlock-ssh" {
				res.gatewayCPU += gw.cpu(t) - cpu0
			}
		}
	}
	m.appendLat = gw.appendHistogram(t).minus(appendBefore)
	m.commitLat = gw.histogram(t, "airlock_audit_commit_seconds").minus(commitBefore)
	m.batch = gw.histogram(t, "airlock_audit_commit_entries").minus(batchBefore)
	t.Logf("%s done", m.name)
}

// write writes the report's markdown and its two plots into outDir.
func (r *report) write(t *testing.T, outDir string) {
	md := r.markdown()
	if err := os.WriteFile(filepath.Join(outDir, "benchmarks-report.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(outDir, "benchmarks-latency.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, r.plot()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = os.Create(filepath.Join(outDir, "benchmarks-phases.png")); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, r.plotPhases()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and benchmarks-latency.png:\n%s", filepath.Join(outDir, "benchmarks-report.md"), md)
}

// profileGateway writes a CPU profile of airlock serve to out while
// airlock-ssh actions run, conc at a time (AIRLOCK_BENCH_REPORT_PROFILE):
// `go tool pprof -top out` then shows where the gateway's time goes.
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

func profileGateway(t *testing.T, addr, out string, run func() error, conc int) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan struct{})
	got := make(chan result, 1)
	go func() {
		defer close(done)
		// The profile runs for its seconds and is written once they end;
		// the load below is sized to outlast them.
		resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=20")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{b, err}
	}()
	var wg sync.WaitGroup
	var actions atomic.Int64
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
				actions.Add(1)
			}
		})
	}
	r := <-got
	wg.Wait()
	// Divide the profile's total by this for CPU per action (the last few
	// finished just after the profile ended).
	t.Logf("actions finished while profiling: %d", actions.Load())
	if r.err != nil {
		t.Fatalf("profile: %v", r.err)
	}
	if err := os.WriteFile(out, r.b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote a CPU profile of airlock serve to %s", out)
}

// reportPath is one way of running an action.
type reportPath struct {
	name, what string
	run        func() error
}

type reportMode struct {
	name      string
	conc      int
	actions   int
	results   []pathResult // by path
	appendLat histogram    // the gateway's audit appends during this mode
	commitLat histogram    // its group commits
	batch     histogram    // entries per group commit
}

type pathResult struct {
	lat        []time.Duration
	wall       time.Duration
	gatewayCPU time.Duration // airlock serve's user+system time, airlock-ssh only
}

func (r pathResult) throughput() float64 { return float64(len(r.lat)) / r.wall.Seconds() }

// runBatch runs n actions, conc at a time, and returns each one's latency
// and the wall time of the batch.
func runBatch(run func() error, n, conc int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := run()
				lat[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start), firstErr
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// percentile is the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// gatewayProbe reads the airlock serve process's counters.
type gatewayProbe struct {
	pid        int
	metricsURL string
}

// cpu is the process's user+system time so far, from /proc/PID/stat.
func (g gatewayProbe) cpu(t *testing.T) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// Fields 14 and 15 of stat (utime, stime), in clock ticks; f starts at
	// field 3. The kernel's USER_HZ is 100 on every Linux architecture Go
	// supports.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// resetPeak starts the process's peak resident set (VmHWM) again from its
// current one (proc(5): clear_refs, 5).
func (g gatewayProbe) resetPeak(t *testing.T) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", g.pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak resident set: %v", err)
	}
}

// memory returns the process's peak and current resident set, in KiB.
func (g gatewayProbe) memory(t *testing.T) (peak, now int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			peak, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			now, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return peak, now
}

// histogram is a cumulative Prometheus histogram: counts by upper bound.
type histogram struct {
	bounds []float64 // seconds, ascending, +Inf last
	counts []float64 // cumulative
	sum    float64
}

// appendHistogram reads airlock_audit_append_seconds from /metrics.
func (g gatewayProbe) appendHistogram(t *testing.T) histogram {
	return g.histogram(t, "airlock_audit_append_seconds")
}

// histogram reads one histogram from /metrics.
func (g gatewayProbe) histogram(t *testing.T, name string) histogram {
	resp, err := http.Get(g.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h histogram
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"_sum "); ok {
			h.sum, _ = strconv.ParseFloat(v, 64)
		}
		rest, ok := strings.CutPrefix(sc.Text(), name+`_bucket{le="`)
		if !ok {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		b, err1 := strconv.ParseFloat(le, 64)
		c, err2 := strconv.ParseFloat(count, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("metrics: %q", sc.Text())
		}
		h.bounds, h.counts = append(h.bounds, b), append(h.counts, c)
	}
	if len(h.bounds) == 0 {
		t.Fatalf("metrics: no %s histogram", name)
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum - o.sum}
	for i := range d.counts {
		d.counts[i] -= o.counts[i]
	}
	return d
}

func (h histogram) total() float64 { return h.counts[len(h.counts)-1] }

// quantile interpolates linearly within the bucket holding q, as
// Prometheus's histogram_quantile does.
func (h histogram) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return time.Duration((lower + (upper-lower)*frac) * float64(time.Second))
		}
		lower, below = h.bounds[i], c
	}
	return 0
}

type verifyResult struct {
	entries int64
	inProc  time.Duration // median auditchain.Verify
	cli     time.Duration // median `airlock audit verify`, process included
}

// measureVerify verifies the gateway's audit log five times in process and
// five times with the CLI, and keeps the medians.
func measureVerify(t *testing.T, state, cfgFile string) verifyResult {
	db := filepath.Join(state, "audit.db")
	key, err := auditchain.ReadVerifierKey(filepath.Join(state, "keys", "checkpoint.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := auditchain.ReadTrustedNotes(filepath.Join(state, "checkpoints.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	airlock, _ := binaries(t)
	var r verifyResult
	var in, cli []time.Duration
	for range 5 {
		t0 := time.Now()
		rep, err := auditchain.Verify(context.Background(), auditchain.VerifyOptions{Path: db, Key: key, Trusted: trusted})
		in = append(in, time.Since(t0))
		if err != nil || !rep.Intact() {
			t.Fatalf("verify: %v %+v", err, rep)
		}
		r.entries = rep.Entries
		t0 = time.Now()
		if out, err := exec.Command(airlock, "audit", "verify", "--config", cfgFile).CombinedOutput(); err != nil {
			t.Fatalf("airlock audit verify: %v: %s", err, out)
		}
		cli = append(cli, time.Since(t0))
	}
	slices.Sort(in)
	slices.Sort(cli)
	r.inProc, r.cli = in[len(in)/2], cli[len(cli)/2]
	return r
}

// machine describes where the report was measured.
type machine struct {
	cpu, mem, os, kernel, goVersion, openssh, load string
	cpus                                           int
}

func describeMachine() machine {
	m := machine{goVersion: runtime.Version(), cpus: runtime.NumCPU(), cpu: "unknown CPU", os: "unknown OS"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
		m.mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.os = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("ssh", "-V").CombinedOutput(); err == nil {
		m.openssh = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.load = strings.Join(f[:3], " ")
		}
	}
	return m
}

type report struct {
	machine       machine
	paths         []reportPath
	modes         []reportMode
	bars          []phaseBar
	helper, floor time.Duration // airlock-ssh --version; a static Go hello world
	mcp           []mcpPath
	replicas      []replicaResult
	pgVersion     string
	peakRSSKiB    int
	peakBeforeKiB int
	rssKiB        int
	verify        verifyResult
	when          time.Time
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func (r *report) pathIndex(name string) int {
	return slices.IndexFunc(r.paths, func(p reportPath) bool { return p.name == name })
}

func (r *report) markdown() string {
	var b strings.Builder
	m := r.machine
	fmt.Fprintf(&b, "# System benchmark report\n\n")
	fmt.Fprintf(&b, "Written by `TestBenchReport` (`cmd/airlock/report_test.go`), run by `.ci/bench-report`;\n")
	fmt.Fprintf(&b, "do not edit by hand: run it again. Measured %s.\n\n", r.when.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "One run, side by side: every path below runs the command `true` as one action over\n")
	fmt.Fprintf(&b, "one fresh SSH connection, against the same OpenSSH `sshd` on loopback and the same\n")
	fmt.Fprintf(&b, "login account (`/bin/sh` as its shell). The paths take turns in %d interleaved rounds,\n", 5)
	fmt.Fprintf(&b, "so that a change in the machine's load falls on all of them alike.\n\n")
	for _, p := range r.paths {
		fmt.Fprintf(&b, "- **%s**: %s;\n", p.name, p.what)
	}
	fmt.Fprintf(&b, "\n## Machine\n\n")
	fmt.Fprintf(&b, "%s, %d logical CPUs, %s memory; %s, Linux %s; %s; %s; load average at start %s.\n",
		m.cpu, m.cpus, m.mem, m.os, m.kernel, m.goVersion, m.openssh, m.load)

	bare := r.pathIndex("sshexec")
	openssh := r.pathIndex("openssh")
	for _, mode := range r.modes {
		fmt.Fprintf(&b, "\n## %s: %d actions per path", capitalize(mode.name), len(mode.results[0].lat))
		if mode.conc > 1 {
			fmt.Fprintf(&b, ", %d in flight", mode.conc)
		}
		fmt.Fprintf(&b, "\n\nLatency is each action's own, start to end, in ms; throughput is actions per second of wall time.\n\n")
		fmt.Fprintf(&b, "| path | p50 | p95 | p99 | throughput | p50 ÷ sshexec | p99 ÷ sshexec | throughput ÷ sshexec | p50 ÷ openssh |\n")
		fmt.Fprintf(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		sorted := make([][]time.Duration, len(mode.results))
		for i, res := range mode.results {
			sorted[i] = slices.Sorted(slices.Values(res.lat))
		}
		for i, res := range mode.results {
			p50, p95, p99 := percentile(sorted[i], .5), percentile(sorted[i], .95), percentile(sorted[i], .99)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f/s | %.2f | %.2f | %.2f | %.2f |\n", r.paths[i].name, ms(p50), ms(p95), ms(p99), res.throughput(),
				ratio(p50, percentile(sorted[bare], .5)), ratio(p99, percentile(sorted[bare], .99)),
				res.throughput()/mode.results[bare].throughput(), ratio(p50, percentile(sorted[openssh], .5)))
		}
	}

	gwi := r.pathIndex("airlock-ssh")
	fmt.Fprintf(&b, "\n## The gateway under that load\n\n")
	fmt.Fprintf(&b, "`airlock serve` ran as its own process; its CPU time is user + system time from\n")
	fmt.Fprintf(&b, "`/proc/PID/stat` over the airlock-ssh rounds (10 ms ticks), divided by their actions.\n")
	fmt.Fprintf(&b, "Audit append latency is the gateway's own `airlock_audit_append_seconds` histogram\n")
	fmt.Fprintf(&b, "(from `/metrics`, read before and after each load; interpolated within buckets that\n")
	fmt.Fprintf(&b, "double in width, so read it to within a factor of two). Each action appends three durable entries.\n")
	fmt.Fprintf(&b, "A group commit (`airlock_audit_commit_seconds`) is one transaction of the writer, made durable, whatever its size;\n")
	fmt.Fprintf(&b, "an append's latency beyond it is waiting: for the commit before it, and for the CPU.\n\n")
	fmt.Fprintf(&b, "| load | gateway CPU per action | audit appends | append p50 | p95 | p99 | group commit p50 | p99 | entries per commit |\n")
	fmt.Fprintf(&b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, mode := range r.modes {
		res := mode.results[gwi]
		h := mode.appendLat
		c, n := mode.commitLat, mode.batch
		perCommit := 0.0
		if n.total() > 0 {
			perCommit = n.sum / n.total()
		}
		fmt.Fprintf(&b, "| %s | %.2f ms | %.0f | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f |\n", mode.name,
			float64(res.gatewayCPU)/float64(time.Millisecond)/float64(len(res.lat)), h.total(),
			msf(h.quantile(.5)), msf(h.quantile(.95)), msf(h.quantile(.99)), msf(c.quantile(.5)), msf(c.quantile(.99)), perCommit)
	}
	fmt.Fprintf(&b, "\nMemory of `airlock serve`, peak resident set (VmHWM): %.1f MiB over everything above (which includes\n",
		float64(r.peakBeforeKiB)/1024)
	fmt.Fprintf(&b, "reviewer logins: each password check holds 19 MiB of argon2id for its time), and %.1f MiB while 100 actions\n",
		float64(r.peakRSSKiB)/1024)
	fmt.Fprintf(&b, "were in flight at once (`airlock-ssh box 'sleep 2'`, 100 started together; the peak started again from\n")
	fmt.Fprintf(&b, "the resident set just before, through `/proc/PID/clear_refs`); resident at the end (VmRSS) %.1f MiB.\n",
		float64(r.rssKiB)/1024)
	r.phasesMarkdown(&b)
	r.mcpMarkdown(&b)
	r.replicasMarkdown(&b)

	v := r.verify
	fmt.Fprintf(&b, "\n## Verifying the resulting audit log\n\n")
	fmt.Fprintf(&b, "The gateway's log after the run, %d entries (chain, Merkle tree, signed checkpoints), median of five:\n\n", v.entries)
	fmt.Fprintf(&b, "| how | time | entries/s |\n| --- | ---: | ---: |\n")
	fmt.Fprintf(&b, "| `auditchain.Verify` in process | %s ms | %.0f |\n", ms(v.inProc), float64(v.entries)/v.inProc.Seconds())
	fmt.Fprintf(&b, "| `airlock audit verify` (process start included) | %s ms | %.0f |\n", ms(v.cli), float64(v.entries)/v.cli.Seconds())
	fmt.Fprintf(&b, "\nA log this small measures fixed costs (opening the database, reading the key) more than\n")
	fmt.Fprintf(&b, "the per-entry rate; `BenchmarkVerify` in [benchmarks.md](benchmarks.md) measures the rate on 10,000 entries.\n")

	fmt.Fprintf(&b, "\n## Latency distributions\n\n")
	fmt.Fprintf(&b, "![Latency CDFs: sequential and 16 parallel above, 32 and 64 parallel below](benchmarks-latency.png)\n\n")
	fmt.Fprintf(&b, "Cumulative distribution of per-action latency, one panel per load (the number above it is how many in flight:\n")
	fmt.Fprintf(&b, "sequential and 16 above, 32 and 64 below);\n")
	fmt.Fprintf(&b, "x is latency in ms (the tick labels), y the fraction of actions at most that slow (grid lines at\n")
	fmt.Fprintf(&b, "0.25, 0.5, 0.75, 0.95). ")
	for i, p := range r.paths {
		sep := ", "
		if i == len(r.paths)-1 {
			sep = ".\n"
		}
		fmt.Fprintf(&b, "%s: **%s**%s", plotColorNames[i], p.name, sep)
	}
	return b.String()
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
func msf(d time.Duration) float64      { return float64(d) / float64(time.Millisecond) }

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// The plot's colours, by path index, and their names for the legend.
var (
	plotColors = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, // blue
		{0xff, 0x7f, 0x0e, 0xff}, // orange
		{0x2c, 0xa0, 0x2c, 0xff}, // green
		{0xd6, 0x27, 0x28, 0xff}, // red
		{0x94, 0x67, 0xbd, 0xff}, // purple
	}
	plotColorNames = []string{"blue", "orange", "green", "red", "purple"}
)

// plot draws one panel per mode with the CDF of every path's latencies,
// with the standard library only (digits from a built-in 3×5 font).
func (r *report) plot() image.Image {
	const pw, ph, margin, gap = 560, 360, 48, 24
	rows := (len(r.modes) + 1) / 2
	w := 2*pw + gap + 2*margin
	h := rows*(ph+margin) + margin
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for mi, mode := range r.modes {
		x0 := margin + (mi%2)*(pw+gap)
		y0 := margin + (mi/2)*(ph+margin)
		var xmax time.Duration
		sorted := make([][]time.Duration, len(mode.results))
		for i, res := range mode.results {
			sorted[i] = slices.Sorted(slices.Values(res.lat))
			xmax = max(xmax, percentile(sorted[i], .995))
		}
		step := niceStep(msf(xmax) / 6)
		xmaxMS := math.Ceil(msf(xmax)/step) * step
		px := func(v float64) int { return x0 + int(v/xmaxMS*float64(pw-1)) }
		py := func(f float64) int { return y0 + ph - 1 - int(f*float64(ph-1)) }
		grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
		black := color.RGBA{0, 0, 0, 0xff}
		for _, f := range []float64{.25, .5, .75, .95} {
			hline(img, x0, x0+pw-1, py(f), grey)
		}
		for v := step; v <= xmaxMS+1e-9; v += step {
			vline(img, px(v), y0, y0+ph-1, grey)
		}
		// Axes and ticks.
		hline(img, x0, x0+pw-1, y0+ph-1, black)
		vline(img, x0, y0, y0+ph-1, black)
		for v := 0.0; v <= xmaxMS+1e-9; v += step {
			vline(img, px(v), y0+ph-1, y0+ph+4, black)
			label := strconv.FormatFloat(v, 'f', -1, 64)
			drawText(img, px(v)-textWidth(label)/2, y0+ph+9, label, black)
		}
		for _, f := range []float64{0, .5, 1} {
			hline(img, x0-5, x0, py(f), black)
			label := strconv.FormatFloat(f, 'f', -1, 64)
			drawText(img, x0-8-textWidth(label), py(f)-5, label, black)
		}
		// The mode: "1" or "16" above the panel, the number in flight.
		drawText(img, x0, y0-18, strconv.Itoa(mode.conc), black)
		for i := range sorted {
			n := len(sorted[i])
			prevX, prevY := px(min(msf(sorted[i][0]), xmaxMS)), py(0)
			for k, d := range sorted[i] {
				x := px(min(msf(d), xmaxMS))
				y := py(float64(k+1) / float64(n))
				line(img, prevX, prevY, x, prevY, plotColors[i]) // step: across, then up
				line(img, x, prevY, x, y, plotColors[i])
				prevX, prevY = x, y
			}
		}
	}
	return img
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func hline(img *image.RGBA, x1, x2, y int, c color.RGBA) {
	for x := x1; x <= x2; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y1, y2 int, c color.RGBA) {
	for y := y1; y <= y2; y++ {
		img.SetRGBA(x, y, c)
	}
}

// line draws an axis-parallel segment two pixels thick.
func line(img *image.RGBA, x1, y1, x2, y2 int, c color.RGBA) {
	if x1 > x2 {
		x1, x2 = x2, x1
	}
	if y1 > y2 {
		y1, y2 = y2, y1
	}
	for x := x1; x <= x2; x++ {
		for y := y1; y <= y2; y++ {
			img.SetRGBA(x, y, c)
			img.SetRGBA(x+1, y, c)
			img.SetRGBA(x, y-1, c)
		}
	}
}

// font3x5 holds digits and '.' as five rows of three bits.
var font3x5 = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2},
}

const fontScale = 2

func textWidth(s string) int { return len(s) * 4 * fontScale }

func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range s {
		g := font3x5[ch]
		for row := range 5 {
			for col := range 3 {
				if g[row]&(4>>col) == 0 {
					continue
				}
				for dy := range fontScale {
					for dx := range fontScale {
						img.SetRGBA(x+col*fontScale+dx, y+row*fontScale+dy, c)
					}
				}
			}
		}
		x += 4 * fontScale
	}
}
