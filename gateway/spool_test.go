package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec"
)

// spoolBudgets sets the transfer block (spool_max, its share per
// requester, min_free) and every account's max_transfer.
func spoolBudgets(c *config.Config, total, perRequester, minFree, maxTransfer int64) {
	c.Transfer = config.Transfer{SpoolMax: total, SpoolMaxPerRequester: perRequester, MinFree: minFree}
	for _, t := range c.Targets {
		for _, a := range t.Accounts {
			a.MaxTransfer = maxTransfer
		}
	}
}

// spoolFiles counts the files in the gateway's transfer spool on disk.
func (g *testGateway) spoolFiles() int {
	g.t.Helper()
	ents, err := os.ReadDir(filepath.Join(g.cfg.StateDir, "spool"))
	if err != nil {
		g.t.Fatal(err)
	}
	return len(ents)
}

// wantSpoolFiles waits until the spool holds n files.
func (g *testGateway) wantSpoolFiles(n int, why string) {
	g.t.Helper()
	testkit.Eventually(g.t, func() bool { return g.spoolFiles() == n }, "%s: the spool holds %d files, want %d", why, g.spoolFiles(), n)
}

// wantNoSpace checks that err is the refusal of a full spool: 507, its
// code, and a message naming the budget (its configuration name).
func wantNoSpace(t *testing.T, err error, budget string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || ae.Err.Code != api.CodeInsufficientStorage || !strings.Contains(ae.Err.Message, budget) {
		t.Fatalf("got %v, want a 507 %s naming %s", err, api.CodeInsufficientStorage, budget)
	}
}

// randomFile writes n random bytes to path, readable by everyone.
func randomFile(t *testing.T, path string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// otherRun is a run of another local user (`airlock run` as its anchor)
// that uploads one file through the local socket with curl, says the
// HTTP status, and lives until end.
type otherRun struct {
	cmd   *exec.Cmd
	stdin io.Closer
	code  string // file: the HTTP status
	body  string // file: the answer
}

func startOtherRun(t *testing.T, other otherUser, airlock, sock, token, work, file string, i int) *otherRun {
	t.Helper()
	r := &otherRun{code: filepath.Join(work, fmt.Sprintf("code-%d", i)), body: filepath.Join(work, fmt.Sprintf("answer-%d", i))}
	script := filepath.Join(work, fmt.Sprintf("run-%d.sh", i))
	src := fmt.Sprintf(`c=$(curl -sS --unix-socket %s -o %s -w '%%{http_code}' -H 'Authorization: Bearer %s' -H 'Content-Type: application/octet-stream' --data-binary @%s http://airlock.local/v1/uploads)
echo "$c" > %s.tmp && mv %s.tmp %s
cat >/dev/null
`, sock, r.body, token, file, r.code, r.code, r.code)
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command("su", other.name, "-c", fmt.Sprintf("AIRLOCK_SOCKET=%s %s run -- /bin/sh %s", sock, airlock, script))
	out := &gatewaytest.LockedBuffer{}
	r.cmd.Stdout, r.cmd.Stderr = out, out
	in, err := r.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = in
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.end)
	testkit.Eventually(t, func() bool { _, err := os.Stat(r.code); return err == nil }, "run %d of %s did not upload: %s", i, other.name, out)
	return r
}

// status is the HTTP status the run's upload got, and the answer.
func (r *otherRun) status(t *testing.T) (string, api.Error) {
	t.Helper()
	c, err := os.ReadFile(r.code)
	if err != nil {
		t.Fatal(err)
	}
	var e api.Error
	if b, err := os.ReadFile(r.body); err == nil {
		json.Unmarshal(b, &e)
	}
	return strings.TrimSpace(string(c)), e
}

// end ends the run: its anchor exits.
func (r *otherRun) end() {
	if r.stdin == nil {
		return
	}
	r.stdin.Close()
	r.stdin = nil
	r.cmd.Wait()
}

