package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Tests against a real OpenSSH sshd.

func TestExitedAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	tests := []struct {
		name       string
		command    string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"success", "true", 0, "", ""},
		{"output on both streams", "echo out; echo err >&2", 0, "out\n", "err\n"},
		{"non-zero exit", "echo partial; exit 3", 3, "partial\n", ""},
		{"exit 255", "exit 255", 255, "", ""},
		{"command not found", "/nonexistent/airlock-cmd", 127, "", ""},
		// Stdin is empty and closed, as with ssh -n: a command that reads
		// it sees end of input at once instead of waiting for the deadline.
		{"read from stdin", "read x; echo rc=$?", 0, "rc=1\n", ""},
		{"cat of stdin", "cat; echo done", 0, "done\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := sshexec.Run(context.Background(), configFor(s), tt.command)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != sshexec.Exited || !res.HasExitCode || res.ExitCode != tt.wantCode {
				t.Fatalf("got outcome %v code %d (has %v), want exited %d; detail %q", res.Outcome, res.ExitCode, res.HasExitCode, tt.wantCode, res.Detail)
			}
			if got := string(res.Stdout); got != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tt.wantStdout)
			}
			if tt.wantStderr != "" && string(res.Stderr) != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tt.wantStderr)
			}
			if res.Success() != (tt.wantCode == 0) {
				t.Errorf("Success() = %v with code %d", res.Success(), tt.wantCode)
			}
			if want := ssh.FingerprintSHA256(s.HostKey); res.HostKeyFingerprint != want {
				t.Errorf("host key fingerprint = %q, want %q", res.HostKeyFingerprint, want)
			}
			if !strings.HasPrefix(res.ServerVersion, "SSH-2.0-OpenSSH") {
				t.Errorf("server version = %q", res.ServerVersion)
			}
			if res.Timings.Total <= 0 || res.Timings.Dial <= 0 || res.Timings.Handshake <= 0 || res.Timings.Command <= 0 {
				t.Errorf("timings not all set: %+v", res.Timings)
			}
		})
	}
}

func TestSignaledAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	res, err := sshexec.Run(context.Background(), configFor(s), "kill -TERM $$")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != sshexec.Signaled || res.Signal != "TERM" {
		t.Fatalf("got %v signal %q, want signaled TERM (%s)", res.Outcome, res.Signal, res.Detail)
	}
	if res.Success() {
		t.Error("a signaled command counts as success")
	}
}

func TestTimedOutKillsTheRemoteCommand(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	cfg := configFor(s)
	cfg.Timeout = 1500 * time.Millisecond
	// dash runs "exec sleep" in the process sshd started, so $$ is the
	// pid our KILL reaches.
	res, err := sshexec.Run(context.Background(), cfg, "echo $$; exec sleep 300")
	var e *sshexec.Error
	if !errors.As(err, &e) || e.Outcome != sshexec.TimedOut {
		t.Fatalf("err = %v, want an *Error with outcome timed_out", err)
	}
	if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Confirmed {
		t.Fatalf("got %v/%v, want timed_out/confirmed (%s)", res.Outcome, res.Termination, res.Detail)
	}
	if res.Signal != "KILL" {
		t.Errorf("signal = %q, want KILL", res.Signal)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("no pid in stdout %q", res.Stdout)
	}
	testkit.Eventually(t, func() bool { return !sshtest.ProcessAlive(pid) },
		"remote process %d still alive after confirmed termination", pid)
	if res.Timings.Total > cfg.Timeout+sshexec.DefaultKillGrace+time.Second {
		t.Errorf("Run took %v, more than timeout plus grace", res.Timings.Total)
	}
}

