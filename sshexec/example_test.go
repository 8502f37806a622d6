package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
)

// Run one command on a target whose host key is pinned, and act on the
// outcome.
func ExampleRun() {
	pemBytes, err := os.ReadFile("/etc/airlock/keys/deploy_ed25519")
	if err != nil {
		log.Fatal(err)
	}
	signer, err := sshexec.ParsePrivateKey(pemBytes, nil)
	if err != nil {
		log.Fatal(err)
	}
	hostKey, err := sshexec.ParseHostKey("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBmR3VFb3Vl2Jz2lrEj1Ie9xNPbzE8xfvQ1Z/4KfxOZs build-box")
	if err != nil {
		log.Fatal(err)
	}
	cfg := &sshexec.Config{
		Addr:     "10.0.0.24:22",
		User:     "deploy",
		Signers:  []ssh.Signer{signer},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{hostKey}},
		Timeout:  30 * time.Second,
	}

	res, err := sshexec.Run(context.Background(), cfg, "uptime")
	if errors.Is(err, sshexec.ErrInvalidConfig) {
		log.Fatal(err) // nothing was dialed
	}
	switch res.Outcome {
	case sshexec.Exited:
		fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	case sshexec.HostKeyMismatch:
		// An operator must confirm the new key out of band; never retry.
		fmt.Println("host key changed:", res.HostKeyFingerprint)
	case sshexec.TimedOut:
		fmt.Println("timed out; termination", res.Termination)
	default:
		fmt.Println(res.Outcome, res.Detail)
	}
}

// A known_hosts file can be used instead of, or with, pinned keys.
func ExampleHostKeys() {
	_ = sshexec.HostKeys{KnownHostsFiles: []string{"/etc/airlock/known_hosts"}}
}
