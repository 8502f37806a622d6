package sshtest

import "syscall"

// KillSessions ends every per-connection sshd process with SIGKILL, as a
// crash of the target's sshd would: each client sees its TCP connection
// cut in the middle of its session. It returns how many it killed.
func (s *SSHD) KillSessions() int {
	kids := s.SessionProcesses()
	for _, p := range kids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	return len(kids)
}

// Restart kills sshd's sessions, as a crash or restart of the target's
// sshd would (each client sees its connection cut), and serves new
// connections on the same address with the same host key. In daemon mode
// the listening sshd is stopped and started again; the sessions go first:
// they hold sshd's log, and stopping the listener waits for it.
func (s *SSHD) Restart() error {
	s.KillSessions()
	if s.opts.MaxStartups == "" {
		return nil
	}
	s.stopDaemon()
	return s.startDaemon(s.port)
}
