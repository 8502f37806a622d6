package forcedcmd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec/batchenv"
)

// recorder is a Logger that keeps the records.
type recorder struct {
	mu   sync.Mutex
	recs []*Record
}

func (r *recorder) Log(rec *Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *rec
	r.recs = append(r.recs, &c)
	return nil
}

func (r *recorder) only(t *testing.T) *Record {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) != 1 {
		t.Fatalf("got %d log records, want 1", len(r.recs))
	}
	return r.recs[0]
}

// writePolicy writes src, with DIR replaced by dir, to dir/action.hcl.
func writePolicy(t *testing.T, dir, src string) string {
	t.Helper()
	f := filepath.Join(dir, "action.hcl")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(src, "DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const servePolicy = `
verb "echo" {
  argv = ["/bin/echo", "{word}"]
  param "word" { regex = "[a-z ]+" }
}
verb "exit" {
  argv = ["/bin/sh", "-c", "echo out; echo err >&2; exit {code}"]
  param "code" { int = [0, 255] }
}
verb "term" {
  argv = ["/bin/sh", "-c", "kill -TERM $$"]
}
verb "env" {
  argv = ["/usr/bin/env"]
  env  = ["LANG", "UNSET_VAR", "PAGER"]
}
verb "pwd" {
  argv = ["/bin/pwd"]
  dir  = "DIR"
}
verb "missing" {
  argv = ["/nonexistent/program"]
}
`

type serveResult struct {
	Exit           int
	Stdout, Stderr string
}

func serve(t *testing.T, policyFile string, env []string) (serveResult, *Record) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rec := &recorder{}
	code := Serve(context.Background(), Options{PolicyFile: policyFile, Env: env, Stdout: &stdout, Stderr: &stderr, Log: rec, ownPolicy: true})
	return serveResult{code, stdout.String(), stderr.String()}, rec.only(t)
}

func TestServe(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pf := writePolicy(t, dir, servePolicy)
	tests := []struct {
		name    string
		command string
		env     []string
		want    serveResult
		wantRec *Record
	}{
		{
			name: "allowed", command: "echo 'hello world'",
			want:    serveResult{Exit: 0, Stdout: "hello world\n"},
			wantRec: &Record{Decision: Allow, Verb: "echo", Args: []string{"hello world"}, Exit: 0},
		},
		{
			name: "exit status and both streams", command: "exit 7",
			want:    serveResult{Exit: 7, Stdout: "out\n", Stderr: "err\n"},
			wantRec: &Record{Decision: Allow, Verb: "exit", Args: []string{"7"}, Exit: 7},
		},
		{
			name: "killed by a signal", command: "term",
			want:    serveResult{Exit: 128 + int(syscall.SIGTERM)},
			wantRec: &Record{Decision: Allow, Verb: "term", Args: []string{}, Exit: 143, Signal: "TERM"},
		},
		{
			// The fixed non-interactive set, whatever sshd passed under
			// its names (an allow-listed one included).
			name: "only PATH, the allow-list and the fixed set", command: "env",
			env:     []string{"LANG=C.UTF-8", "HOME=/root", "LD_PRELOAD=/evil.so", "PATH=/evil", "PAGER=less", "GIT_TERMINAL_PROMPT=1"},
			want:    serveResult{Exit: 0, Stdout: "PATH=" + Path + "\nLANG=C.UTF-8\n" + batchEnvLines()},
			wantRec: &Record{Decision: Allow, Verb: "env", Args: []string{}, Exit: 0},
		},
		{
			name: "working directory", command: "pwd",
			want:    serveResult{Exit: 0, Stdout: dir + "\n"},
			wantRec: &Record{Decision: Allow, Verb: "pwd", Args: []string{}, Exit: 0},
		},
		{
			name: "program missing", command: "missing",
			want:    serveResult{Exit: ExitCannotRun, Stderr: "airlock-action: cannot run: "},
			wantRec: &Record{Decision: Allow, Verb: "missing", Args: []string{}, Exit: ExitCannotRun},
		},
		{
			name: "unknown verb", command: "rm -rf /",
			want:    serveResult{Exit: ExitRefused, Stderr: "airlock-action: refused: "},
			wantRec: &Record{Decision: Refuse, Command: "rm -rf /", Exit: ExitRefused},
		},
		{
			name: "invalid argument", command: "exit 256",
			want:    serveResult{Exit: ExitRefused, Stderr: "airlock-action: refused: "},
			wantRec: &Record{Decision: Refuse, Command: "exit 256", Exit: ExitRefused},
		},
		{
			name: "metacharacter", command: "echo hi; id",
			want:    serveResult{Exit: ExitRefused, Stderr: "airlock-action: refused: "},
			wantRec: &Record{Decision: Refuse, Command: "echo hi; id", Exit: ExitRefused},
		},
		{
			name: "client from SSH_CONNECTION", command: "echo x", env: []string{"SSH_CONNECTION=192.0.2.7 50022 192.0.2.1 22"},
			want:    serveResult{Exit: 0, Stdout: "x\n"},
			wantRec: &Record{Decision: Allow, Verb: "echo", Args: []string{"x"}, Exit: 0, Client: "192.0.2.7 50022"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := append([]string{"SSH_ORIGINAL_COMMAND=" + tt.command}, tt.env...)
			got, rec := serve(t, pf, env)
			// A reason's text is for people: check that there is exactly
			// one line of it, not what it says.
			if tt.want.Stderr != "" && strings.HasPrefix(got.Stderr, tt.want.Stderr) {
				if strings.Count(got.Stderr, "\n") != 1 || !strings.HasSuffix(got.Stderr, "\n") {
					t.Errorf("stderr %q is not one line", got.Stderr)
				}
				got.Stderr = tt.want.Stderr
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if (rec.Reason != "") != (tt.wantRec.Decision == Refuse || tt.wantRec.Exit == ExitCannotRun) {
				t.Errorf("reason %q for %v exit %d", rec.Reason, rec.Decision, rec.Exit)
			}
			if diff := cmp.Diff(tt.wantRec, rec, cmpopts.IgnoreFields(Record{}, "Duration", "Reason")); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeRefusesWithoutCommand(t *testing.T) {
	t.Parallel()
	pf := writePolicy(t, t.TempDir(), servePolicy)
	got, rec := serve(t, pf, []string{"HOME=/root"})
	if got.Exit != ExitRefused || rec.Decision != Refuse {
		t.Errorf("login without a command: exit %d, decision %v; want %d, refuse", got.Exit, rec.Decision, ExitRefused)
	}
}

func TestServeRefusesOnBadPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, file string
	}{
		{"missing", filepath.Join(dir, "none.hcl")},
		{"invalid", writePolicy(t, dir, "verb \"x\" {\n  argv = [\"true\"]\n}\nverb \"y\" {\n}\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rec := serve(t, tt.file, []string{"SSH_ORIGINAL_COMMAND=x"})
			if got.Exit != ExitRefused || rec.Decision != Refuse || strings.Count(got.Stderr, "\n") != 1 {
				t.Errorf("exit %d, decision %v, stderr %q; want %d, refuse, one line", got.Exit, rec.Decision, got.Stderr, ExitRefused)
			}
		})
	}
}

func TestServeKillsTheProgramWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writePolicy(t, dir, `verb "linger" {
  argv    = ["/bin/sleep", "30"]
  timeout = "1m"
}`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := &recorder{}
	var stderr bytes.Buffer
	code := make(chan int, 1)
	start := time.Now()
	go func() {
		code <- Serve(context.Background(), Options{PolicyFile: pf, Env: []string{"SSH_ORIGINAL_COMMAND=linger"}, Stdout: w, Stderr: &stderr, Log: rec, ownPolicy: true})
	}()
	time.Sleep(300 * time.Millisecond)
	r.Close() // sshd's end of the session's stdout
	select {
	case c := <-code:
		if c != 128+int(syscall.SIGKILL) {
			t.Errorf("exit = %d, want %d", c, 128+int(syscall.SIGKILL))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still waits for the program after the client went away")
	}
	got := rec.only(t)
	// The program sleeps 30 s: ending well before that means it was
	// killed, however slow the machine.
	if !got.ClientGone || got.Signal != "KILL" || got.Termination != Confirmed || time.Since(start) > 20*time.Second {
		t.Errorf("record %+v after %s; want client gone, KILL, confirmed", got, time.Since(start))
	}
}

// serveUntilStarted serves the verb named verb of policy src (DIR its
// directory, TIMEOUT its timeout) until its program has written its
// child's pid to DIR/child.pid before the timeout passed — doubling the
// timeout each time it had not: how fast the machine starts a process is
// not what the callers test. It returns the result, the record and the
// child's pid.
func serveUntilStarted(t *testing.T, src, verb string) (serveResult, *Record, int) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for timeout := 300 * time.Millisecond; ; timeout *= 2 {
		pf := writePolicy(t, dir, strings.ReplaceAll(src, "TIMEOUT", timeout.String()))
		os.Remove(filepath.Join(dir, "child.pid"))
		got, rec := serve(t, pf, []string{"SSH_ORIGINAL_COMMAND=" + verb})
		b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return got, rec, pid
		}
		if timeout > testkit.Patience {
			t.Fatalf("the verb never started its child within %s", timeout)
		}
	}
}

func TestServeTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	got, rec, pid := serveUntilStarted(t, `verb "hang" {
  argv    = ["/bin/sh", "-c", "sleep 30 & echo $! > DIR/child.pid; sleep 30"]
  timeout = "TIMEOUT"
}`, "hang")
	want := &Record{Decision: Allow, Verb: "hang", Args: []string{}, Exit: ExitTimeout, TimedOut: true, Signal: "KILL", Termination: Confirmed}
	if diff := cmp.Diff(want, rec, cmpopts.IgnoreFields(Record{}, "Duration")); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if got.Exit != ExitTimeout || !strings.Contains(got.Stderr, "every process of it was killed") {
		t.Errorf("exit = %d (%q), want %d", got.Exit, got.Stderr, ExitTimeout)
	}
	// Confirmed means gone now, not later.
	if proctree.Alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("background child %d of the timed-out program is still running", pid)
	}
}

// A process that left the verb's process group (setsid) is still the
// verb's: a timeout ends it too, and only then is the end confirmed.
func TestServeTimeoutKillsWhatLeftTheGroup(t *testing.T) {
	t.Parallel()
	got, rec, pid := serveUntilStarted(t, `verb "escape" {
  argv    = ["/bin/sh", "-c", "/usr/bin/setsid /bin/sleep 30 & echo $! > DIR/child.pid; /bin/sleep 30"]
  timeout = "TIMEOUT"
}`, "escape")
	if proctree.Alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("process %d that left the group outlived the verb's timeout", pid)
	}
	if got.Exit != ExitTimeout || rec.Termination != Confirmed || len(rec.Left) != 0 {
		t.Errorf("exit %d, record %+v", got.Exit, rec)
	}
}

// A process that left the group and lost its parent (a daemon's double
// fork) is not init's to keep: it comes to the verb's supervisor, and a
// timeout ends it too.
func TestServeTimeoutKillsAnOrphanThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	got, rec, pid := serveUntilStarted(t, `verb "daemon" {
  argv    = ["/bin/sh", "-c", "/usr/bin/setsid /bin/sh -c '/bin/sleep 30 & echo $! > DIR/child.pid'; /bin/sleep 30"]
  timeout = "TIMEOUT"
}`, "daemon")
	if proctree.Alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("daemonised process %d outlived the verb's timeout", pid)
	}
	if got.Exit != ExitTimeout || rec.Termination != Confirmed || len(rec.Left) != 0 {
		t.Errorf("exit %d, record %+v", got.Exit, rec)
	}
}

// A verb's work ends with its program, also what it daemonised.
func TestServeEndKillsWhatTheProgramLeft(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pf := writePolicy(t, dir, `verb "daemon" {
  argv = ["/bin/sh", "-c", "/usr/bin/setsid /bin/sh -c '/bin/sleep 30 & echo $! > `+dir+`/child.pid'; exit 3"]
}`)
	got, rec := serve(t, pf, []string{"SSH_ORIGINAL_COMMAND=daemon"})
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && proctree.Alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("daemonised process %d outlived the verb", pid)
	}
	if got.Exit != 3 || rec.Exit != 3 || rec.Termination != NotStopped {
		t.Errorf("exit %d, record %+v", got.Exit, rec)
	}
}

func TestServeLogFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "action.log")
	pf := writePolicy(t, dir, "log_file = \""+logFile+"\"\n"+servePolicy)
	for _, c := range []string{"echo one", "echo two; id", "bad\x00verb"} {
		var out, errOut bytes.Buffer
		Serve(context.Background(), Options{PolicyFile: pf, Env: []string{"SSH_ORIGINAL_COMMAND=" + c}, Stdout: &out, Stderr: &errOut, ownPolicy: true})
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("log has %d lines, want 3:\n%s", len(lines), b)
	}
	for i, want := range []string{`decision=allow verb="echo" args=["one"] exit=0`, `decision=refuse command="echo two; id"`, `decision=refuse command="bad\x00verb"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("log line %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
}

func TestServeRefusesWhenLogFileUnwritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writePolicy(t, dir, "log_file = \""+dir+"/missing/action.log\"\n"+servePolicy)
	var out, errOut bytes.Buffer
	code := Serve(context.Background(), Options{PolicyFile: pf, Env: []string{"SSH_ORIGINAL_COMMAND=echo hi"}, Stdout: &out, Stderr: &errOut, ownPolicy: true})
	if code != ExitRefused || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q; want %d and nothing run", code, out.String(), ExitRefused)
	}
	// The refusal names the file and the fix, in no package's name.
	if msg, want := errOut.String(), "its directory "+dir+"/missing does not exist; fix: mkdir -p "+dir+"/missing"; !strings.Contains(msg, want) || strings.Contains(msg, "forcedcmd:") {
		t.Errorf("stderr %q; want it to contain %q", msg, want)
	}
}

