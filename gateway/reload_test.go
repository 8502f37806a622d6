package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// A host key rotation, as an operator lives it against a real sshd: the
// target's new key fails the pin; hosts pin --replace pins it alone; the
// running gateway uses it once it reloads (not before), records the
// configuration it put in force, and trusts the old key no more. A file
// with problems, or a change that needs a restart, changes nothing; an
// action in flight finishes under the configuration it started with.
func TestReloadAfterAHostKeyRotation(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{})
	g := startGateway(t, s, gwOptions{})
	ctx := context.Background()
	run := func(target, cmd string) *api.Action {
		t.Helper()
		a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: target, Command: cmd}, api.Events{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	res := g.runAsync(api.ActionRequest{Target: "box-run", Command: "echo before"})
	g.decideNext("run", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("before the rotation: %+v %v", r.a, r.err)
	}
	// An action in flight on a target the new file drops.
	// It waits for a file the test makes after the reload: in flight
	// across it however slow the machine.
	// (The target's account is another user: the file is where it can
	// look.)
	gateDir, err := os.MkdirTemp("", "airlock-gate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(gateDir) })
	if err := os.Chmod(gateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(gateDir, "reloaded")
	inflightID, err := g.agent.StartAction(ctx, api.ActionRequest{Target: "box-tail",
		Command: "while [ ! -e " + gate + " ]; do sleep 0.05; done; echo finished"})
	if err != nil {
		t.Fatal(err)
	}
	g.waitRunning(inflightID)
	src, err := os.ReadFile(g.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	dropped := dropTarget(t, string(src), "box-tail")
	if err := os.WriteFile(g.cfg.Path, []byte(dropped), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := g.agent.WaitAction(ctx, inflightID, api.Events{}); err != nil || !a.Success() || a.Stdout != "finished\n" {
		t.Errorf("the action in flight during the reload: %+v %v", a, err)
	}
	oldKey := s.CurrentHostKey()
	if err := s.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	if a := run("box-run", "echo rotated"); a.Outcome != sshexec.HostKeyMismatch {
		t.Fatalf("after the rotation, before a new pin: %s %s", a.Outcome, a.Detail)
	}
	pin, err := deploy.Pin(ctx, deploy.PinOptions{ConfigFile: g.cfg.Path, Target: "box-run", Fingerprint: ssh.FingerprintSHA256(s.CurrentHostKey()), Replace: true})
	if err != nil || pin.Change != deploy.Replaced {
		t.Fatalf("hosts pin --replace: %+v %v", pin, err)
	}
	if a := run("box-run", "echo pinned"); a.Outcome != sshexec.HostKeyMismatch {
		t.Errorf("the pin took effect before a reload: %s", a.Outcome)
	}

	if err := g.srv.Reload(ctx); err != nil {
		t.Fatalf("reload after the new pin: %v", err)
	}
	if a := run("box-run", "echo after"); !a.Success() || a.Stdout != "after\n" {
		t.Errorf("after the reload: %s %s", a.Outcome, a.Detail)
	}
	if a := run("box-tail", "echo gone"); a.Outcome != sshexec.Rejected || !strings.Contains(a.Detail, "unknown target") {
		t.Errorf("a target the reloaded file dropped: %s %s", a.Outcome, a.Detail)
	}
	for _, k := range g.srv.eng.Config().Targets["box-run"].HostKeys {
		if string(k.Marshal()) == string(oldKey.Marshal()) {
			t.Error("the old host key is still trusted")
		}
	}

	// Problems and restart-only changes leave the configuration in force.
	cur, err := os.ReadFile(g.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	good := string(cur)
	if err := os.WriteFile(g.cfg.Path, []byte(good+"\ntarget \"broken\" {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(ctx); err == nil {
		t.Error("a file with a syntax error was reloaded")
	}
	if err := os.WriteFile(g.cfg.Path, []byte(strings.Replace(good, `timeout = "20s"`, `timeout = "30s"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Reload(ctx); !errors.Is(err, engine.ErrNeedsRestart) || !strings.Contains(err.Error(), "approval") {
		t.Errorf("a change of the approval block: %v, want it named as needing a restart", err)
	}
	if a := run("box-run", "echo still"); !a.Success() {
		t.Errorf("after refused reloads: %s %s", a.Outcome, a.Detail)
	}
	loaded := g.auditEntries("config.loaded", "")
	if len(loaded) != 3 || loaded[0].Fields["sha256"] == loaded[1].Fields["sha256"] || loaded[1].Fields["sha256"] == loaded[2].Fields["sha256"] {
		t.Errorf("config.loaded entries: %+v, want the start's and the two reloads'", loaded)
	}
}

// dropTarget removes target name's block from a configuration that
// gatewaytest wrote (blocks end with a line "}").
func dropTarget(t *testing.T, src, name string) string {
	t.Helper()
	start := strings.Index(src, "target \""+name+"\" {")
	if start < 0 {
		t.Fatalf("no target %q in:\n%s", name, src)
	}
	end := strings.Index(src[start:], "\n}\n")
	return src[:start] + src[start+end+3:]
}

// waitRunning waits until the agent sees action id running, and fails at
// once when it finished instead.
func (g *testGateway) waitRunning(id string) {
	g.t.Helper()
	testkit.EventuallyErr(g.t, func() error {
		a, err := g.agent.Action(context.Background(), id)
		switch {
		case err != nil:
			return testkit.Stop(err)
		case a.State == api.StateFinished:
			return testkit.Stop(fmt.Errorf("finished: %+v", a))
		case a.State != api.StateRunning:
			return fmt.Errorf("state %s", a.State)
		}
		return nil
	}, "action %s to run", id)
}
