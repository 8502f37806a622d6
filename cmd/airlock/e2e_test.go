package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// End-to-end tests of the built binaries: `airlock serve` as its own
// process, `airlock-ssh` and `airlock run` as agents, the reviewer CLI,
// against a real sshd.

// binaries builds airlock and airlock-ssh once per test process.
func binaries(t testing.TB) (airlock, airlockSSH string) {
	t.Helper()
	dir := gatewaytest.Binaries(t)
	return filepath.Join(dir, "airlock"), filepath.Join(dir, "airlock-ssh")
}

// daemon is an `airlock serve` process.
type daemon struct {
	*gatewaytest.Daemon
	t       testing.TB
	cfgFile string
	state   string
	socket  string
	pwFile  string
}

// writeConfig writes a configuration with one target, "box", on s whose
// account has the approval mode given; the gateway listens on a port the
// kernel chooses.
func writeConfig(t testing.TB, s *sshtest.SSHD, mode string) (cfgFile, state string) {
	t.Helper()
	dir := t.TempDir()
	state = filepath.Join(dir, "state")
	cfgFile = gatewaytest.Config{StateDir: state, HTTP: "127.0.0.1:0", Credentials: map[string]string{"key": s.ClientKeyFile},
		Targets: []gatewaytest.Target{{Name: "box", Address: s.Addr, HostKey: s.HostKey,
			Accounts: []gatewaytest.Account{{Name: s.User, Credential: "key", Approval: mode}}}},
	}.Write(t, dir)
	return cfgFile, state
}

