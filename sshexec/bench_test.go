package sshexec_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// BenchmarkAction compares, side by side against the same sshd and test
// account, one action running `true` through sshexec.Run, through bare
// x/crypto/ssh (Dial, Session.Run, Close), and through the OpenSSH client
// with multiplexing off. Each iteration is one fresh connection. See
// docs/benchmarks.md for how to read and compare the results.
func BenchmarkAction(b *testing.B) {
	s := benchSSHD(b)
	cfg := configFor(s)

	runners := []struct {
		name string
		run  func() error
	}{
		{"sshexec", func() error {
			res, err := sshexec.Run(context.Background(), cfg, "true")
			if err == nil && !res.Success() {
				err = fmt.Errorf("%v %s", res.Outcome, res.Detail)
			}
			return err
		}},
		{"xcrypto", func() error { return bareXCrypto(s) }},
		{"openssh", openSSHClient(b, s)},
	}
	for _, r := range runners {
		b.Run("impl="+r.name+"/conc=1", func(b *testing.B) {
			for b.Loop() {
				if err := r.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl="+r.name+"/conc=8", func(b *testing.B) {
			b.SetParallelism(max(1, 8/benchProcs()))
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

func benchProcs() int { return max(1, testingProcs) }

// bareXCrypto is the least any Go SSH client can do per action: dial,
// handshake with a pinned host key, one session, Run, close.
func bareXCrypto(s *sshtest.SSHD) error {
	c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{
		User:              s.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(s.ClientSigner)},
		HostKeyCallback:   ssh.FixedHostKey(s.HostKey),
		HostKeyAlgorithms: []string{s.HostKey.Type()},
		Timeout:           30 * time.Second,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return err
	}
	defer sess.Close()
	return sess.Run("true")
}

// openSSHClient returns a runner for the OpenSSH client with connection
// sharing off and strict host key checking on.
func openSSHClient(b *testing.B, s *sshtest.SSHD) func() error {
	dir := b.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(s.Addr, ":")
	args := []string{"-F", "/dev/null", "-i", s.ClientKeyFile, "-p", port,
		"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + kh,
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
		s.User + "@" + host, "true"}
	return func() error {
		out, err := exec.Command("ssh", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ssh: %v: %s", err, out)
		}
		return nil
	}
}

func benchSSHD(b *testing.B) *sshtest.SSHD {
	b.Helper()
	sshtest.Need(b)
	if sharedErr != nil {
		b.Fatal(sharedErr)
	}
	return shared
}

// BenchmarkPeakRSS runs, in a child process, 8 parallel actions that each
// print 8 MiB (all of it kept: the default OutputLimit), and reports the
// child's peak resident set size: with the Go runtime's defaults, and with
// a soft memory limit (GOMEMLIMIT) as a deployment would set one.
func BenchmarkPeakRSS(b *testing.B) {
	s := benchSSHD(b)
	for _, env := range []struct{ name, value string }{
		{"default", ""},
		{"gomemlimit-90MiB", "GOMEMLIMIT=90MiB"},
	} {
		b.Run("env="+env.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
				cmd.Env = append(os.Environ(),
					"AIRLOCK_RSS_CHILD=1",
					"AIRLOCK_RSS_ADDR="+s.Addr,
					"AIRLOCK_RSS_USER="+s.User,
					"AIRLOCK_RSS_KEY="+s.ClientKeyFile,
					"AIRLOCK_RSS_HOSTKEY="+string(ssh.MarshalAuthorizedKey(s.HostKey)))
				if env.value != "" {
					cmd.Env = append(cmd.Env, env.value)
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v: %s", err, out)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
			}
		})
	}
}

// rssChild is the child of BenchmarkPeakRSS.
func rssChild() int {
	pemBytes, err := os.ReadFile(os.Getenv("AIRLOCK_RSS_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	signer, err := sshexec.ParsePrivateKey(pemBytes, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hk, err := sshexec.ParseHostKey(os.Getenv("AIRLOCK_RSS_HOSTKEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := &sshexec.Config{
		Addr: os.Getenv("AIRLOCK_RSS_ADDR"), User: os.Getenv("AIRLOCK_RSS_USER"),
		Signers: []ssh.Signer{signer}, HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{hk}},
		Timeout: time.Minute,
	}
	var wg sync.WaitGroup
	failed := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			res, err := sshexec.Run(context.Background(), cfg, "head -c 8388608 /dev/zero")
			if err == nil && (!res.Success() || res.StdoutBytes != 8<<20) {
				err = fmt.Errorf("%v: %d bytes", res.Outcome, res.StdoutBytes)
			}
			if err != nil {
				failed <- err
			}
		})
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
