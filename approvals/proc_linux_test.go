package approvals

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	rest := " S 1234 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615"
	for _, tc := range []struct {
		name, line string
		want       ProcStat
		zombie     bool
	}{
		{"plain", "42 (sleep)" + rest, ProcStat{ID: ProcessID{42, 987654}, PPID: 1234, Comm: "sleep"}, false},
		{"comm with ) and spaces", "42 (a) (b c)" + rest, ProcStat{ID: ProcessID{42, 987654}, PPID: 1234, Comm: "a) (b c"}, false},
		{"zombie", "42 (x) Z" + rest[2:], ProcStat{ID: ProcessID{42, 987654}, PPID: 1234, Comm: "x"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.ProcStat); diff != "" || got.zombie != tc.zombie {
				t.Errorf("parseStat (-want +got):\n%s zombie %v", diff, got.zombie)
			}
		})
	}
	for _, bad := range []string{"", "42", "(x) S 1", "42 (x) S", "x (y)" + rest, "42 (x) S notanumber" + rest[7:]} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	b, _ := os.ReadFile("/proc/self/stat")
	f.Add(string(b))
	f.Add("1 (a)b) S 0 " + strings.Repeat("0 ", 30))
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStat([]byte(s))
		if err == nil && (st.ID.PID <= 0 || st.PPID < 0) {
			t.Errorf("parseStat(%q) = %+v", s, st)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	b, _ := os.ReadFile("/proc/self/status")
	f.Add(string(b))
	f.Fuzz(func(t *testing.T, s string) {
		e, r, err := parseStatusIDs([]byte(s), "Uid:")
		if err == nil && (e < 0 || r < 0) {
			t.Errorf("parseStatusIDs(%q) = %d, %d", s, e, r)
		}
	})
}

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"sleep\x0060\x00", []string{"sleep", "60"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"setproctitle style", []string{"setproctitle style"}},
	} {
		if diff := cmp.Diff(tc.want, parseCmdline([]byte(tc.in))); diff != "" {
			t.Errorf("parseCmdline(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestProcFSDescribeSelf(t *testing.T) {
	p := &ProcFS{}
	st, err := p.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Describe(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	b, _ := os.ReadFile(exe)
	sum := sha256.Sum256(b)
	wd, _ := os.Getwd()
	want := Process{ProcStat: st, GID: os.Getegid(), User: got.User, ExeSHA256: hex.EncodeToString(sum[:]), Argv: os.Args, Cwd: wd}
	want.Exe = exe
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Describe(self) (-want +got):\n%s", diff)
	}
	if st.UID != os.Geteuid() || st.PPID != os.Getppid() {
		t.Errorf("Stat(self) uid %d ppid %d", st.UID, st.PPID)
	}
	if got.User == "" || got.User == strconv.Itoa(os.Geteuid()) && os.Geteuid() == 0 {
		t.Errorf("User = %q, want a name", got.User)
	}
	// A start time that is not the process's is another process.
	if _, err := p.Describe(ProcessID{st.ID.PID, st.ID.StartTime + 1}); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Describe with the wrong start time: err = %v, want ErrNoProcess", err)
	}
}

// TestHelperAnchor is not a test: run as a child with
// AIRLOCK_APPROVALS_HELPER=1, it is a non-shell agent process that runs a
// shell that runs sleep, prints sleep's pid, and waits.
func TestHelperAnchor(t *testing.T) {
	if os.Getenv("AIRLOCK_APPROVALS_HELPER") != "1" {
		return
	}
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.Stdout = os.Stdout
	cmd.Run()
	os.Exit(0)
}

// startAgent starts helper ─ sh ─ sleep and returns the helper and the
// pid of sleep.
func startAgent(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAnchor$")
	cmd.Env = append(os.Environ(), "AIRLOCK_APPROVALS_HELPER=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper printed %q", line)
	}
	return cmd, pid
}

func realEnv(t *testing.T, insp *ProcFS) *env {
	e := newEnv(t, func(o *Options) { o.Inspector = insp })
	e.sink.seen = make(chan EventKind, 64)
	return e
}