// startDaemon runs `airlock serve` on a configuration writeConfig wrote;
// the reviewer's password file is next to it.
func startDaemon(t testing.TB, cfgFile, state string) *daemon {
	t.Helper()
	gd := &gatewaytest.Daemon{ConfigFile: cfgFile, Socket: filepath.Join(state, "run", "airlock.sock"),
		PasswordFile: filepath.Join(filepath.Dir(cfgFile), "pw")}
	if err := os.WriteFile(gd.PasswordFile, []byte(gatewaytest.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gd.Run(t, gatewaytest.DaemonOptions{})
	return &daemon{Daemon: gd, t: t, cfgFile: cfgFile, state: state, socket: gd.Socket, pwFile: gd.PasswordFile}
}

// start restarts the daemon after a stop.
func (d *daemon) start() { d.t.Helper(); d.Start() }

// signal sends sig and waits for the daemon to exit.
func (d *daemon) signal(sig syscall.Signal) { d.Stop(sig) }

func (d *daemon) logText() string { return d.Log.String() }

// lockedBuffer is a bytes.Buffer that a process may write while the test
// reads it.
type lockedBuffer = gatewaytest.LockedBuffer

// cli runs the airlock binary as a reviewer or operator.
func (d *daemon) cli(args ...string) (string, string, int) {
	d.t.Helper()
	return d.CLI(args...)
}

// pending waits for n pending approvals and returns them.
func (d *daemon) pending(n int) []api.Approval {
	d.t.Helper()
	var list []api.Approval
	testkit.EventuallyErr(d.t, func() error {
		out, errs, code := d.cli("approvals", "list", "--json")
		if code != 0 {
			d.t.Fatalf("approvals list: %s", errs)
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			d.t.Fatalf("approvals list --json: %v: %s", err, out)
		}
		if len(list) < n {
			return fmt.Errorf("%d approvals pending, want %d", len(list), n)
		}
		return nil
	}, "approvals to be pending")
	return list
}

// agent runs a command line as an agent process (under sh, as an agent's
// tool call would be), with the socket in its environment.
func (d *daemon) agent(script string) *exec.Cmd {
	_, sshBin := binaries(d.t)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket, "PATH="+filepath.Dir(sshBin)+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that a test can end all of it
	return cmd
}

func TestEndToEndBinaries(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfgFile, state := writeConfig(t, s, "run")
	_, errs, code := runCLIEnv(t, map[string]string{"AIRLOCK_PASSWORD_FILE": writePW(t)}, "reviewer", "add", "alice", "--config", cfgFile)
	if code != 0 {
		t.Fatalf("reviewer add: %s", errs)
	}
	if out, errs, code := runCLIEnv(t, nil, "config", "check", "--config", cfgFile); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("config check: %s %s", out, errs)
	}
	d := startDaemon(t, cfgFile, state)
	for _, phase := range endToEndPhases {
		t.Run(phase.name, func(t *testing.T) { phase.run(t, d) })
	}
}

// endToEndPhases run in this order against one daemon, each after the
// last: a phase that stops the daemon starts it again.
var endToEndPhases = []struct {
	name string
	run  func(t *testing.T, d *daemon)
}{
	{"airlock run: one approval covers the run, a second process needs its own", e2eRunApproval},
	{"airlock run past its run's TTL: the next action asks for a renewal", e2eRunRenews},
	{"airlock-ssh --put and --get move a file byte for byte", e2ePutGet},
	{"a redacted command: revealed, approved, proven", e2eRedactedCommand},
	{"operator CLI: agent tokens", e2eAgentTokens},
	{"operator CLI: reviewer lifecycle", e2eReviewerLifecycle},
	{"reviewer CLI: runs list and end", e2eRunsListAndEnd},
	{"airlock-ssh stopped by a signal says what the gateway recorded", e2eHelperSignalled},
	{"kill -9 mid-action, restart: interrupted and the chain verifies", e2eKillAndRestart},
	{"SIGHUP and config reload put the file in force; a bad file changes nothing", e2eConfigReload},
	{"SIGTERM lets the in-flight action finish", e2eSIGTERM},
}

func e2eRunApproval(t *testing.T, d *daemon) {
	airlock, _ := binaries(t)
	var out1 bytes.Buffer
	a1 := d.agent(airlock + " run -- sh -c 'airlock-ssh box echo first; airlock-ssh box echo second; airlock-ssh box exit 7; echo status=$?'")
	a1.Stdout, a1.Stderr = &out1, &out1
	if err := a1.Start(); err != nil {
		t.Fatal(err)
	}
	list := d.pending(1)
	if list[0].Kind != "run" || list[0].Command != "echo first" {
		t.Fatalf("pending %+v", list[0])
	}
	if _, errs, code := d.cli("approvals", "approve", list[0].ID, "--ttl", "10m"); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	a1.Wait()
	got := out1.String()
	for _, want := range []string{"first\n", "second\n", "status=7"} {
		if !strings.Contains(got, want) {
			t.Errorf("agent output %q lacks %q", got, want)
		}
	}
	if strings.Count(got, "waiting for a reviewer") != 1 {
		t.Errorf("want exactly one waiting message: %q", got)
	}
	// A second agent process, same command: a new run, a new approval.
	var out2 bytes.Buffer
	a2 := d.agent(airlock + " run -- airlock-ssh box echo third")
	a2.Stdout, a2.Stderr = &out2, &out2
	a2.Start()
	list = d.pending(1)
	if _, errs, code := d.cli("approvals", "deny", list[0].ID, "--reason", "not this one"); code != 0 {
		t.Fatalf("deny: %s", errs)
	}
	err := a2.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 255 || !strings.Contains(out2.String(), "airlock-ssh: denied:") || !strings.Contains(out2.String(), "not this one") {
		t.Fatalf("second agent: %v %q", err, out2.String())
	}
	// The denial ended the run: airlock run has nothing left to end
	// and nothing to report about it.
	if strings.Contains(out2.String(), "ending run") {
		t.Errorf("airlock run reported ending a run the denial had ended: %q", out2.String())
	}
}

func e2ePutGet(t *testing.T, d *daemon) {
	airlock, _ := binaries(t)
	local := filepath.Join(t.TempDir(), "payload.bin")
	data := make([]byte, 1<<20+3)
	rand.Read(data)
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(sshtest.WritableDir(t), "payload.bin")
	back := filepath.Join(t.TempDir(), "back.bin")
	var out bytes.Buffer
	a := d.agent(airlock + " run -- sh -c 'airlock-ssh --put " + local + " box:" + remote + " && airlock-ssh --get box:" + remote + " " + back +
		" && cmp " + local + " " + back + " && echo same; airlock-ssh --put " + local + " box:" + remote + "; echo again=$?; airlock-ssh --get box:" + remote + " " + back + "; echo back=$?'")
	a.Stdout, a.Stderr = &out, &out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	list := d.pending(1)
	if list[0].Kind != "run" || list[0].Command != "put "+remote+" mode 0644" || list[0].StdinBytes != int64(len(data)) {
		t.Fatalf("pending %+v", list[0])
	}
	if _, errs, code := d.cli("approvals", "approve", list[0].ID, "--ttl", "10m"); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	a.Wait()
	got := out.String()
	for _, want := range []string{"same\n", "again=1", "exists", "back=255", "pass --overwrite"} {
		if !strings.Contains(got, want) {
			t.Errorf("agent output %q lacks %q", got, want)
		}
	}
	if b, err := os.ReadFile(remote); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the target's file: %d bytes, %v", len(b), err)
	}

	// A link at LOCAL: refused without --overwrite; with it, the link
	// is replaced, its target never written.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(victim, link)
	out.Reset()
	a = d.agent(airlock + " run -- sh -c 'airlock-ssh --get box:" + remote + " " + link + "; echo plain=$?; airlock-ssh --overwrite --get box:" + remote + " " + link + "; echo over=$?'")
	a.Stdout, a.Stderr = &out, &out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	list = d.pending(1)
	if _, errs, code := d.cli("approvals", "approve", list[0].ID, "--ttl", "10m"); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	a.Wait()
	if got := out.String(); !strings.Contains(got, "plain=255") || !strings.Contains(got, "over=0") {
		t.Errorf("agent output %q", got)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the link was not replaced by the file: %v %v", st, err)
	}
}

