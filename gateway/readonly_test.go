package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/classify"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// readOnlyPolicy is the airlock-action policy of
// TestEnforceReadOnlyStopsAMisjudgedWrite: touch writes, cat reads.
const readOnlyPolicy = `
verb "touch" {
  argv = ["/usr/bin/touch", "--", "{file}"]
  param "file" { path_under = "DIR/data" }
}
verb "cat" {
  argv = ["/bin/cat", "--", "{file}"]
  param "file" { path_under = "DIR/data" }
}
`

// TestEnforceReadOnlyStopsAMisjudgedWrite: the classifier is made to
// rate touch read_only, so an account that lets read_only pass
// unreviewed runs it with no one asked. With enforce_read_only the
// gateway sends it marked read-only, and the target (a real sshd forcing
// a real airlock-action, as an account that is not root) runs it with
// every mount read-only: it fails with EROFS, writes nothing, and the
// outcome says it ran read-only-enforced; a command that only reads
// works. Without enforce_read_only the same request goes unmarked and
// writes. A mark the agent writes itself names no verb and is rejected.
//
// Not parallel: the misjudgement holds for the whole test binary while
// it lasts, and parallel tests run touch.
func TestEnforceReadOnlyStopsAMisjudgedWrite(t *testing.T) {
	s := sharedSSHD(t)
	keyFile, polFile, dir := airlockActionAccount(t, s, readOnlyPolicy)
	readable := filepath.Join(dir, "data", "readable")
	if err := os.WriteFile(readable, []byte("read me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{clientKey: keyFile, mutate: func(c *config.Config) {
		p, err := policy.Load(polFile)
		if err != nil {
			t.Fatal(err)
		}
		for target, enforce := range map[string]bool{"box-call": true, "box-run": false} {
			a := c.Targets[target].Accounts[s.User]
			a.ActionPolicy, a.ActionPolicyFile = p, polFile
			a.AllowUnreviewed = []classify.Class{classify.ReadOnly}
			a.EnforceReadOnly = enforce
		}
	}})
	undo := classify.MisjudgeForTest("touch")
	defer undo()
	ctx := context.Background()
	const note = "ran read-only-enforced"

	enforced := filepath.Join(dir, "data", "enforced")
	a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "touch " + enforced}, api.Events{})
	if err != nil || a.Outcome != sshexec.Exited || a.ExitCode == nil || *a.ExitCode != 1 || a.Class != "read_only" || a.Approval.Mode != api.ModeUnreviewed {
		t.Fatalf("misjudged touch: %v %+v", err, a)
	}
	if !strings.Contains(a.Stderr, "Read-only file system") || !strings.Contains(a.Detail, note) {
		t.Errorf("misjudged touch: stderr %q, detail %q; want EROFS and %q", a.Stderr, a.Detail, note)
	}
	if _, err := os.Stat(enforced); !os.IsNotExist(err) {
		t.Errorf("the misjudged touch wrote %s: %v", enforced, err)
	}
	if fin := g.auditEntries("action.finished", a.ID); len(fin) != 1 || !strings.Contains(fin[0].Fields["detail"].(string), note) {
		t.Errorf("action.finished: %+v", fin)
	}

	a, err = g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: "cat " + readable}, api.Events{})
	if err != nil || !a.Success() || a.Stdout != "read me\n" || !strings.Contains(a.Detail, note) {
		t.Errorf("cat: %v %+v", err, a)
	}

	unenforced := filepath.Join(dir, "data", "unenforced")
	a, err = g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "touch " + unenforced}, api.Events{})
	if err != nil || !a.Success() || a.Detail != "exit status 0" {
		t.Errorf("touch without enforce_read_only: %v %+v", err, a)
	}
	if _, err := os.Stat(unenforced); err != nil {
		t.Errorf("touch without enforce_read_only did not write: %v", err)
	}

	forged := filepath.Join(dir, "data", "forged")
	a, err = g.agent.RunAction(ctx, api.ActionRequest{Target: "box-call", Command: policy.MarkReadOnly("touch " + forged)}, api.Events{})
	if err != nil || a.Outcome != sshexec.Rejected {
		t.Errorf("a mark in the command: %v %+v", err, a)
	} else if c := g.auditEntries("action.connecting", a.ID); len(c) != 0 {
		t.Error("a command carrying a mark was dialed")
	}
	g.verifyAudit()
}
