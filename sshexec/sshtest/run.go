package sshtest

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
)

// writeConfig writes sshd_config and has `sshd -t` check it. port is the
// daemon mode's; 0 (inetd mode) leaves out what only a listening sshd
// reads.
func (s *SSHD) writeConfig(port int) error {
	keysFiles, strict := s.AuthorizedKeysFile(), "no"
	if len(s.opts.AuthorizedKeysFiles) > 0 {
		keysFiles = strings.Join(s.opts.AuthorizedKeysFiles, " ")
	}
	if s.opts.StrictModes {
		strict = "yes"
	}
	var cfg strings.Builder
	if port != 0 {
		fmt.Fprintf(&cfg, "Port %d\nListenAddress %s\nPidFile %s\nMaxStartups %s\n", port, s.host(),
			filepath.Join(s.Dir, "sshd.pid"), s.opts.MaxStartups)
	}
	fmt.Fprintf(&cfg, `HostKey %s
AuthorizedKeysFile %s
StrictModes %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PrintMotd no
PrintLastLog no
LogLevel VERBOSE
MaxSessions 10
Subsystem sftp internal-sftp
`, filepath.Join(s.Dir, "host_ed25519"), keysFiles, strict)
	if len(s.opts.HostCertPrincipals) > 0 {
		cfg.WriteString("HostCertificate " + filepath.Join(s.Dir, "host_ed25519-cert.pub") + "\n")
	}
	for _, typ := range s.opts.ExtraHostKeys {
		cfg.WriteString("HostKey " + filepath.Join(s.Dir, "host_"+typ) + "\n")
	}
	cfg.WriteString(strings.Join(s.opts.Config, "\n") + "\n")
	s.cfgFile = filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(s.cfgFile, []byte(cfg.String()), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(SSHDPath, "-t", "-f", s.cfgFile).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: sshd -t: %v: %s", err, out)
	}
	return nil
}

// host is the address sshd is reached at.
func (s *SSHD) host() string { return cmp.Or(s.opts.Host, "127.0.0.1") }

// command is sshd in mode ("-i" or "-D"), logging to stderr, in
// Options.NetNS when there is one.
func (s *SSHD) command(mode string) *exec.Cmd {
	args := []string{SSHDPath, mode, "-e", "-f", s.cfgFile}
	if s.opts.NetNS != nil {
		// nsenter execs sshd in place: the process is sshd's.
		args = append([]string{"nsenter", "--net=" + s.opts.NetNS.Path}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = s.logFile, s.logFile
	return cmd
}

// SessionProcesses returns the pids of sshd's per-connection processes:
// each `sshd -i` and its sshd children (or, in daemon mode, every
// descendant of the listener whose command is sshd).
func (s *SSHD) SessionProcesses() []int {
	s.mu.Lock()
	var roots []int
	for cmd := range s.sessions {
		roots = append(roots, cmd.Process.Pid)
	}
	daemon := 0
	if s.cmd != nil {
		daemon = s.cmd.Process.Pid
		roots = append(roots, daemon)
	}
	s.mu.Unlock()
	table, _ := proctree.Table()
	var out []int
	for _, root := range roots {
		if root != daemon {
			out = append(out, root)
		}
		for _, p := range proctree.Descendants(table, root) {
			if p.Comm == "sshd" {
				out = append(out, p.PID)
			}
		}
	}
	return out
}

// Close stops sshd and every session process it started, and removes its
// files.
func (s *SSHD) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	var roots []int
	for cmd := range s.sessions {
		roots = append(roots, cmd.Process.Pid)
	}
	if s.cmd != nil {
		roots = append(roots, s.cmd.Process.Pid)
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	var kids []int
	for _, root := range roots {
		kids = append(kids, Descendants(root)...)
	}
	s.stopDaemon()
	for _, k := range kids {
		syscall.Kill(k, syscall.SIGKILL)
	}
	s.mu.Lock()
	for cmd := range s.sessions {
		cmd.Process.Kill()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.logFile.Close()
	return os.RemoveAll(s.Dir)
}

// RotateHostKey gives the server a new host key, as a reinstalled (or
// impersonated) target would have; connections made from now on see it.
func (s *SSHD) RotateHostKey() error {
	if s.opts.MaxStartups == "" {
		return s.newHostKey()
	}
	s.stopDaemon()
	if err := s.newHostKey(); err != nil {
		return err
	}
	return s.startDaemon(s.port)
}

// WaitLog waits up to timeout for substr to appear in the log.
func (s *SSHD) WaitLog(substr string, timeout time.Duration) bool {
	return testkit.Poll(timeout, func() bool { return strings.Contains(s.Log(), substr) })
}