func e2eRedactedCommand(t *testing.T, d *daemon) {
	const key = "AKIAIOSFODNN7EXAMPLE"
	original := "printf %s " + key + " | wc -c"
	// In a run of its own, which ends with it (the next tests' actions
	// ask again).
	airlock, _ := binaries(t)
	var out bytes.Buffer
	a := d.agent(airlock + ` run -- airlock-ssh --json box -- '` + original + `'`)
	a.Stdout = &out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	list := d.pending(1)
	if strings.Contains(list[0].Command, key) {
		t.Fatalf("the pending list shows the key: %q", list[0].Command)
	}
	show, errs, code := d.cli("approvals", "show", list[0].ID)
	if code != 0 || strings.Contains(show, key) || !strings.Contains(show, "redacted: what looked like credentials (aws-access-key)") {
		t.Fatalf("approvals show: %d %s %s", code, show, errs)
	}
	show, errs, code = d.cli("approvals", "show", list[0].ID, "--reveal")
	if code != 0 || !strings.Contains(show, original+" (your reading is recorded)") {
		t.Fatalf("approvals show --reveal: %d %s %s", code, show, errs)
	}
	if _, errs, code := d.cli("approvals", "approve", list[0].ID); code != 0 {
		t.Fatalf("approve: %s", errs)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("agent: %v %s", err, out.String())
	}
	var act api.Action
	if err := json.Unmarshal(out.Bytes(), &act); err != nil || strings.TrimSpace(act.Stdout) != "20" || strings.Contains(out.String(), key) {
		t.Fatalf("action: %v %s", err, out.String())
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	os.WriteFile(good, []byte(original+"\n"), 0o600)
	os.WriteFile(bad, []byte(strings.Replace(original, "EXAMPLE", "EXAMPLF", 1)), 0o600)
	if out, errs, code := d.cli("audit", "check-command", "--config", d.cfgFile, "--command-file", good, act.ID); code != 0 || !strings.Contains(out, "MATCH") {
		t.Errorf("check-command, the original: %d %s %s", code, out, errs)
	}
	if out, errs, code := d.cli("audit", "check-command", "--config", d.cfgFile, "--command-file", bad, act.ID); code != 1 || !strings.Contains(out, "NO MATCH") {
		t.Errorf("check-command, another command: %d %s %s", code, out, errs)
	}
	if shown, _, code := d.cli("audit", "show", "--config", d.cfgFile, act.ID); code != 0 || strings.Contains(shown, key) || !strings.Contains(shown, "command_hmac") {
		t.Errorf("audit show: %d %s", code, shown)
	}
	// Nowhere in the log: not in the action's entries, nor in the
	// run's anchor (whose arguments held the command too).
	if export, _, code := d.cli("audit", "export", "--config", d.cfgFile); code != 0 || strings.Contains(export, key) || !strings.Contains(export, "[redacted:aws-access-key]") {
		t.Errorf("audit export: exit %d, or it holds the key", code)
	}
}

func e2eAgentTokens(t *testing.T, d *daemon) {
	token, errs, code := d.cli("agent", "add", "--limit", "box", "--ttl", "24h", "ci-bot")
	token = strings.TrimSpace(token)
	if code != 0 || !strings.HasPrefix(token, "airlock_agent_") || !strings.Contains(errs, "shown once") {
		t.Fatalf("agent add: exit %d: %q %s", code, token, errs)
	}
	list, _, code := d.cli("agent", "list")
	if code != 0 || !strings.Contains(list, "ci-bot") || !strings.Contains(list, "box") || !strings.Contains(list, "usable") || strings.Contains(list, token) {
		t.Errorf("agent list: exit %d:\n%s", code, list)
	}
	run, err := api.NewHTTPClient(d.HTTPURL, token).CreateRun(context.Background())
	if err != nil || !strings.HasPrefix(run.Requester, "agent:ci-bot/agt_") {
		t.Fatalf("a run with the agent token: %+v %v", run, err)
	}
	if out, errs, code := d.cli("agent", "revoke", "ci-bot"); code != 0 || !strings.Contains(out, "revoked agt_") {
		t.Fatalf("agent revoke: exit %d: %s %s", code, out, errs)
	}
	var ae *api.Error
	if _, err := api.NewHTTPClient(d.HTTPURL, token).CreateRun(context.Background()); !errors.As(err, &ae) || ae.Status != 401 {
		t.Errorf("a run with the revoked token: %v, want 401", err)
	}
	if list, _, _ := d.cli("agent", "list"); !strings.Contains(list, "revoked by operator:") {
		t.Errorf("agent list after revoke:\n%s", list)
	}
	exported, _, _ := d.cli("audit", "export")
	if !strings.Contains(exported, `"agent.added"`) || !strings.Contains(exported, `"agent.revoked"`) || strings.Contains(exported, strings.TrimPrefix(token, "airlock_agent_")[33:]) {
		t.Errorf("the audit log does not record the agent token's life, or holds its secret")
	}
}

func e2eReviewerLifecycle(t *testing.T, d *daemon) {
	ctx := context.Background()
	if out, errs, code := d.cli("reviewer", "add", "rita"); code != 0 || !strings.Contains(out, "recorded in the audit log") {
		t.Fatalf("reviewer add: exit %d: %s %s", code, out, errs)
	}
	if _, errs, code := d.cli("reviewer", "add", "rita"); code == 0 || !strings.Contains(errs, "exists already") {
		t.Errorf("adding rita twice: exit %d: %s", code, errs)
	}
	login := func() *api.Client {
		t.Helper()
		l, err := api.NewHTTPClient(d.HTTPURL, "").Login(ctx, "rita", gatewaytest.Password)
		if err != nil {
			t.Fatalf("rita logs in: %v", err)
		}
		return api.NewHTTPClient(d.HTTPURL, l.Token)
	}
	refused := func(what string, c *api.Client) {
		t.Helper()
		var ae *api.Error
		if _, err := c.Approvals(ctx, "pending"); !errors.As(err, &ae) || ae.Status != 401 {
			t.Errorf("%s: rita's token still works: %v", what, err)
		}
	}
	rita := login()
	if _, err := rita.Approvals(ctx, "pending"); err != nil {
		t.Fatalf("rita's token: %v", err)
	}
	if out, errs, code := d.cli("reviewer", "disable", "rita"); code != 0 || !strings.Contains(out, "disabled") {
		t.Fatalf("reviewer disable: exit %d: %s %s", code, out, errs)
	}
	refused("disabled", rita)
	if _, err := api.NewHTTPClient(d.HTTPURL, "").Login(ctx, "rita", gatewaytest.Password); err == nil {
		t.Error("a disabled reviewer logged in")
	}
	if list, _, code := d.cli("reviewer", "list"); code != 0 || !regexp.MustCompile(`rita\s+password\s+disabled`).MatchString(list) {
		t.Errorf("reviewer list:\n%s", list)
	}
	if _, errs, code := d.cli("reviewer", "enable", "rita"); code != 0 {
		t.Fatalf("reviewer enable: %s", errs)
	}
	refused("enabled again", rita)
	rita = login()
	if _, errs, code := d.cli("reviewer", "passwd", "rita"); code != 0 {
		t.Fatalf("reviewer passwd: %s", errs)
	}
	refused("new password", rita)
	rita = login()
	if out, errs, code := d.cli("reviewer", "rename", "rita", "rita2"); code != 0 || !strings.Contains(out, "rita is now rita2") {
		t.Fatalf("reviewer rename: exit %d: %s %s", code, out, errs)
	}
	refused("renamed", rita)
	if _, errs, code := d.cli("reviewer", "rename", "rita2", "ALICE"); code == 0 || !strings.Contains(errs, "exists already") {
		t.Errorf("renaming rita2 to another account's name: exit %d: %s", code, errs)
	}
	if _, errs, code := d.cli("reviewer", "rename", "rita2"); code != 2 || !strings.Contains(errs, "NEW-NAME") {
		t.Errorf("rename without a new name: exit %d: %s", code, errs)
	}
	if _, errs, code := d.cli("reviewer", "rename", "rita2", "rita"); code != 0 {
		t.Fatalf("reviewer rename back: %s", errs)
	}
	rita = login()
	if _, errs, code := d.cli("reviewer", "remove", "rita"); code != 0 {
		t.Fatalf("reviewer remove: %s", errs)
	}
	refused("removed", rita)
	if _, errs, code := d.cli("reviewer", "disable", "nobody"); code == 0 || !strings.Contains(errs, `no reviewer "nobody"`) {
		t.Errorf("disabling no one: exit %d: %s", code, errs)
	}
	exported, _, _ := d.cli("audit", "export")
	for _, kind := range []string{"reviewer.added", "reviewer.disabled", "reviewer.enabled", "reviewer.password_changed", "reviewer.renamed", "reviewer.removed"} {
		if !strings.Contains(exported, `"`+kind+`"`) {
			t.Errorf("the audit log has no %s", kind)
		}
	}
	// The harness added its reviewer before the gateway started: the
	// gateway recorded that at its start, marked offline.
	if !regexp.MustCompile(`"reviewer\.added"[^\n]*"offline":\s*true`).MatchString(exported) {
		t.Errorf("the reviewer added before the start is not in the audit log as an offline change")
	}
	if strings.Contains(exported, gatewaytest.Password) || strings.Contains(exported, "argon2id") {
		t.Error("the audit log holds a password or its hash")
	}
}

func e2eRunsListAndEnd(t *testing.T, d *daemon) {
	// An agent whose run stays open: one action, then it waits until it
	// is told to end (SIGTERM), and tries one more.
	airlock, _ := binaries(t)
	out1 := &lockedBuffer{}
	// It also leaves a child that ignores SIGTERM: the run's end must end
	// it too (airlock run KILLs what is left of the agent's group).
	pidFile := filepath.Join(t.TempDir(), "pids")
	a := d.agent(airlock + ` run -- sh -c '(trap "" TERM; exec sleep 1000) >/dev/null 2>&1 & echo $! > ` + pidFile +
		`; trap "airlock-ssh box echo again; exit 3" TERM; airlock-ssh box true; while :; do sleep 0.1; done'`)
	a.Stdout, a.Stderr = out1, out1
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
	list := d.pending(1)
	// The list shows the timeout and the anchor's executable (airlock
	// run's).
	if out, _, _ := d.cli("approvals", "list"); !strings.Contains(out, "1m0s") || !strings.Contains(out, airlock) {
		t.Errorf("approvals list lacks the timeout or the anchor's executable %s:\n%s", airlock, out)
	}
	if _, errs, code := d.cli("approvals", "approve", "--scope", "box", list[0].ID); code != 0 {
		t.Fatalf("approve --scope: %s", errs)
	}
	out, errs, code := d.cli("runs", "list", "--json")
	if code != 0 {
		t.Fatalf("runs list: %s", errs)
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("runs list --json: %v %q", err, out)
	}
	var live *api.Run
	for i := range runs {
		if runs[i].ID == list[0].RunID {
			live = &runs[i]
		}
	}
	if live == nil || live.Kind != "local" || live.Anchor == nil {
		t.Fatalf("the agent's run %s is not listed as a local run with its anchor: %s", list[0].RunID, out)
	}
	if _, errs, code := d.cli("runs", "end", live.ID, "--reason", "test over"); code != 0 {
		t.Fatalf("runs end: %s", errs)
	}
	out, _, _ = d.cli("runs", "list", "--json")
	if strings.Contains(out, live.ID) {
		t.Errorf("run %s still listed after runs end", live.ID)
	}
	if out, _, _ := d.cli("runs", "list", "--all"); !regexp.MustCompile(live.ID + `.*ended.*by ` + gatewaytest.Reviewer + `: test over`).MatchString(out) {
		t.Errorf("runs list --all does not show the ended run and why:\n%s", out)
	}
	// airlock run learns that its run was ended and ends the agent
	// (SIGTERM to its group); the agent's last action is told who ended
	// the run, and why.
	werr := waitBounded(t, a)
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 3 || !strings.Contains(out1.String(), "was ended by a reviewer") {
		t.Errorf("the agent after runs end: %v, want exit 3; it said:\n%s", werr, out1.String())
	}
	if want := "the run was ended by " + gatewaytest.Reviewer + ": test over; do not retry without asking a human"; !strings.Contains(out1.String(), want) {
		t.Errorf("the agent after runs end was told:\n%s\nwant %q", out1.String(), want)
	}
	for _, pid := range readPids(t, pidFile) {
		testkit.Eventually(t, func() bool { return !proctree.Alive(pid) },
			"the agent's child %d, which ignores SIGTERM, outlived the run a reviewer ended", pid)
	}
}

// waitBounded waits for cmd to exit, failing t if it has not within
// testkit.Patience.
func waitBounded(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(testkit.Patience):
		// What it started may hold its output open: Wait is left to
		// return when they end.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("%v did not exit within %v", cmd.Args, testkit.Patience)
		return nil
	}
}