// OpenSSH delivers a "signal" request to the session's whole process
// group (killpg), not only to the process it started: a background job of
// the command dies with it. A process that left the group (setsid) is out
// of reach, and a "confirmed" termination says nothing about it — as
// docs/threat-model.md says.
func TestKillReachesTheSessionsProcessGroup(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	// The remote account writes the pids where the test reads them.
	dir, err := os.MkdirTemp("", "airlock-pgroup-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	file := filepath.Join(dir, "pids")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *sshexec.Result, 1)
	cfg := configFor(s)
	cfg.KillGrace = testkit.Patience // how fast sshd reports the end is not what this tests
	go func() {
		res, _ := sshexec.Run(ctx, cfg, "sleep 300 & echo $! >> "+file+"; setsid sleep 301 & echo $! >> "+file+"; wait")
		done <- res
	}()
	var pids []int
	testkit.EventuallyErr(t, func() error {
		b, _ := os.ReadFile(file)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) < 2 {
			return fmt.Errorf("started %v", pids)
		}
		return nil
	}, "the command never started its two processes")
	inGroup, escaped := pids[0], pids[1]
	defer syscall.Kill(escaped, syscall.SIGKILL)
	// $! is known before setsid(2) runs in the child: wait until the
	// process really left the group (it leads its own) before the KILL.
	testkit.EventuallyErr(t, func() error {
		p, err := proctree.Read(escaped)
		if err != nil {
			return err
		}
		if p.PGID != escaped || p.Comm != "sleep" {
			return fmt.Errorf("process %v is in group %d", p, p.PGID)
		}
		return nil
	}, "the setsid process never left the session's group")
	cancel()
	if res := <-done; res == nil || res.Outcome != sshexec.Cancelled || res.Termination != sshexec.Confirmed {
		t.Fatalf("got %+v, want cancelled/confirmed", res)
	}
	testkit.Eventually(t, func() bool { return !sshtest.ProcessAlive(inGroup) },
		"background job %d in the session's group outlived the KILL", inGroup)
	if !sshtest.ProcessAlive(escaped) {
		t.Errorf("process %d that left the group was killed too: update docs/threat-model.md", escaped)
	}
}

func TestHostKeysAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	other := sshtest.NewKey().PublicKey()
	dir := t.TempDir()
	knownHosts := func(name string, lines ...string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	_, port, _ := strings.Cut(s.Addr, ":")
	hostKeyLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey)))
	hashed := knownhosts.HashHostname(knownhosts.Normalize(s.Addr))

	tests := []struct {
		name string
		keys sshexec.HostKeys
		want sshexec.Outcome
	}{
		{"pinned ed25519", sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}}, sshexec.Exited},
		{"pinned rsa only: negotiation must pick rsa", sshexec.HostKeys{Pinned: []ssh.PublicKey{s.ExtraHostKeys["rsa"]}}, sshexec.Exited},
		{"pinned ecdsa only", sshexec.HostKeys{Pinned: []ssh.PublicKey{s.ExtraHostKeys["ecdsa"]}}, sshexec.Exited},
		{"pinned other key", sshexec.HostKeys{Pinned: []ssh.PublicKey{other}}, sshexec.HostKeyMismatch},
		{"known_hosts [host]:port", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("bracket", s.KnownHostsLine())}}, sshexec.Exited},
		{"known_hosts hashed", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("hashed", hashed+" "+hostKeyLine)}}, sshexec.Exited},
		{"known_hosts rsa entry only", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("rsa", sshtest.KnownHostsLine(s.Addr, s.ExtraHostKeys["rsa"]))}}, sshexec.Exited},
		{"known_hosts entry for another port", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("port", "[127.0.0.1]:1 "+hostKeyLine)}}, sshexec.HostKeyUnknown},
		{"known_hosts plain host without port", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("noport", "127.0.0.1 "+hostKeyLine)}}, sshexec.HostKeyUnknown},
		{"known_hosts other key for this host", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("other", sshtest.KnownHostsLine(s.Addr, other))}}, sshexec.HostKeyMismatch},
		{"known_hosts only other hosts", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("elsewhere", "build.example.com "+hostKeyLine)}}, sshexec.HostKeyUnknown},
		{"revoked beats pinned", sshexec.HostKeys{Pinned: []ssh.PublicKey{s.HostKey}, KnownHostsFiles: []string{knownHosts("revoked", "@revoked * "+hostKeyLine)}}, sshexec.HostKeyRevoked},
		{"revoked beats known_hosts", sshexec.HostKeys{KnownHostsFiles: []string{knownHosts("revoked2", s.KnownHostsLine(), "@revoked * "+hostKeyLine)}}, sshexec.HostKeyRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A fresh client key per case: the sshd log then shows
			// whether this case ever authenticated.
			signer := sshtest.NewKey()
			if err := s.Authorize(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
				t.Fatal(err)
			}
			cfg := configFor(s)
			cfg.Signers = []ssh.Signer{signer}
			cfg.HostKeys = tt.keys
			res, err := sshexec.Run(context.Background(), cfg, "true")
			if res == nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != tt.want {
				t.Fatalf("outcome = %v, want %v (%s)", res.Outcome, tt.want, res.Detail)
			}
			if tt.want == sshexec.Exited {
				return
			}
			var hke *sshexec.HostKeyError
			if !errors.As(err, &hke) || hke.Outcome != tt.want {
				t.Fatalf("err = %v, want a *HostKeyError with outcome %v", err, tt.want)
			}
			if res.HostKeyFingerprint == "" || res.Termination != sshexec.NotStarted {
				t.Errorf("fingerprint %q termination %v: want a fingerprint and not_started", res.HostKeyFingerprint, res.Termination)
			}
			fp := ssh.FingerprintSHA256(signer.PublicKey())
			time.Sleep(50 * time.Millisecond)
			if strings.Contains(s.Log(), fp) {
				t.Errorf("the client authenticated (its key %s is in sshd's log) although the host key was refused", fp)
			}
		})
	}
	_ = port
}

func TestAuthFailedAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	cfg := configFor(s)
	cfg.Signers = []ssh.Signer{sshtest.NewKey()} // not in authorized_keys
	res, err := sshexec.Run(context.Background(), cfg, "true")
	var e *sshexec.Error
	if !errors.As(err, &e) || e.Outcome != sshexec.AuthFailed {
		t.Fatalf("err = %v, want outcome auth_failed", err)
	}
	if res.Outcome != sshexec.AuthFailed || res.HostKeyFingerprint == "" {
		t.Fatalf("got %v with fingerprint %q", res.Outcome, res.HostKeyFingerprint)
	}
}

func TestDialFailed(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	cfg := configFor(s)
	cfg.Addr = "127.0.0.1:1" // nothing listens on port 1
	res, err := sshexec.Run(context.Background(), cfg, "true")
	var e *sshexec.Error
	if !errors.As(err, &e) || e.Outcome != sshexec.DialFailed {
		t.Fatalf("err = %v, want dial_failed", err)
	}
	if res.Outcome != sshexec.DialFailed || res.Termination != sshexec.NotStarted {
		t.Fatalf("got %v/%v", res.Outcome, res.Termination)
	}
}

func TestKeyTypesAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := t.TempDir()
	tests := []struct {
		name, typ, passphrase string
	}{
		{"ed25519", "ed25519", ""},
		{"ecdsa", "ecdsa", ""},
		// sshd 8.8+ refuses ssh-rsa (SHA-1) signatures by default, so a
		// success proves an rsa-sha2 signature.
		{"rsa", "rsa", ""},
		{"encrypted ed25519", "ed25519", testkit.Password},
		{"encrypted rsa", "rsa", "another passphrase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			pub, err := sshtest.GenerateKeyFile(file, tt.typ, tt.passphrase)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Authorize(string(ssh.MarshalAuthorizedKey(pub))); err != nil {
				t.Fatal(err)
			}
			pemBytes, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if tt.passphrase != "" {
				_, err := sshexec.ParsePrivateKey(pemBytes, nil)
				var missing *ssh.PassphraseMissingError
				if !errors.As(err, &missing) {
					t.Fatalf("ParsePrivateKey without passphrase: err = %v, want *ssh.PassphraseMissingError", err)
				}
				if _, err := sshexec.ParsePrivateKey(pemBytes, []byte("wrong")); err == nil {
					t.Fatal("ParsePrivateKey accepted a wrong passphrase")
				}
			}
			signer, err := sshexec.ParsePrivateKey(pemBytes, []byte(tt.passphrase))
			if err != nil {
				t.Fatal(err)
			}
			cfg := configFor(s)
			cfg.Signers = []ssh.Signer{signer}
			res, err := sshexec.Run(context.Background(), cfg, "true")
			if err != nil || !res.Success() {
				t.Fatalf("Run: %v (%+v)", err, res)
			}
			if !s.WaitLog("ssh2: "+strings.ToUpper(tt.typ)+" "+ssh.FingerprintSHA256(pub), testkit.Patience) {
				t.Errorf("sshd did not log an accepted %s key %s", tt.typ, ssh.FingerprintSHA256(pub))
			}
		})
	}
}