// TestSpoolBudgetsAcrossRunsOfAnotherUser: another local user's agents,
// each its own run, upload through the socket. Their files together stop
// at the cap of one requester however many runs it has; the spool as a
// whole stops at its total; each refusal is a 507 that names its cap, and
// the refused file is not on disk. A run that ends takes its files with
// it, which makes room again; the audit log keeps working.
func TestSpoolBudgetsAcrossRunsOfAnotherUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	other := lookupOther(t)
	s := sharedSSHD(t)
	pub := publicDir(t)
	sock := filepath.Join(pub, "run", "airlock.sock")
	airlock := filepath.Join(pub, "airlock")
	copyExecutable(t, gatewaytest.Binary(t, "airlock"), airlock)
	work := filepath.Join(pub, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, other.uid, other.gid); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	file := filepath.Join(pub, "one-mib")
	content := randomFile(t, file, mib)
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.Listen.Socket, c.Listen.SocketGroup = sock, other.group
		spoolBudgets(c, 4*mib, 3*mib, 0, mib)
	}})
	ctl, err := api.ReadControl(sock)
	if err != nil {
		t.Fatal(err)
	}

	// Four runs of one user: three files fit its 3 MiB, the fourth not.
	var runs []*otherRun
	for i := range 4 {
		runs = append(runs, startOtherRun(t, other, airlock, sock, ctl.Token, work, file, i))
	}
	for i, r := range runs[:3] {
		if code, e := r.status(t); code != "201" {
			t.Fatalf("run %d: %s %+v, want 201", i, code, e)
		}
	}
	code, e := runs[3].status(t)
	if code != "507" || e.Err.Code != api.CodeInsufficientStorage || !strings.Contains(e.Err.Message, "transfer.spool_max_per_requester") ||
		!strings.Contains(e.Err.Message, other.name) {
		t.Fatalf("the fourth run of %s: %s %+v, want 507 naming the cap per requester", other.name, code, e)
	}
	g.wantSpoolFiles(3, "three files of one requester")

	// Another requester (this test's user) has its own budget, up to the
	// spool's total.
	ctx := context.Background()
	if _, err := g.agent.Upload(ctx, bytes.NewReader(content), mib); err != nil {
		t.Fatalf("another requester's first file: %v", err)
	}
	_, err = g.agent.Upload(ctx, bytes.NewReader(content), mib)
	wantNoSpace(t, err, "transfer.spool_max")
	g.wantSpoolFiles(4, "the spool at its total")

	// A run that ends takes its file along, and its requester has room
	// again.
	runs[0].end()
	g.wantSpoolFiles(3, "after run 0 ended")
	if code, e := startOtherRun(t, other, airlock, sock, ctl.Token, work, file, 4).status(t); code != "201" {
		t.Fatalf("a new run once another ended: %s %+v", code, e)
	}
	for _, r := range runs {
		r.end()
	}
	g.wantSpoolFiles(2, "after the runs ended") // the test's own and run 4's
	if len(g.auditEntries("run.ended", "")) < 4 {
		t.Errorf("the ended runs are not in the audit log")
	}
	g.verifyAudit()
}