func e2eHelperSignalled(t *testing.T, d *daemon) {
	// Its own run (airlock run), so that it leaves no approved run
	// behind for the next agent; the signal goes to airlock-ssh.
	airlock, sshBin := binaries(t)
	out := &lockedBuffer{}
	a := exec.Command(airlock, "run", "--", sshBin, "box", "echo started; sleep 30")
	a.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket)
	a.Stdout, a.Stderr = out, out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	list := d.pending(1)
	d.cli("approvals", "approve", list[0].ID)
	testkit.EventuallyErr(t, func() error {
		if s := out.String(); !strings.Contains(s, "\nstarted\n") {
			return fmt.Errorf("output %q", s)
		}
		return nil
	}, "the command never started")
	table, err := proctree.Table()
	if err != nil {
		t.Fatal(err)
	}
	helper := proctree.Descendants(table, a.Process.Pid)
	if len(helper) != 1 {
		t.Fatalf("airlock run's children: %v", helper)
	}
	syscall.Kill(helper[0].PID, syscall.SIGINT)
	err = a.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 {
		t.Errorf("exit: %v, want 255", err)
	}
	m := regexp.MustCompile(`stopped by a signal: action (act_\w+) ended cancelled \(termination: (confirmed|unconfirmed)\)`).FindStringSubmatch(out.String())
	if m == nil {
		// Only when the gateway had not recorded it in time; it must
		// not claim anything then.
		if !strings.Contains(out.String(), "had not recorded its outcome") || strings.Contains(out.String(), "killed") {
			t.Fatalf("airlock-ssh said %q", out.String())
		}
		t.Logf("the outcome was not recorded within the wait: %q", out.String())
		return
	}
	t.Logf("airlock-ssh: %s", m[0])
	// What it printed is what the audit log holds.
	export, errs, code := d.cli("audit", "export")
	if code != 0 {
		t.Fatalf("audit export: %s", errs)
	}
	found := false
	for _, line := range strings.Split(export, "\n") {
		if strings.Contains(line, `"`+m[1]+`"`) && strings.Contains(line, `"outcome":"cancelled"`) {
			found = true
			if !strings.Contains(line, `"termination":"`+m[2]+`"`) {
				t.Errorf("airlock-ssh said termination %s; the audit log: %s", m[2], line)
			}
		}
	}
	if !found {
		t.Errorf("no cancelled outcome of %s in the audit log:\n%s", m[1], export)
	}
}