// TestOneConnectionPerAction proves there is no reuse: N actions make N
// authenticated connections in sshd's log.
func TestOneConnectionPerAction(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	signer := sshtest.NewKey()
	if err := s.Authorize(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
		t.Fatal(err)
	}
	cfg := configFor(s)
	cfg.Signers = []ssh.Signer{signer}
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := sshexec.Run(context.Background(), cfg, fmt.Sprintf("echo %d", i))
			if err != nil || !res.Success() {
				t.Errorf("action %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	needle := "ssh2: ED25519 " + ssh.FingerprintSHA256(signer.PublicKey())
	testkit.Poll(testkit.Patience, func() bool { return strings.Count(s.Log(), needle) >= n })
	if got := strings.Count(s.Log(), needle); got != n {
		t.Fatalf("sshd accepted %d connections for %d actions, want exactly %d", got, n, n)
	}
}

// Tests that change the server get their own sshd.

func TestHostKeyRotatedOnTarget(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfg := configFor(s) // pins the key the target has now
	if res, err := sshexec.Run(context.Background(), cfg, "true"); err != nil || !res.Success() {
		t.Fatalf("before rotation: %v", err)
	}
	before := s.Accepted()
	if err := s.RotateHostKey(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	res, err := sshexec.Run(context.Background(), cfg, "touch "+marker)
	var hke *sshexec.HostKeyError
	if !errors.As(err, &hke) || res.Outcome != sshexec.HostKeyMismatch {
		t.Fatalf("after rotation: outcome %v err %v, want host_key_mismatch", res.Outcome, err)
	}
	if hke.Fingerprint != ssh.FingerprintSHA256(s.CurrentHostKey()) || len(hke.Known) != 1 {
		t.Errorf("HostKeyError = %+v, want the new key offered and the old one known", hke)
	}
	time.Sleep(100 * time.Millisecond)
	if got := s.Accepted(); got != before {
		t.Errorf("sshd accepted %d logins after the rotation, want 0", got-before)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran despite the host key mismatch")
	}
}

func TestConnectionLostAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{})
	cfg := configFor(s)
	started := make(chan struct{})
	var once sync.Once
	cfg.Output = func(st sshexec.Stream, p []byte) {
		if st == sshexec.Stdout && strings.Contains(string(p), "started") {
			once.Do(func() { close(started) })
		}
	}
	go func() {
		select {
		case <-started:
		case <-time.After(testkit.Patience):
			return
		}
		// Kill the connection's sshd processes: the transport breaks
		// with no exit status, as when a target crashes.
		for _, pid := range s.SessionProcesses() {
			killProcess(pid)
		}
	}()
	res, err := sshexec.Run(context.Background(), cfg, "echo started; sleep 30")
	var e *sshexec.Error
	if !errors.As(err, &e) || e.Outcome != sshexec.ConnectionLost {
		t.Fatalf("err = %v, want connection_lost", err)
	}
	if res.Outcome != sshexec.ConnectionLost || string(res.Stdout) != "started\n" {
		t.Fatalf("got %v stdout %q", res.Outcome, res.Stdout)
	}
	if res.Timings.Total > 10*time.Second {
		t.Errorf("took %v to notice the broken connection", res.Timings.Total)
	}
}

func TestHostCertificateAgainstSSHD(t *testing.T) {
	t.Parallel()
	good := sshtest.NewSSHD(t, sshtest.Options{HostCertPrincipals: []string{"127.0.0.1"}})
	wrong := sshtest.NewSSHD(t, sshtest.Options{HostCertPrincipals: []string{"other.example.com"}})
	dir := t.TempDir()
	caLine := func(s *sshtest.SSHD) string {
		return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostCA)))
	}
	// knownhosts matches the port exactly, so name each server as
	// "[127.0.0.1]:PORT", as OpenSSH writes it.
	name := func(s *sshtest.SSHD) string { return knownhosts.Normalize(s.Addr) }
	write := func(name string, lines ...string) []string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{f}
	}
	tests := []struct {
		name  string
		s     *sshtest.SSHD
		files []string
		want  sshexec.Outcome
	}{
		{"trusted CA, right principal", good, write("good", "@cert-authority "+name(good)+" "+caLine(good)), sshexec.Exited},
		{"CA for other hosts only", good, write("otherhosts", "@cert-authority *.example.com "+caLine(good)), sshexec.HostKeyUnknown},
		{"untrusted CA", good, write("untrusted", "@cert-authority "+name(good)+" "+caLine(wrong)), sshexec.HostKeyUnknown},
		{"trusted CA, wrong principal", wrong, write("wrong", "@cert-authority "+name(wrong)+" "+caLine(wrong)), sshexec.HostKeyUnknown},
		{"revoked CA", good, write("revoked", "@cert-authority "+name(good)+" "+caLine(good), "@revoked * "+caLine(good)), sshexec.HostKeyRevoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configFor(tt.s)
			cfg.HostKeys = sshexec.HostKeys{KnownHostsFiles: tt.files}
			res, err := sshexec.Run(context.Background(), cfg, "true")
			if res == nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want {
				t.Fatalf("outcome = %v, want %v (%s)", res.Outcome, tt.want, res.Detail)
			}
			if tt.want == sshexec.Exited && !strings.HasSuffix(res.HostKeyType, "-cert-v01@openssh.com") {
				t.Errorf("host key type %q, want a certificate", res.HostKeyType)
			}
		})
	}
}

// TestPlainKeyListedAsCAIsRefused: x/crypto's knownhosts alone accepts a
// server whose plain host key equals an @cert-authority key for the host.
// A CA key vouches for certificates only.
func TestPlainKeyListedAsCAIsRefused(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{}) // one ed25519 host key, no certificate
	f := filepath.Join(t.TempDir(), "known_hosts")
	line := "@cert-authority " + knownhosts.Normalize(s.Addr) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey)))
	if err := os.WriteFile(f, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configFor(s)
	cfg.HostKeys = sshexec.HostKeys{KnownHostsFiles: []string{f}}
	res, err := sshexec.Run(context.Background(), cfg, "true")
	if res == nil || res.Outcome != sshexec.HostKeyUnknown {
		t.Fatalf("got %v (%v), want host_key_unknown", res, err)
	}
	if res.HostKeyFingerprint != ssh.FingerprintSHA256(s.HostKey) {
		t.Fatalf("server presented %s %s, want its plain ed25519 key", res.HostKeyType, res.HostKeyFingerprint)
	}
}
