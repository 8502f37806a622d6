package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// swapEnv names the directory the re-executed test binary swaps d and l
// in (swapLoop) instead of running tests.
const swapEnv = "AIRLOCK_TEST_SWAP"

// raceOps is how many puts, and how many gets, race the swapper.
const raceOps = 200

// TestTransfersRaceASymlinkSwap: while another process of the login
// account swaps a directory beneath put_under/get_under with a link
// leading out of it (renameat2 RENAME_EXCHANGE, in a loop), 200 puts and
// 200 gets through airlock-action over sshd each either work inside the
// root or are refused with a reason: nothing is written or read outside.
// Once with openat2, once with the component walk it falls back to.
func TestTransfersRaceASymlinkSwap(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	walkBin := filepath.Join(e.dir, "airlock-action-walk")
	build := exec.Command(goTool(), "build", "-o", walkBin, "-ldflags", "-X github.com/airlockgw/airlock/deploy/forcedcmd.resolveWith=walk", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	swapper := copySelf(t, e.dir)
	for _, v := range []struct{ name, bin string }{{"openat2", e.bin}, {"walk", walkBin}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRaceRoot(t, e, v.name, v.bin)
			stop := startSwapper(t, swapper, r.root)
			puts := r.puts(t)
			gets := r.gets(t)
			t.Logf("%d exchanges; %d of %d puts and %d of %d gets went through", stop(), puts, raceOps, gets, raceOps)
			r.checkNoEscape(t)
		})
	}
}

// raceRoot is one put_under/get_under directory, root, holding d (a
// directory) and l (a link to outside, a directory the account may
// write), with an airlock-action key confined to root.
type raceRoot struct {
	root, outside string
	cfg           *sshexec.Config
	mu            sync.Mutex
	published     map[string][]byte
}