func e2eKillAndRestart(t *testing.T, d *daemon) {
	out := &lockedBuffer{}
	a := d.agent("airlock-ssh box 'echo started; sleep 30'")
	a.Stdout, a.Stderr = out, out
	a.Start()
	list := d.pending(1)
	// The reviewer looks at it in full first: who asks, and how much
	// that process covers now.
	shown, errs, code := d.cli("approvals", "show", list[0].ID)
	if code != 0 || !strings.Contains(shown, "echo started; sleep 30") || !regexp.MustCompile(`covers\s+[1-9][0-9]* process\(es\) now`).MatchString(shown) || !strings.Contains(shown, "anchor") {
		t.Errorf("approvals show: exit %d: %s%s", code, shown, errs)
	}
	if _, errs, code := d.cli("approvals", "show", "apr_nosuch"); code == 0 || !strings.Contains(errs, "no pending approval") {
		t.Errorf("approvals show of no request: exit %d: %s", code, errs)
	}
	d.cli("approvals", "approve", list[0].ID)
	testkit.Poll(testkit.Patience, func() bool { return strings.Contains(out.String(), "started") })
	d.signal(syscall.SIGKILL)
	a.Wait()
	// Never a bare EOF: the agent learns the action, that its outcome
	// is unknown, and how to ask for it.
	m := regexp.MustCompile(`airlock-ssh: the connection to the gateway broke during action (act_[a-z0-9]+) \(.*\): its outcome is unknown, and it may have run; ` + "`airlock-ssh --action act_[a-z0-9]+`").FindStringSubmatch(out.String())
	if m == nil || a.ProcessState.ExitCode() != 255 {
		t.Fatalf("airlock-ssh when the gateway died: exit %d:\n%s", a.ProcessState.ExitCode(), out.String())
	}
	d.start()
	late := &lockedBuffer{}
	ask := d.agent("airlock-ssh --action " + m[1])
	ask.Stdout, ask.Stderr = late, late
	if err := ask.Run(); ask.ProcessState.ExitCode() != 255 || !strings.Contains(late.String(), "airlock-ssh: interrupted: ") {
		t.Errorf("airlock-ssh --action after the restart: %v:\n%s", err, late.String())
	}
	outText, errs, code := d.cli("audit", "export")
	if code != 0 {
		t.Fatalf("audit export: %s", errs)
	}
	if !strings.Contains(outText, `"interrupted"`) {
		t.Errorf("no interrupted outcome after the restart:\n%s", outText)
	}
	if _, errs, code := d.cli("audit", "verify", "--config", d.cfgFile); code != 0 {
		t.Errorf("audit verify: exit %d: %s", code, errs)
	}
}