func TestServeLogsCertificateKeyID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := writePolicy(t, dir, servePolicy)
	cert := testCert(t, "airlock:act-42", 42)
	plain := testCert(t, "", 0).Key
	tests := []struct {
		name string
		info string
		want AuthInfo
	}{
		{"certificate", "publickey " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))) + "\n",
			AuthInfo{Certificate: true, KeyID: "airlock:act-42", Serial: 42, Fingerprint: ssh.FingerprintSHA256(cert.Key)}},
		{"plain key", "publickey " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(plain))) + "\n",
			AuthInfo{Fingerprint: ssh.FingerprintSHA256(plain)}},
		{"other methods are ignored", "password\nkeyboard-interactive\n", AuthInfo{}},
		{"garbage", "publickey ssh-ed25519 !!!\n\x00\xff", AuthInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "auth")
			if err := os.WriteFile(f, []byte(tt.info), 0o600); err != nil {
				t.Fatal(err)
			}
			_, rec := serve(t, pf, []string{"SSH_ORIGINAL_COMMAND=echo hi", "SSH_USER_AUTH=" + f})
			if diff := cmp.Diff(tt.want, rec.Auth); diff != "" {
				t.Errorf("auth info (-want +got):\n%s", diff)
			}
		})
	}
}

func testCert(t *testing.T, keyID string, serial uint64) *ssh.Certificate {
	t.Helper()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ssh.NewSignerFromKey(caPriv)
	if err != nil {
		t.Fatal(err)
	}
	c := &ssh.Certificate{Key: k, KeyId: keyID, Serial: serial, CertType: ssh.UserCert, ValidPrincipals: []string{"deploy"}, ValidBefore: ssh.CertTimeInfinity}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRecordString(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want string
	}{
		{"allowed", Record{Decision: Allow, Verb: "restart", Args: []string{"web", "a b"}, Exit: 0, Duration: 1500 * time.Millisecond, Client: "192.0.2.7 50022",
			Auth: AuthInfo{Certificate: true, KeyID: "airlock:act-1", Serial: 9, Fingerprint: "SHA256:abc"}},
			`decision=allow verb="restart" args=["web" "a b"] exit=0 duration=1.5s key_id="airlock:act-1" serial=9 key=SHA256:abc client="192.0.2.7 50022"`},
		{"refused, hostile command", Record{Decision: Refuse, Command: "x\ny\u202ez\x00", Reason: "policy: bad", Exit: 126},
			`decision=refuse command="x\ny\u202ez\x00" reason="policy: bad" exit=126`},
		{"timed out", Record{Decision: Allow, Verb: "hang", Exit: 124, TimedOut: true, Signal: "KILL", Termination: Confirmed, Duration: time.Second},
			`decision=allow verb="hang" args=[] exit=124 timeout=true signal=KILL termination=confirmed duration=1s`},
		{"stopped, not confirmed", Record{Decision: Allow, Verb: "hang", Exit: 125, ClientGone: true, Termination: Unconfirmed, Left: []string{`812 ("sle\"ep", uid 0)`, "and 3 more"}, Duration: time.Second},
			`decision=allow verb="hang" args=[] exit=125 client_gone=true termination=unconfirmed left=["812 (\"sle\\\"ep\", uid 0)" "and 3 more"] duration=1s`},
		{"long command is cut", Record{Decision: Refuse, Command: strings.Repeat("a", 600), Exit: 126},
			`decision=refuse command="` + strings.Repeat("a", maxLoggedCommand) + `\u2026(600 bytes)" exit=126`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.rec.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol, err := policy.Load(writePolicy(t, dir, servePolicy))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if code := Explain(pol, "echo 'a b'", &b); code != 0 {
		t.Fatalf("Explain allowed command: %d\n%s", code, b.String())
	}
	if !strings.Contains(b.String(), "argv:    /bin/echo 'a b'\n") {
		t.Errorf("explain output lacks the quoted argv:\n%s", b.String())
	}
	b.Reset()
	if code := Explain(pol, "echo $(id)", &b); code != ExitRefused || strings.Count(b.String(), "\n") != 1 {
		t.Errorf("Explain refused command: %d, %q; want %d and one line", code, b.String(), ExitRefused)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name      string
		src       string
		wantCode  int
		wantLines []string
	}{
		{"valid", servePolicy, 0, []string{"action.hcl:21: warning: verb missing: /nonexistent/program is not an executable file here", "action.hcl: ok, 6 verbs"}},
		{"invalid", "verb \"a\" {\n  argv = [\"true\"]\n}\n\nverb \"b\" {\n  argv = [\"/bin/true\"]\n  timeout = \"x\"\n}\n", 1, []string{"action.hcl:2: ", "action.hcl:7: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := filepath.Join(dir, tt.name)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			pf := writePolicy(t, sub, tt.src)
			var b bytes.Buffer
			code := Check(pf, "", &b)
			if code != tt.wantCode {
				t.Errorf("Check = %d, want %d\n%s", code, tt.wantCode, b.String())
			}
			lines := strings.Split(strings.TrimSuffix(strings.ReplaceAll(b.String(), sub+"/", ""), "\n"), "\n")
			if len(lines) != len(tt.wantLines) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tt.wantLines), b.String())
			}
			for i, w := range tt.wantLines {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

// The account that serves a policy must not be able to change it: a
// policy (or its directory) it owns, or one writable by group or others,
// is refused for every request, and --check says why.
func TestPolicyTheAccountCouldChangeIsRefused(t *testing.T) {
	t.Parallel()
	const uid = 4242 // the serving account, as policyGuard sees it
	for _, tc := range []struct {
		name  string
		setup func(dir, file string)
		want  string
	}{
		{"owned by the account", func(dir, file string) { os.Chown(file, uid, uid) }, "belongs to this account"},
		{"its directory owned by the account", func(dir, file string) { os.Chown(dir, uid, uid) }, "its directory"},
		{"group-writable", func(dir, file string) { os.Chmod(file, 0o664) }, "writable by group or others"},
		{"directory world-writable", func(dir, file string) { os.Chmod(dir, 0o777) }, "writable by group or others"},
		{"fine", func(dir, file string) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Geteuid() != 0 && tc.want != "" && tc.name != "group-writable" && tc.name != "directory world-writable" {
				t.Skip("needs root to give files to another account")
			}
			dir := filepath.Join(t.TempDir(), "p")
			os.Mkdir(dir, 0o755)
			file := writePolicy(t, dir, `verb "hi" { argv = ["/bin/echo", "hi"] }`)
			os.Chmod(file, 0o644)
			tc.setup(dir, file)
			err := policyGuard(file, uid)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("policyGuard: %v, want %q", err, tc.want)
			}
		})
	}
}

// A policy reached through a link is judged where it really lives too.
func TestPolicyThroughALinkIntoTheAccountsDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another account")
	}
	const uid = 4242
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o755)
	file := writePolicy(t, theirs, `verb "hi" { argv = ["/bin/echo", "hi"] }`)
	os.Chown(theirs, uid, uid) // the account can replace the file
	ours := filepath.Join(base, "ours")
	os.Mkdir(ours, 0o755)
	link := filepath.Join(ours, "action.hcl")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	if err := policyGuard(link, uid); err == nil || !strings.Contains(err.Error(), "its directory "+theirs) {
		t.Errorf("policyGuard through a link: %v, want the real directory refused", err)
	}
}

