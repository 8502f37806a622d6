package sshtest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// startDaemon runs a listening `sshd -D` on port and waits until it
// listens. sshd binds the port itself: when something else holds it,
// sshd says so and the error wraps testkit.ErrPortInUse.
func (s *SSHD) startDaemon(port int) error {
	if err := s.writeConfig(port); err != nil {
		return err
	}
	logStart := len(s.Log())
	cmd := s.command("-D")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshtest: start sshd: %w", err)
	}
	done := make(chan struct{})
	s.wg.Go(func() { cmd.Wait(); close(done) })
	listening := fmt.Sprintf("Server listening on %s port %d", s.host(), port)
	err := testkit.PollErr(testkit.Patience, func() error {
		select {
		case <-done:
			log := s.Log()[logStart:]
			if testkit.PortInUse(log) {
				return testkit.Stop(fmt.Errorf("sshtest: sshd on port %d: %w: %s", port, testkit.ErrPortInUse, log))
			}
			return testkit.Stop(fmt.Errorf("sshtest: sshd exited at start: %s", log))
		default:
		}
		if !strings.Contains(s.Log()[logStart:], listening) {
			return fmt.Errorf("sshtest: sshd did not start listening: %s", s.Log()[logStart:])
		}
		return nil
	})
	if err != nil {
		cmd.Process.Kill()
		<-done
		return err
	}
	s.mu.Lock()
	s.cmd, s.done, s.port = cmd, done, port
	s.Addr = net.JoinHostPort(s.host(), strconv.Itoa(port))
	s.mu.Unlock()
	return nil
}

// stopDaemon ends the listening sshd, if there is one (SIGTERM, then
// SIGKILL after 5 s). sshd's per-connection children carry on until their
// connections end.
func (s *SSHD) stopDaemon() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