// TestRealProcessTree: helper (a Go binary) ─ sh ─ sleep. A request from
// sleep is anchored at the helper, skipping the shell; a process outside
// that tree gets another run; when the helper dies the run ends, and
// sleep, orphaned, cannot reach it.
func TestRealProcessTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		insp *ProcFS
	}{
		{"pidfd", &ProcFS{}},
		{"polling", &ProcFS{NoPidfd: true, PollInterval: 10 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := realEnv(t, tc.insp)
			ctx := context.Background()
			helper, sleepPID := startAgent(t)
			peer := Peer{PID: sleepPID, UID: os.Geteuid(), GID: os.Getegid()}
			run, err := e.s.ResolveLocal(ctx, peer)
			if err != nil {
				t.Fatal(err)
			}
			exe, _ := os.Executable()
			if run.Anchor.ID.PID != helper.Process.Pid || run.Anchor.Exe != exe || run.Anchor.Argv[1] != "-test.run=^TestHelperAnchor$" {
				t.Errorf("anchor = pid %d exe %s argv %q; want the helper %d", run.Anchor.ID.PID, run.Anchor.Exe, run.Anchor.Argv, helper.Process.Pid)
			}
			if len(run.Anchor.Chain) == 0 || run.Anchor.Chain[0].ID.PID != os.Getpid() {
				t.Errorf("anchor chain starts %+v, want this test process", run.Anchor.Chain)
			}
			// This test process is not inside the helper's tree: other run.
			other, err := e.s.ResolveLocal(ctx, Peer{PID: os.Getpid(), UID: os.Geteuid()})
			if err == nil && other.ID == run.ID {
				t.Errorf("a process outside the anchor's tree was admitted to its run")
			}

			syscall.Kill(helper.Process.Pid, syscall.SIGKILL)
			helper.Wait()
			waitKind(t, e.sink.seen, EventRunEnded)
			if got, _ := e.s.Run(ctx, run.ID); got.State != RunEnded || got.EndReason != EndAnchorExited {
				t.Errorf("run after the helper died: %v %v", got.State, got.EndReason)
			}
			// sleep lives on, reparented: it must not reach the old run.
			if got, err := e.s.ResolveLocal(ctx, peer); err == nil && got.ID == run.ID {
				t.Errorf("orphaned sleep still resolves to the ended run")
			}
		})
	}
}

// TestRealAnchorDeath: an explicit anchor (as airlock run registers
// itself) is a real sleep; killing it ends the run; a new sleep with the
// same argv is a new run.
func TestRealAnchorDeath(t *testing.T) {
	e := realEnv(t, &ProcFS{})
	ctx := context.Background()
	rv := e.reviewer("rita")
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	first := start()
	run, err := e.s.RegisterAnchor(ctx, Peer{PID: first.Process.Pid, UID: os.Geteuid()})
	if err != nil {
		t.Fatal(err)
	}
	q, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.s.Decide(ctx, rv, q.ID, Decision{Verdict: Approve})
	if o := recv(t, ch); o.err != nil {
		t.Fatal(o.err)
	}
	drain(e.sink.seen)
	// Killed but not yet reaped (a zombie) already counts as gone.
	first.Process.Kill()
	waitKind(t, e.sink.seen, EventRunEnded)
	first.Wait()
	if _, err := e.s.Authorize(ctx, run.ID, act("run-box", "ls"), nil); !errors.Is(err, ErrRunEnded) {
		t.Errorf("action after the anchor died: err = %v, want ErrRunEnded", err)
	}
	second := start()
	again, err := e.s.RegisterAnchor(ctx, Peer{PID: second.Process.Pid, UID: os.Geteuid()})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == run.ID || again.State != RunPending {
		t.Errorf("a new sleep 60: run %s %v; want a new pending run", again.ID, again.State)
	}
	if diff := cmp.Diff(run.Anchor.Argv, again.Anchor.Argv); diff != "" {
		t.Errorf("argv differ (-first +second):\n%s", diff)
	}
}

func TestProcFSWaitCancel(t *testing.T) {
	for _, p := range []*ProcFS{{}, {NoPidfd: true, PollInterval: 10 * time.Millisecond}} {
		t.Run(fmt.Sprintf("nopidfd=%v", p.NoPidfd), func(t *testing.T) {
			st, _ := p.Stat(os.Getpid())
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if err := p.Wait(ctx, st.ID); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait on a live process: err = %v, want DeadlineExceeded", err)
			}
			if !p.NoPidfd {
				// Linux 5.3+ (every supported kernel) has pidfds: the
				// fallback must not be what ran.
				if err := p.waitPidfd(ctx, st.ID); errors.Is(err, errNoPidfd) {
					t.Errorf("pidfd wait fell back to polling")
				}
			}
			if err := p.Wait(context.Background(), ProcessID{st.ID.PID, st.ID.StartTime + 1}); err != nil {
				t.Errorf("Wait on a process that is gone: %v", err)
			}
		})
	}
}