// How a stopped verb's end becomes the exit status and the line on
// stderr: unconfirmed wins over a timeout, and says what still runs.
func TestConclude(t *testing.T) {
	plan := &policy.Plan{Verb: &policy.Verb{Name: "hang"}, Timeout: 2 * time.Second}
	killed := syscall.WaitStatus(int(syscall.SIGKILL))
	exited := func(code int) syscall.WaitStatus { return syscall.WaitStatus(code << 8) }
	tests := []struct {
		name     string
		rec      Record
		ws       syscall.WaitStatus
		wantExit int
		wantMsg  []string // substrings; none means no message
	}{
		{"ended by itself", Record{}, exited(3), 3, nil},
		{"killed by a signal", Record{}, killed, 137, nil},
		{"timed out, confirmed", Record{TimedOut: true, Termination: Confirmed}, killed, ExitTimeout, []string{"passed its timeout (2s)", "every process of it was killed", "exit 124"}},
		{"timed out, unconfirmed", Record{TimedOut: true, Termination: Unconfirmed, Left: []string{`812 ("sleep", uid 0)`}}, killed, ExitUnconfirmed,
			[]string{"end is unconfirmed", `still running: 812 ("sleep", uid 0)`, "exit 125"}},
		{"timed out, the supervisor unsure", Record{TimedOut: true, Termination: Unconfirmed}, exited(ExitUnconfirmed), ExitUnconfirmed,
			[]string{"end is unconfirmed", "supervisor could not confirm"}},
		{"client gone, unconfirmed", Record{ClientGone: true, Termination: Unconfirmed, Left: []string{"9"}}, killed, ExitUnconfirmed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.rec
			msg := conclude(&rec, tt.ws, plan)
			if rec.Exit != tt.wantExit || (msg == "") != (len(tt.wantMsg) == 0) {
				t.Errorf("exit %d, message %q; want exit %d", rec.Exit, msg, tt.wantExit)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

// batchEnvLines is the fixed non-interactive set as env(1) prints it.
func batchEnvLines() string {
	var b strings.Builder
	for _, v := range batchenv.Vars() {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}
