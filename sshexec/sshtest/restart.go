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

// Restart stops the listening sshd, kills its sessions and starts it again
// on the same address with the same host key.
func (s *SSHD) Restart() error {
	kids := s.SessionProcesses()
	s.stop()
	for _, p := range kids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	return s.start()
}
