package sshtest

import (
	"fmt"
	"net"
)

// listen starts the inetd mode: the harness listens on a port the kernel
// chooses and runs `sshd -i` for each connection, the connection as its
// standard input and output.
func (s *SSHD) listen() error {
	if err := s.writeConfig(0); err != nil {
		return err
	}
	addr := net.JoinHostPort(s.host(), "0")
	var ln net.Listener
	var err error
	if s.opts.NetNS != nil {
		ln, err = s.opts.NetNS.Listen(addr)
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return fmt.Errorf("sshtest: %w", err)
	}
	s.ln, s.Addr = ln, ln.Addr().String()
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.spawn(c)
		}
	})
	return nil
}

// spawn runs `sshd -i` on c. The child gets a duplicate of the socket;
// the harness's copy is closed once it started.
func (s *SSHD) spawn(c net.Conn) {
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		fmt.Fprintf(s.logFile, "sshtest: %v\n", err)
		return
	}
	defer f.Close()
	cmd := s.command("-i")
	cmd.Stdin, cmd.Stdout = f, f
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(s.logFile, "sshtest: start sshd -i: %v\n", err)
		return
	}
	s.sessions[cmd] = struct{}{}
	s.wg.Go(func() {
		cmd.Wait()
		s.mu.Lock()
		delete(s.sessions, cmd)
		s.mu.Unlock()
	})
}
