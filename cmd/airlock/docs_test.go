package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// The pages a newcomer follows are tested by running them. A fenced sh
// block right after the line
//
//	<!-- runnable -->
//
// is run as written, in one bash process per page, in page order, from the
// repository's root; `<!-- runnable: background -->` runs the block as a
// background job of that shell (the page says to leave it running or to
// use another terminal). A `…` in a runnable block is what the reader fills
// in after looking at something (a fingerprint, an approval id, a printed
// line): the test fills it in with what it knows to be right, and fails on
// a `…` it does not know. The test plays the human in between too: it waits
// for the gateway to listen, and checks the pending approval is for the
// command the page says before approving it.

// docBlock is one runnable block of a page.
type docBlock struct {
	Line       int // of the opening fence, 1-based
	Background bool
	Text       string
}

// runnableMarker matches a marker line; its group is the mode.
var runnableMarker = regexp.MustCompile(`^<!--\s*runnable(?::\s*(\S+))?\s*-->$`)

// parseRunnable returns the runnable blocks of a Markdown page.
func parseRunnable(src string) ([]docBlock, error) {
	lines := strings.Split(src, "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "<!--") || !strings.Contains(l, "runnable") {
			continue
		}
		m := runnableMarker.FindStringSubmatch(l)
		if m == nil || (m[1] != "" && m[1] != "background") {
			return nil, fmt.Errorf("line %d: unknown marker %q: use <!-- runnable --> or <!-- runnable: background -->", i+1, l)
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("line %d: a runnable marker must be followed by a ```sh line", i+1)
		}
		b := docBlock{Line: i + 2, Background: m[1] == "background"}
		var body []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: the block is not closed", b.Line)
		}
		b.Text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
		i = j
	}
	return out, nil
}

func TestDocsParseRunnable(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []docBlock
		wantErr   bool
	}{
		{name: "unmarked blocks are not run", src: "```sh\nrm -rf /\n```\n"},
		{name: "one block", src: "text\n<!-- runnable -->\n```sh\necho a\necho b\n```\n",
			want: []docBlock{{Line: 3, Text: "echo a\necho b\n"}}},
		{name: "background", src: "<!-- runnable: background -->\n```sh\nairlock serve\n```\n",
			want: []docBlock{{Line: 2, Background: true, Text: "airlock serve\n"}}},
		{name: "unknown mode", src: "<!-- runnable: later -->\n```sh\ntrue\n```\n", wantErr: true},
		{name: "not followed by a sh fence", src: "<!-- runnable -->\n\n```sh\ntrue\n```\n", wantErr: true},
		{name: "another language", src: "<!-- runnable -->\n```hcl\nx = 1\n```\n", wantErr: true},
		{name: "unclosed", src: "<!-- runnable -->\n```sh\ntrue\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRunnable(tc.src)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("blocks (-want +got):\n%s", diff)
			}
		})
	}
}

// repoRoot is where the pages' commands run from.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func pageBlocks(t *testing.T, page string, atLeast int) []docBlock {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseRunnable(string(src))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if len(blocks) < atLeast {
		t.Fatalf("%s has %d runnable blocks, want at least %d: were markers lost?", page, len(blocks), atLeast)
	}
	return blocks
}

// docShell is one bash process that runs a page's blocks, as a reader's
// terminal would.
type docShell struct {
	t     *testing.T
	page  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *lockedBuffer
	dir   string // block files and background jobs' logs
	done  chan struct{}
	n     int
}

// docEnv is the environment of a newcomer's shell: the test's, without
// any airlock setting, plus extra.
func docEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AIRLOCK_") || strings.HasPrefix(kv, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func startDocShell(t *testing.T, page string, env []string) *docShell {
	t.Helper()
	sh := &docShell{t: t, page: page, out: &lockedBuffer{}, dir: t.TempDir(), done: make(chan struct{})}
	sh.cmd = exec.Command("bash", "--noprofile", "--norc")
	sh.cmd.Dir = repoRoot(t)
	sh.cmd.Env = env
	sh.cmd.Stdout, sh.cmd.Stderr = sh.out, sh.out
	// Its own process group, so that the end of the test ends every job.
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if sh.stdin, err = sh.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sh.cmd.Wait(); close(sh.done) }()
	t.Cleanup(func() {
		sh.stdin.Close()
		select {
		case <-sh.done:
		case <-time.After(10 * time.Second):
		}
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		<-sh.done
		if t.Failed() {
			t.Logf("%s: the shell's output:\n%s", page, sh.out.String())
		}
	})
	sh.send("set -e -o pipefail\n")
	return sh
}

func (sh *docShell) send(s string) {
	sh.t.Helper()
	if _, err := io.WriteString(sh.stdin, s); err != nil {
		sh.t.Fatalf("%s: the shell is gone: %v\n%s", sh.page, err, sh.out.String())
	}
}

