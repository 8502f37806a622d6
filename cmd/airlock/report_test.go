package main

import (
	"context"
	"fmt"
	"image/png"
	"math"
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
	d, cfgFile, state := startBenchDaemon(t, s, true)
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
		approveFirst(t, d, run)
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
	// Where the gateway's CPU goes, 16 airlock-ssh actions at a time,
	// beside the floor: the same connections from bare sshexec.Run.
	cpu := profileGateway(t, pprofAddr(t, d), gw, viaGateway, 16)
	cpu.floor = clientCPU(t, s, int(max(100, 400*scale)), 16)
	if profileOut != "" {
		if err := os.WriteFile(profileOut, cpu.prof, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Verification of the resulting log, once the gateway has stopped.
	d.signal(syscall.SIGTERM)
	ver := measureVerify(t, state, cfgFile)

	rep := report{machine: machine, paths: paths, modes: modes, peakRSSKiB: peakRSS, peakBeforeKiB: peakBefore, rssKiB: rss, verify: ver,
		when: time.Now().UTC()}
	rep.bars = phaseTimes.bars(modes[0], paths, helper)
	rep.helper, rep.floor = helper, floor
	rep.cpu = cpu
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
		out, err := cmd.CombinedOutput()
		if ps := cmd.ProcessState; ps != nil {
			helperCPU.Add(int64(ps.UserTime() + ps.SystemTime()))
		}
		if err != nil {
			return fmt.Errorf("airlock-ssh: %v: %s", err, out)
		}
		return nil
	}
}

// helperCPU sums the user and system time of every airlock-ssh process
// airlockSSHAction ran, as the kernel counted it when it was waited for.
var helperCPU atomic.Int64

// directPaths are the paths that reach s without the gateway: sshexec,
// x/crypto/ssh and the OpenSSH client. While timing is set, the first two
// add the time of each of their phases to phaseTimes.
func directPaths(t *testing.T, s *sshtest.SSHD, timing *atomic.Bool, phaseTimes *phaseAcc) []reportPath {
	ctx := context.Background()
	cfg := benchSSHConfig(s)
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
	m.load = loadAverage()
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
	cpu           cpuBreakdown
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
	r.cpuMarkdown(&b)
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