func e2eConfigReload(t *testing.T, d *daemon) {
	if err := syscall.Kill(d.PID(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyErr(t, func() error {
		if log := d.logText(); !strings.Contains(log, "configuration reloaded") {
			return fmt.Errorf("the log:\n%s", gatewaytest.Tail(log, 2000))
		}
		return nil
	}, "no reload after SIGHUP")
	if _, errs, code := d.cli("approvals", "list"); code != 0 {
		t.Fatalf("the gateway after SIGHUP: %s", errs)
	}
	if out, errs, code := d.cli("config", "reload"); code != 0 || !strings.Contains(out, "reloaded") {
		t.Errorf("config reload: exit %d: %s %s", code, out, errs)
	}
	good, err := os.ReadFile(d.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(d.cfgFile, good, 0o600)
	if err := os.WriteFile(d.cfgFile, append(append([]byte(nil), good...), "\ntarget \"broken\" {\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := d.cli("config", "reload"); code == 0 || !strings.Contains(errs, d.cfgFile) {
		t.Errorf("config reload of a broken file: exit %d: %s", code, errs)
	}
	if _, errs, code := d.cli("approvals", "list"); code != 0 {
		t.Fatalf("the gateway after a refused reload: %s", errs)
	}
}

func e2eSIGTERM(t *testing.T, d *daemon) {
	var out bytes.Buffer
	a := d.agent(gatewaytest.Binary(t, "airlock") + " run -- airlock-ssh box 'sleep 2; echo done'")
	a.Stdout, a.Stderr = &out, &out
	a.Start()
	list := d.pending(1)
	d.cli("approvals", "approve", list[0].ID)
	time.Sleep(500 * time.Millisecond)
	d.signal(syscall.SIGTERM)
	a.Wait()
	if !strings.Contains(out.String(), "done") {
		t.Errorf("the action did not finish across SIGTERM: %q", out.String())
	}
	if !strings.Contains(d.logText(), "stopping") {
		t.Errorf("no graceful stop in the log")
	}
	// The final checkpoint covers every entry.
	if out, errs, code := d.cli("audit", "verify", "--config", d.cfgFile); code != 0 || !strings.Contains(out, " 0 entries not yet covered") {
		t.Errorf("audit verify after SIGTERM: exit %d: %s %s", code, out, errs)
	}
	d.start()
}

func writePW(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(f, []byte(testkit.Password+"\n"), 0o600)
	return f
}

func runCLIEnv(t testing.TB, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code := dispatch(args, &out, &errb)
	return out.String(), errb.String(), code
}