// TestSpoolFilesGoWithTheirRequest: an upload serves the put that names
// it, whatever becomes of that put — denied, refused before any reviewer
// saw it — and one no put names expires with the spool's hour on the
// engine's clock; a run that ends takes its files.
func TestSpoolFilesGoWithTheirRequest(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	ctx := context.Background()
	content := []byte("port: 8080\n")
	const remote = "/tmp/airlock-spool-test-never-written"
	// start starts a gateway on clk and uploads one file.
	start := func(t *testing.T, clk *clocktest.Fake) (*testGateway, *api.Upload) {
		g := startGateway(t, s, gwOptions{options: func(o *Options) { o.clock = clk }})
		up, err := g.agent.Upload(ctx, bytes.NewReader(content), int64(len(content)))
		if err != nil {
			t.Fatal(err)
		}
		g.wantSpoolFiles(1, "after an upload")
		return g, up
	}

	t.Run("the put denied", func(t *testing.T) {
		t.Parallel()
		g, up := start(t, clocktest.New(time.Now()))
		res := g.runAsync(api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: up.ID, Path: remote}})
		g.decideNext("call", "deny", "not now")
		if r := <-res; r.err != nil || r.a.Outcome != sshexec.Denied {
			t.Fatalf("denied put: %v %+v", r.err, r.a)
		}
		g.wantSpoolFiles(0, "after the put was denied")
	})
	t.Run("the put refused", func(t *testing.T) {
		t.Parallel()
		g, up := start(t, clocktest.New(time.Now()))
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Put: &api.PutRequest{Upload: up.ID, Path: remote, Mode: "4755"}}, api.Events{})
		if err != nil || a.Outcome != sshexec.Rejected {
			t.Fatalf("refused put: %v %+v", err, a)
		}
		g.wantSpoolFiles(0, "after the put was refused")
	})
	t.Run("no put within the hour", func(t *testing.T) {
		t.Parallel()
		clk := clocktest.New(time.Now())
		g, _ := start(t, clk)
		clk.Advance(time.Hour + time.Second)
		g.wantSpoolFiles(0, "an hour after an upload no put named")
	})
	t.Run("the run ended", func(t *testing.T) {
		t.Parallel()
		g, _ := start(t, clocktest.New(time.Now()))
		agent, run := g.remoteAgent("spool-agent")
		if _, err := agent.Upload(ctx, bytes.NewReader(content), int64(len(content))); err != nil {
			t.Fatal(err)
		}
		g.wantSpoolFiles(2, "the remote run's upload")
		if err := agent.EndRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		g.wantSpoolFiles(1, "after the remote run ended") // the local run's stays
		g.verifyAudit()
	})
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, unmounted
// at the end.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs: %v", err)
		}
	})
	return dir
}

// freeBytes is what an unprivileged writer may still use under dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// TestSpoolFreeSpaceFloor: the state directory on a small disk (a tmpfs).
// An upload that would leave less than min_free is refused before a byte
// is kept; one that streams while something else fills the disk is cut
// off at the floor and its partial file removed; and the audit log,
// which the floor protects, keeps recording actions.
func TestSpoolFreeSpaceFloor(t *testing.T) {
	t.Parallel()
	needRoot(t)
	s := sharedSSHD(t)
	const mib, floor = 1 << 20, 40 << 20
	fs := mountTmpfs(t, 64*mib)
	state := filepath.Join(fs, "state")
	g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
		c.StateDir, c.Listen.Socket = state, filepath.Join(state, "run", "airlock.sock")
		spoolBudgets(c, 1<<30, 1<<30, floor, 16*mib)
	}})
	ctx := context.Background()

	// Cut off while streaming: after the first MiB, the disk fills to
	// just above the floor.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := g.agent.Upload(ctx, pr, 8*mib)
		pr.CloseWithError(err)
		done <- err
	}()
	chunk := make([]byte, mib)
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(fs, "filler")
	randomFile(t, filler, int(freeBytes(t, fs)-floor-mib/2))
	go func() {
		for range 7 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	wantNoSpace(t, <-done, "transfer.min_free")
	g.wantSpoolFiles(0, "after an upload was cut off")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	// Refused before a byte is kept: the second 16 MiB would leave less
	// than 40 MiB of the 64.
	file := randomFile(t, filepath.Join(t.TempDir(), "f"), 16*mib)
	if _, err := g.agent.Upload(ctx, bytes.NewReader(file), int64(len(file))); err != nil {
		t.Fatalf("the first 16 MiB: %v", err)
	}
	_, err := g.agent.Upload(ctx, bytes.NewReader(file), int64(len(file)))
	wantNoSpace(t, err, "transfer.min_free")
	g.wantSpoolFiles(1, "after the refusal")

	// The audit log still records actions.
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo still"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("an action at the floor: %v %+v", r.err, r.a)
	}
	g.verifyAudit()
}
