package gateway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec"
)

// BenchmarkGatewayAction compares, side by side against the same sshd and
// account, one action running `true`:
//
//   - impl=airlock-ssh: the airlock-ssh binary through the gateway (an
//     approved run): process start, socket, run resolution, three durable
//     audit entries, output store, one fresh SSH connection;
//   - impl=gateway: the same request from this process (no process start);
//   - impl=sshexec: bare sshexec.Run with the same key and host key;
//   - impl=openssh: ssh -o ControlMaster=no -o ControlPath=none.
//
// conc=16 runs 16 at a time (sec/op is then wall time per action).
func BenchmarkGatewayAction(b *testing.B) {
	s := sharedSSHD(b)
	// Room for all 16 at once: the comparison is of paths, not of the
	// default max_parallel (4), which would queue the rest.
	g := startGateway(b, s, gwOptions{mutate: func(c *config.Config) { c.Targets["box-run"].MaxParallel = 32 }})
	ctx := context.Background()
	sshBin := gatewaytest.Binary(b, "airlock-ssh")

	// Approve the runs once: this process's and airlock-ssh's (whose
	// anchor is this process).
	first := g.runAsync(api.ActionRequest{Target: "box-run", Command: "true"})
	g.decideNext("run", "approve", "")
	if r := <-first; r.err != nil || !r.a.Success() {
		b.Fatalf("first action: %+v %v", r.a, r.err)
	}
	viaSSH := func() error {
		cmd := exec.Command(sshBin, "box-run", "true")
		cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+g.cfg.Listen.Socket)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("airlock-ssh: %v: %s", err, out)
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- viaSSH() }()
	select {
	case err := <-done:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(500 * time.Millisecond):
		g.decideNext("run", "approve", "")
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}

	cfg := &sshexec.Config{Addr: s.Addr, User: s.User, Signers: []ssh.Signer{s.ClientSigner},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}}, Timeout: 30 * time.Second}
	kh := filepath.Join(b.TempDir(), "known_hosts")
	os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600)
	host, port, _ := strings.Cut(s.Addr, ":")
	runners := []struct {
		name string
		run  func() error
	}{
		{"airlock-ssh", viaSSH},
		{"gateway", func() error {
			a, err := g.agent.RunAction(ctx, api.ActionRequest{Target: "box-run", Command: "true"}, api.Events{})
			if err == nil && !a.Success() {
				err = fmt.Errorf("%s: %s", a.Outcome, a.Detail)
			}
			return err
		}},
		{"sshexec", func() error {
			r, err := sshexec.Run(ctx, cfg, "true")
			if err == nil && !r.Success() {
				err = fmt.Errorf("%v", r.Outcome)
			}
			return err
		}},
		{"openssh", func() error {
			out, err := exec.Command("ssh", "-F", "/dev/null", "-i", s.ClientKeyFile, "-p", port,
				"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes",
				"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+kh, "-o", "IdentitiesOnly=yes",
				"-o", "LogLevel=ERROR", s.User+"@"+host, "true").CombinedOutput()
			if err != nil {
				return fmt.Errorf("ssh: %v: %s", err, out)
			}
			return nil
		}},
	}
	for _, r := range runners {
		b.Run("impl="+r.name+"/conc=1", func(b *testing.B) {
			for b.Loop() {
				if err := r.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl="+r.name+"/conc=16", func(b *testing.B) {
			b.SetParallelism(max(1, 16/testingProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := r.run(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func testingProcs() int { return max(1, runtimeGOMAXPROCS()) }
