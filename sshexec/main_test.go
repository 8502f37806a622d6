package sshexec_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// shared is one real sshd for every test of the package that does not
// change the server; tests that do start their own.
var (
	shared    *sshtest.SSHD
	sharedErr error
)

// testingProcs is GOMAXPROCS, for benchmarks that want a given number of
// goroutines from RunParallel.
var testingProcs = runtime.GOMAXPROCS(0)

func TestMain(m *testing.M) {
	if os.Getenv("AIRLOCK_RSS_CHILD") == "1" {
		os.Exit(rssChild())
	}
	if _, err := os.Stat(sshtest.SSHDPath); err == nil {
		shared, sharedErr = sshtest.StartSSHD(sshtest.Options{ExtraHostKeys: []string{"rsa", "ecdsa"}})
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func sharedSSHD(t *testing.T) *sshtest.SSHD {
	t.Helper()
	sshtest.Need(t)
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	shared.LogOnFailure(t)
	return shared
}

// configFor returns a Config that trusts s's ed25519 host key and logs in
// with its client key.
func configFor(s *sshtest.SSHD) *sshexec.Config {
	return &sshexec.Config{
		Addr:     s.Addr,
		User:     s.User,
		Signers:  []ssh.Signer{s.ClientSigner},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.CurrentHostKey()}},
		Timeout:  30 * time.Second,
	}
}

// faultConfig returns a Config for a FaultServer.
func faultConfig(f *sshtest.FaultServer) *sshexec.Config {
	return &sshexec.Config{
		Addr:      f.Addr,
		User:      "agent",
		Signers:   []ssh.Signer{f.ClientSigner},
		HostKeys:  sshexec.HostKeys{Pinned: []ssh.PublicKey{f.HostKey}},
		Timeout:   30 * time.Second,
		KillGrace: 500 * time.Millisecond,
	}
}