func TestProcFSRootOverride(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "7"), 0o755)
	os.WriteFile(filepath.Join(dir, "7", "stat"), []byte("7 (fake) S 1 "+strings.Repeat("0 ", 17)+"555 0 0"), 0o644)
	os.WriteFile(filepath.Join(dir, "7", "status"), []byte("Name:\tfake\nUid:\t1\t2\t2\t2\nGid:\t3\t4\t4\t4\n"), 0o644)
	got, err := (&ProcFS{Root: dir}).Stat(7)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ProcStat{ID: ProcessID{7, 555}, PPID: 1, UID: 2, Comm: "fake"}); !cmp.Equal(want, got) {
		t.Errorf("Stat = %+v, want %+v", got, want)
	}
}

// The card's warnings come from the real process: a deleted executable,
// and one the agent's own user may change.
func TestProcFSWarnsOfWeakEvidence(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	dir, err := os.MkdirTemp("", "airlock-weak-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string, asNobody bool) *exec.Cmd {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, sleep, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "60")
		if asNobody {
			os.Chown(path, uid, gid)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	describe := func(cmd *exec.Cmd) Process {
		t.Helper()
		p := &ProcFS{}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			st, err := p.Stat(cmd.Process.Pid)
			if err == nil && strings.HasSuffix(strings.TrimSuffix(st.Exe, " (deleted)"), filepath.Base(cmd.Path)) {
				d, err := p.Describe(st.ID)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d never ran %s: %+v %v", cmd.Process.Pid, cmd.Path, st, err)
			}
		}
	}

	owned := start("agent-owned", true)
	if got := describe(owned).Warnings; !slices.Contains(got, WarnExeWritable) {
		t.Errorf("an executable its own user owns: warnings %v", got)
	}
	deleted := start("agent-deleted", false)
	describe(deleted) // running it first
	os.Remove(deleted.Path)
	if got := describe(deleted).Warnings; !slices.Contains(got, WarnExeGone) {
		t.Errorf("a deleted executable: warnings %v", got)
	}
	plain := start("agent-plain", true)
	os.Chown(plain.Path, 0, 0)
	if got := describe(plain).Warnings; len(got) != 0 {
		t.Errorf("root's executable in a directory nobody may change, run by nobody: warnings %v", got)
	}
}

func TestAnchorWarningRules(t *testing.T) {
	for _, tc := range []struct {
		p    Process
		want []string
	}{
		{Process{ProcStat: ProcStat{Exe: "/usr/bin/python3", Comm: "python3", UID: 0}, ExeSHA256: "ab"}, nil},
		{Process{ProcStat: ProcStat{Comm: "node", UID: 1000}}, []string{WarnExeUnknown}},
		{Process{ProcStat: ProcStat{Exe: "/memfd:payload (deleted)", Comm: "x", UID: 1000}, ExeSHA256: "ab"}, []string{WarnExeGone}},
		{Process{ProcStat: ProcStat{Exe: "/usr/bin/tmux", Comm: "tmux: server", UID: 0}, ExeSHA256: "ab"}, []string{WarnSessionAnchor}},
		{Process{ProcStat: ProcStat{Exe: "/home/dev/.vscode-server/bin/abc/node", Comm: "node", UID: 0}, ExeSHA256: "ab"}, []string{WarnSessionAnchor}},
	} {
		if got := anchorWarnings(tc.p, os.Stat); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.p.ProcStat, got, tc.want)
		}
	}
}

// TestProcFSIDIsStatsID: the liveness read (stat alone) names the same
// process as Stat, and a pid with no process is ErrNoProcess.
func TestProcFSIDIsStatsID(t *testing.T) {
	var p ProcFS
	st, err := p.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.ID(os.Getpid())
	if err != nil || id != st.ID {
		t.Fatalf("ID = %v, %v; Stat's ID %v", id, err, st.ID)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ID(cmd.Process.Pid); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("ID of an exited, reaped process: %v, want ErrNoProcess", err)
	}
	var store Store
	store.insp = &p
	if !store.alive(st.ID) || store.alive(ProcessID{PID: st.ID.PID, StartTime: st.ID.StartTime + 1}) {
		t.Fatal("alive does not tell this process from another at its pid")
	}
}
