package demo

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func TestTargetBehavesLikeSSHD(t *testing.T) {
	client := sshtest.NewKey()
	tgt, err := Start(t.TempDir(), client.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	cfg := func() *sshexec.Config {
		return &sshexec.Config{Addr: tgt.Addr, User: "agent", Signers: []ssh.Signer{client},
			HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{tgt.HostKey()}}, Timeout: 10 * time.Second, KillGrace: 2 * time.Second}
	}
	tests := []struct {
		name, command string
		timeout       time.Duration
		outcome       sshexec.Outcome
		code          int
		signal        string
		stdout        string
	}{
		{"exit 0 with output", "echo hi; echo err >&2", 0, sshexec.Exited, 0, "", "hi\n"},
		{"exit code", "exit 42", 0, sshexec.Exited, 42, "", ""},
		{"runs in the scratch directory", "pwd", 0, sshexec.Exited, 0, "", tgt.Dir + "\n"},
		{"killed by a signal", "kill -TERM $$", 0, sshexec.Signaled, 0, "TERM", ""},
		{"timeout: KILL confirmed", "sleep 30", time.Second, sshexec.TimedOut, 0, "KILL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg()
			if tt.timeout > 0 {
				c.Timeout = tt.timeout
			}
			res, _ := sshexec.Run(context.Background(), c, tt.command)
			if res.Outcome != tt.outcome || res.ExitCode != tt.code || res.Signal != tt.signal || string(res.Stdout) != tt.stdout {
				t.Fatalf("got %v code %d signal %q stdout %q (%s)", res.Outcome, res.ExitCode, res.Signal, res.Stdout, res.Detail)
			}
			if tt.outcome == sshexec.TimedOut && res.Termination != sshexec.Confirmed {
				t.Errorf("termination %v, want confirmed", res.Termination)
			}
		})
	}
	// A rotated host key is refused.
	old := cfg()
	if err := tgt.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	if res, _ := sshexec.Run(context.Background(), old, "true"); res.Outcome != sshexec.HostKeyMismatch {
		t.Errorf("after rotation: %v, want host_key_mismatch", res.Outcome)
	}
	// Another client key is refused.
	other := cfg()
	other.Signers = []ssh.Signer{sshtest.NewKey()}
	if res, _ := sshexec.Run(context.Background(), other, "true"); res.Outcome != sshexec.AuthFailed {
		t.Errorf("unknown client key: %v, want auth_failed", res.Outcome)
	}
}