func newRaceRoot(t *testing.T, e *env, name, bin string) *raceRoot {
	base := filepath.Join(e.dir, "race-"+name)
	r := &raceRoot{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside"), published: map[string][]byte{}}
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(e.sshd.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range []string{r.root, filepath.Join(r.root, "d"), r.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(r.root, "d", "secret"), []byte("inside\n"), 0o644)
	os.WriteFile(filepath.Join(r.outside, "secret"), []byte("outside\n"), 0o644)
	os.Symlink(r.outside, filepath.Join(r.root, "l"))
	for _, p := range []string{r.root, filepath.Join(r.root, "d"), filepath.Join(r.root, "d", "secret"), filepath.Join(r.root, "l"), r.outside, filepath.Join(r.outside, "secret")} {
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pol := filepath.Join(base, "action.hcl")
	text := fmt.Sprintf("log_file = %q\ntransfer {\n  put_under = [%q]\n  get_under = [%q]\n  max_size = \"1KiB\"\n}\n",
		filepath.Join(e.dir, "log", "race-"+name+".log"), r.root, r.root)
	if err := os.WriteFile(pol, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	key := sshtest.NewKey()
	line, err := deploy.AuthorizedKeysLine(key.PublicKey(), deploy.LineOptions{Target: "race-" + name, Account: e.sshd.User, Command: bin + " --policy " + pol})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.InstallLine(e.sshd.AuthorizedKeysFile(), line); err != nil {
		t.Fatal(err)
	}
	r.cfg = e.config(key)
	return r
}

// each runs do for 0…raceOps-1 on eight connections at a time.
func each(do func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range raceOps {
		next <- i
	}
	close(next)
	wg.Wait()
}

// refusedClearly says whether res is airlock-action's refusal: exit 126
// and a reason.
func refusedClearly(res *sshexec.Result) bool {
	return res.Outcome == sshexec.Exited && res.ExitCode == 126 && res.Detail != "" &&
		bytes.HasPrefix(res.Stderr, []byte("airlock-action: "))
}

// puts sends raceOps puts of root/d/f-N and returns how many worked.
func (r *raceRoot) puts(t *testing.T) int {
	var ok atomic.Int32
	each(func(i int) {
		name := fmt.Sprintf("f-%d", i)
		data := []byte("put " + name + "\n")
		res, err := sshexec.Put(context.Background(), r.cfg, sshexec.PutFile{Path: filepath.Join(r.root, "d", name), Mode: 0o640,
			Data: bytes.NewReader(data), Size: int64(len(data)), SHA256: sha256.Sum256(data), Exec: true})
		switch {
		case res == nil:
			t.Errorf("put %s: %v", name, err)
		case res.Success() && res.Transfer.Published:
			ok.Add(1)
			r.mu.Lock()
			r.published[name] = data
			r.mu.Unlock()
		case !refusedClearly(res):
			t.Errorf("put %s: neither published nor refused with a reason: %v exit %d %q %q", name, res.Outcome, res.ExitCode, res.Detail, res.Stderr)
		}
	})
	return int(ok.Load())
}

// gets reads root/d/secret raceOps times and returns how many worked;
// each that worked must have read the file inside.
func (r *raceRoot) gets(t *testing.T) int {
	var ok atomic.Int32
	each(func(i int) {
		var out bytes.Buffer
		res, err := sshexec.Get(context.Background(), r.cfg, sshexec.GetFile{Path: filepath.Join(r.root, "d", "secret"), MaxSize: 1024, Out: &out, Exec: true})
		switch {
		case res == nil:
			t.Errorf("get %d: %v", i, err)
		case res.Success():
			ok.Add(1)
			if out.String() != "inside\n" {
				t.Errorf("get %d read %q: a file outside get_under", i, out.String())
			}
		case !refusedClearly(res):
			t.Errorf("get %d: neither read nor refused with a reason: %v exit %d %q %q", i, res.Outcome, res.ExitCode, res.Detail, res.Stderr)
		}
	})
	return int(ok.Load())
}

// checkNoEscape: outside holds only its own file; the real directory
// (named d or l now, whichever the last swap left) holds every put that
// worked, whole, with its mode, and no temporary file.
func (r *raceRoot) checkNoEscape(t *testing.T) {
	if names := dirNames(t, r.outside); len(names) != 1 || names[0] != "secret" {
		t.Errorf("written outside put_under: %v", names)
	}
	real := filepath.Join(r.root, "d")
	if st, err := os.Lstat(real); err != nil || !st.IsDir() {
		real = filepath.Join(r.root, "l")
	}
	for name, want := range r.published {
		p := filepath.Join(real, name)
		got, err := os.ReadFile(p)
		st, serr := os.Lstat(p)
		if err != nil || serr != nil || !bytes.Equal(got, want) || st.Mode() != 0o640 {
			t.Errorf("published %s: %q %v %v", name, got, err, st)
		}
	}
	for _, n := range dirNames(t, real) {
		if strings.HasPrefix(n, ".airlock-") {
			t.Errorf("temporary file left: %s", n)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// copySelf copies the test binary where the login account can run it.
func copySelf(t *testing.T, dir string) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "swapper.test")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// startSwapper runs bin as the login account, swapping root/d and root/l
// until stop is called; stop returns how many swaps it made. It returns
// once the first swap is done.
func startSwapper(t *testing.T, bin, root string) (stop func() int) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), swapEnv+"="+root)
	if os.Geteuid() == 0 {
		st, err := os.Stat(root)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sys.Uid, Gid: sys.Gid, NoSetGroups: true}}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var first string
	testkit.Eventually(t, func() bool {
		select {
		case first = <-lines:
			return true
		default:
			return false
		}
	}, "the swapper to start (stderr %q)", &stderr)
	if first != "swapping" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the swapper: %q %s", first, stderr.String())
	}
	return func() int {
		in.Close()
		n, _ := strconv.Atoi(<-lines)
		if err := cmd.Wait(); err != nil || n == 0 {
			t.Errorf("the swapper: %v, %d swaps, %s", err, n, stderr.String())
		}
		return n
	}
}

// swapLoop is the re-executed test binary as the swapper: it exchanges
// dir/d and dir/l until its standard input ends, says "swapping" after
// the first exchange and the count at the end.
func swapLoop(dir string) int {
	var stop atomic.Bool
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	a, b := filepath.Join(dir, "d"), filepath.Join(dir, "l")
	n := 0
	for !stop.Load() {
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if n++; n == 1 {
			fmt.Println("swapping")
		}
	}
	fmt.Println(n)
	return 0
}
