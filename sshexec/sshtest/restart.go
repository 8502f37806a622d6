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

// Restart kills sshd's sessions, stops the listening sshd and starts it
// again on the same address with the same host key. The sessions go first:
// they hold sshd's log pipe, and stopping the listener waits for it.
func (s *SSHD) Restart() error {
	s.KillSessions()
	s.stop()
	return s.start()
}
