package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// deploySession is a scripted 50-command deploy of an application under
// {D}, as an agent runs it: looking around, staging a release, switching to
// it, restarting, cleaning up. {D} is a directory of the test's.
var deploySession = []string{
	"uname -a", "uptime", "df -h {D}", "ls -la {D}", "cat {D}/current/VERSION",
	"git -C {D}/src log --oneline -3", "ps aux | grep -c '[a]pp'", "systemctl status app --no-pager",
	"journalctl -u app -n 50 --no-pager", "tail -n 100 {D}/logs/app.log", "grep -c ERROR {D}/logs/app.log",
	"test -f {D}/.migrate.lock && echo locked", "mkdir -p {D}/releases/v2", "cp -r {D}/src/. {D}/releases/v2/",
	"tar -czf {D}/backup-v1.tgz -C {D} releases/v1", "sha256sum {D}/backup-v1.tgz", "ls {D}/releases/v2",
	"cat {D}/releases/v2/config.yml", "sed -i 's/debug: true/debug: false/' {D}/releases/v2/config.yml",
	"grep -n debug {D}/releases/v2/config.yml", "rm -f {D}/.migrate.lock", "ln -sfn {D}/releases/v2 {D}/current",
	"readlink {D}/current", "echo v2 > {D}/current/VERSION", "sudo -n systemctl restart app", "systemctl is-active app",
	"curl -sf http://127.0.0.1:9/health", "find {D}/releases -maxdepth 1 -type d -name 'v0*' -mtime +30 -exec rm -rf {} +",
	"find {D}/logs -name '*.gz' -mtime +7 -delete", ": > {D}/logs/app.log", "chmod 640 {D}/releases/v2/config.yml",
	"kill -HUP $(cat {D}/app.pid)", "du -sh {D}/releases", "wc -l {D}/logs/app.log", "date -u", "whoami", "id",
	"env | grep -c APP_", "stat {D}/current", "head -5 {D}/releases/v2/config.yml",
	"diff {D}/releases/v1/config.yml {D}/releases/v2/config.yml", "touch {D}/releases/v2/.deployed",
	"mv {D}/backup-v1.tgz {D}/backups/", "rm -rf {D}/releases/v1", "sudo -n -u app {D}/current/bin/migrate --check",
	`python3 -c 'import json; print(json.load(open("{D}/releases/v2/meta.json"))["version"])'`,
	"crontab -l", "ls -la {D}/current/", "tar -tzf {D}/backups/backup-v1.tgz | head", "systemctl status app --no-pager",
}

// sessionResult is what one approval set-up made of the session.
type sessionResult struct {
	name string
	// asked counts the requests that reached a reviewer.
	asked int
	// unseen lists the destructive or privileged commands that ran with
	// no reviewer having seen them.
	unseen []string
}

// TestDeploySessionComparison runs the deploy session through the gateway
// against a real sshd, with a reviewer who approves everything, three
// ways: every call reviewed, one run approval, and one run approval with
// destructive and privileged commands escalated. It checks what
// docs/approvals.md reports: how many requests reach a reviewer, and that
// with escalation no destructive command runs unseen. `go test -run
// TestDeploySessionComparison -v ./gateway/` prints the table.
func TestDeploySessionComparison(t *testing.T) {
	t.Parallel()
	if len(deploySession) != 50 {
		t.Fatalf("the session has %d commands, want 50", len(deploySession))
	}
	s := sharedSSHD(t)
	risky := 0
	for _, c := range deploySession {
		if classify.Classify(c).Class >= classify.Destructive {
			risky++
		}
	}
	escalate := func(c *config.Config) {
		c.Targets["box-run"].Accounts[s.User].Escalate = []classify.Class{classify.Destructive}
	}
	var results []sessionResult
	for _, mode := range []struct {
		name, target string
		mutate       func(*config.Config)
		wantAsked    int
		wantUnseen   int
	}{
		{"call: every action reviewed", "box-call", nil, len(deploySession), 0},
		{"run: one approval for the run", "box-run", nil, 1, risky},
		{"run + escalate destructive and above", "box-run", escalate, 1 + risky, 0},
	} {
		r := runSession(t, s, mode.name, mode.target, mode.mutate)
		if r.asked != mode.wantAsked || len(r.unseen) != mode.wantUnseen {
			t.Errorf("%s: %d asked, %d unseen (%q); want %d and %d", mode.name, r.asked, len(r.unseen), r.unseen, mode.wantAsked, mode.wantUnseen)
		}
		results = append(results, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d commands, %d of them destructive or privileged\n", len(deploySession), risky)
	fmt.Fprintf(&b, "| approvals | requests a reviewer decided | destructive or privileged commands run unseen |\n| --- | --- | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", r.name, r.asked, len(r.unseen))
	}
	t.Log("\n" + b.String())
}

// runSession runs the deploy session on target of a gateway of its own,
// approving every request as it comes.
func runSession(t *testing.T, s *sshtest.SSHD, name, target string, mutate func(*config.Config)) sessionResult {
	t.Helper()
	dir := sessionDir(t)
	g := startGateway(t, s, gwOptions{mutate: mutate})
	defer g.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	res := sessionResult{name: name}
	reviewer := make(chan struct{})
	go func() {
		defer close(reviewer)
		for ctx.Err() == nil {
			pending, err := g.reviewer.Approvals(ctx, "pending")
			if err != nil {
				continue
			}
			for _, a := range pending {
				if _, err := g.reviewer.Decide(ctx, a.ID, api.DecisionRequest{Decision: "approve", Digest: a.Digest}); err == nil {
					mu.Lock()
					res.asked++
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	for _, cmd := range deploySession {
		cmd = strings.ReplaceAll(cmd, "{D}", dir)
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: target, Command: cmd, TimeoutS: 60}, api.Events{})
		if err != nil {
			t.Fatalf("%s: %q: %v", name, cmd, err)
		}
		if a.StartedAt == nil {
			t.Fatalf("%s: %q did not run: %s %s", name, cmd, a.Outcome, a.Detail)
		}
		cl, _ := classify.ParseClass(a.Class)
		if cl >= classify.Destructive && a.Approval.Mode != api.ModeCall {
			res.unseen = append(res.unseen, cmd)
		}
	}
	cancel()
	<-reviewer
	g.verifyAudit()
	return res
}

// sessionDir makes the deploy's directory, which the sshd's login user
// may write, with the files the session reads.
func sessionDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(sshtest.SafeDir(t), "app")
	for name, body := range map[string]string{
		"src/config.yml":            "debug: true\nport: 8080\n",
		"src/meta.json":             `{"version": "v2"}` + "\n",
		"releases/v1/config.yml":    "debug: true\nport: 8000\n",
		"logs/app.log":              "started\nERROR x\n",
		"current/VERSION":           "v1\n",
		"backups/.keep":             "",
		"releases/v0-old/.deployed": "",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	// The login user is another account: everything is its to change.
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.Chmod(p, 0o777)
		}
		return os.Chmod(p, 0o666)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