// run runs a block in the foreground and returns what it printed; the
// test fails if any command of it fails (set -e ends the shell).
func (sh *docShell) run(b docBlock, text string) string {
	sh.t.Helper()
	sh.n++
	start := len(sh.out.String())
	mark := fmt.Sprintf("@@block %d done@@", sh.n)
	// stdin from /dev/null: the shell reads the page from its stdin.
	sh.send("{\n" + text + "} </dev/null\necho '" + mark + "'\n")
	deadline := time.After(3 * time.Minute)
	for {
		out := sh.out.String()[start:]
		if i := strings.Index(out, mark+"\n"); i >= 0 {
			return out[:i]
		}
		select {
		case <-sh.done:
			sh.t.Fatalf("%s:%d: the block failed (%v):\n%s\noutput:\n%s", sh.page, b.Line, sh.cmd.ProcessState, text, out)
		case <-deadline:
			sh.t.Fatalf("%s:%d: the block did not finish in 3 minutes:\n%s\noutput:\n%s", sh.page, b.Line, text, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// docJob is a block running in the background.
type docJob struct {
	block   docBlock
	logFile string
	rcFile  string
}

// background starts a block as a background job of the shell, as a
// separate bash (it sees the exported variables, as another terminal
// with them set would).
func (sh *docShell) background(b docBlock, text string) *docJob {
	sh.t.Helper()
	sh.n++
	j := &docJob{block: b}
	file := filepath.Join(sh.dir, fmt.Sprintf("block-%d.sh", sh.n))
	j.logFile, j.rcFile = file+".log", file+".rc"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		sh.t.Fatal(err)
	}
	sh.send(fmt.Sprintf("{ set +e; bash -e %q </dev/null >%q 2>&1; echo $? >%q; } &\n", file, j.logFile, j.rcFile))
	return j
}

func (j *docJob) log() string {
	b, _ := os.ReadFile(j.logFile)
	return string(b)
}

// exited returns the job's exit status once it has ended.
func (j *docJob) exited() (int, bool) {
	b, err := os.ReadFile(j.rcFile)
	if err != nil || !strings.HasSuffix(string(b), "\n") {
		return 0, false
	}
	var rc int
	fmt.Sscan(string(b), &rc)
	return rc, true
}

// wait waits for the job to end and returns its exit status.
func (j *docJob) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	var rc int
	if !testkit.Poll(timeout, func() (ok bool) { rc, ok = j.exited(); return ok }) {
		t.Fatalf("the background block at line %d did not end in %v:\n%s\noutput:\n%s", j.block.Line, timeout, j.block.Text, j.log())
	}
	return rc
}

// placeholder is a `…` the reader fills in, and how the test fills it.
type placeholder struct {
	pattern *regexp.Regexp
	value   func() string
}

// fill replaces the block's placeholders, and fails on one it does not
// know.
func fill(t *testing.T, page string, b docBlock, ps []placeholder) string {
	t.Helper()
	text := b.Text
	for _, p := range ps {
		if p.pattern.MatchString(text) {
			v := p.value()
			text = p.pattern.ReplaceAllLiteralString(text, v)
		}
	}
	if strings.Contains(text, "…") {
		t.Fatalf("%s:%d: the block has a `…` the test does not know how to fill in:\n%s", page, b.Line, b.Text)
	}
	return text
}

func TestDocsREADME(t *testing.T) {
	blocks := pageBlocks(t, "README.md", 1)
	sh := startDocShell(t, "README.md", docEnv("TMPDIR="+t.TempDir()))
	var out strings.Builder
	for _, b := range blocks {
		if b.Background {
			t.Fatalf("README.md:%d: nothing in the README runs in the background", b.Line)
		}
		out.WriteString(sh.run(b, fill(t, "README.md", b, nil)))
	}
	// The scripted tour ends with a verified audit log.
	if !strings.Contains(out.String(), "intact") {
		t.Errorf("README.md: the demo's tour did not verify its audit log:\n%s", out.String())
	}
}

// quickstartHTTP is the gateway's default HTTP listener, which the
// quickstart's configuration leaves as it is.
const quickstartHTTP = config.DefaultHTTPAddr

func TestDocsQuickstart(t *testing.T) {
	const page = "docs/quickstart.md"
	blocks := pageBlocks(t, page, 10)
	s := sshtest.NewSSHD(t, sshtest.Options{})
	if l, err := net.Listen("tcp", quickstartHTTP); err != nil {
		t.Fatalf("the quickstart's gateway listens on %s, which is in use: %v", quickstartHTTP, err)
	} else {
		l.Close()
	}

	dir := t.TempDir()
	airlockDir := filepath.Join(dir, "airlock-quickstart")
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte(testkit.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A fresh HOME, as a newcomer's; the Go caches stay where they are.
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := docEnv(
		"HOME="+home,
		"TARGET_ADDR="+s.Addr,
		"TARGET_USER="+s.User,
		"TARGET_AUTHORIZED_KEYS="+s.AuthorizedKeysFile(),
		"AIRLOCK_DIR="+airlockDir,
		"AIRLOCK_PASSWORD_FILE="+pwFile,
	)
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	sh := startDocShell(t, page, env)
	airlockBin := filepath.Join(airlockDir, "bin", "airlock")
	socket := filepath.Join(airlockDir, "state", "run", "airlock.sock")

	var prevOut string
	ps := []placeholder{
		// The reader compares the scanned fingerprints with the target's
		// own; the test knows the host key it gave sshd.
		{regexp.MustCompile(`SHA256:…`), func() string { return ssh.FingerprintSHA256(s.HostKey) }},
		// The line the previous block printed, pasted in quotes.
		{regexp.MustCompile(`'restrict [^'\n]*…[^'\n]*'`), func() string {
			line := lastLineWith(prevOut, "restrict ")
			if line == "" || strings.Contains(line, "'") {
				t.Fatalf("%s: no authorized_keys line to paste in the previous block's output:\n%s", page, prevOut)
			}
			return "'" + line + "'"
		}},
		// The reviewer reads the pending approval before deciding.
		{regexp.MustCompile(`apr_…`), func() string { return pendingApproval(t, airlockBin, pwFile, "build-box", "uptime") }},
	}

	var jobs []*docJob
	var serve, agent *docJob
	for _, b := range blocks {
		text := fill(t, page, b, ps)
		if !b.Background {
			prevOut = sh.run(b, text)
			if strings.Contains(text, "airlock approvals approve") && agent != nil {
				// "The agent's uptime runs and prints."
				if rc := agent.wait(t, 60*time.Second); rc != 0 || !strings.Contains(agent.log(), "load average") {
					t.Fatalf("%s:%d: the agent's block exited %d after the approval:\n%s", page, agent.block.Line, rc, agent.log())
				}
				if !strings.Contains(agent.log(), "waiting for a reviewer") {
					t.Errorf("%s:%d: the agent was not told it waits for a reviewer:\n%s", page, agent.block.Line, agent.log())
				}
			}
			continue
		}
		j := sh.background(b, text)
		jobs = append(jobs, j)
		switch {
		case strings.Contains(text, "airlock serve"):
			serve = j
			waitListening(t, j, socket, quickstartHTTP)
		case strings.Contains(text, "airlock-ssh"):
			agent = j
		}
	}
	if serve == nil || agent == nil {
		t.Fatalf("%s: no background gateway or agent block", page)
	}
	// The last block verified the audit log.
	if !strings.Contains(prevOut, "intact") {
		t.Errorf("%s: the last block's output lacks \"intact\":\n%s", page, prevOut)
	}

	// Ctrl-C on `airlock serve` (SIGINT), as the page says.
	pid := servePID(t, sh.cmd.Process.Pid)
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if rc := serve.wait(t, 30*time.Second); rc != 0 {
		t.Errorf("airlock serve exited %d after Ctrl-C:\n%s", rc, serve.log())
	}
	for _, j := range jobs {
		if t.Failed() {
			t.Logf("%s:%d (background) output:\n%s", page, j.block.Line, j.log())
		}
	}
}

func lastLineWith(out, prefix string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			last = sc.Text()
		}
	}
	return last
}

// waitListening waits until the gateway answers on its socket and HTTP
// listener, as a reader waits for `airlock serve` to start.
func waitListening(t *testing.T, serve *docJob, socket, httpAddr string) {
	t.Helper()
	testkit.EventuallyErr(t, func() error {
		if _, ended := serve.exited(); ended {
			return testkit.Stop(fmt.Errorf("airlock serve ended at start:\n%s", serve.log()))
		}
		for _, a := range [][2]string{{"unix", socket}, {"tcp", httpAddr}} {
			c, err := net.Dial(a[0], a[1])
			if err != nil {
				return fmt.Errorf("%v\n%s", err, serve.log())
			}
			c.Close()
		}
		return nil
	}, "airlock serve is not listening")
}

// pendingApproval waits for exactly one pending approval, checks it is for
// the command the page runs, and returns its id.
func pendingApproval(t *testing.T, airlockBin, pwFile, target, command string) string {
	t.Helper()
	var id string
	testkit.Eventually(t, func() bool {
		cmd := exec.Command(airlockBin, "approvals", "list", "--json")
		cmd.Env = docEnv("AIRLOCK_REVIEWER=alice", "AIRLOCK_PASSWORD_FILE="+pwFile)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("airlock approvals list --json: %v: %s", err, out)
		}
		var list []struct{ ID, Target, Command string }
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("airlock approvals list --json: %v: %s", err, out)
		}
		switch {
		case len(list) == 1 && list[0].Target == target && list[0].Command == command:
			id = list[0].ID
		case len(list) > 0:
			t.Fatalf("pending approvals: %s, want one for %q on %s", out, command, target)
		}
		return id != ""
	}, "no approval pending")
	return id
}

// servePID finds the `airlock serve` process among the shell's
// descendants.
func servePID(t *testing.T, shell int) int {
	t.Helper()
	for _, p := range sshtest.Descendants(shell) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) >= 2 && filepath.Base(argv[0]) == "airlock" && argv[1] == "serve" {
			return p
		}
	}
	t.Fatal("no airlock serve process under the shell")
	return 0
}
