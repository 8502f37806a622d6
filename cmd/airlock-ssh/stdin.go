package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/gateway/api"
)

// stdinGrace is how long a pipe made for airlock-ssh (a pipeline's, or
// its starter's) may stay silent before nothing is sent: its writer has
// been started with it and writes at once. A pipe it shares with the
// process that started it (that process's own standard input: an agent
// harness's shell) is not waited for at all.
const stdinGrace = 100 * time.Millisecond

// readStdin reads the standard input to send: all of it (at most
// api.MaxStdin bytes), or nothing for a terminal, or for a pipe or
// socket with nothing on it (see stdinGrace) — which is then left unread
// and watched: silent says whether anything arrived on it after all.
func readStdin(r io.Reader) (in []byte, silent *silentInput, err error) {
	f, ok := r.(*os.File)
	if !ok {
		return readAllStdin(r)
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		return nil, nil, nil // a terminal: nothing is sent, as ssh -T with a tty would block
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, nil // no standard input at all
	}
	if fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0 {
		return readAllStdin(f)
	}
	// A pipe or a socket: read it to its end if it has bytes or its end
	// already (or within the grace), else leave it alone.
	ready, err := readable(fd, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("standard input: %v", err)
	}
	inherited := sharedWithParent(fi)
	if !ready && !inherited {
		if ready, err = readable(fd, stdinGrace); err != nil {
			return nil, nil, fmt.Errorf("standard input: %v", err)
		}
	}
	if !ready {
		s := &silentInput{fd: fd, inherited: inherited}
		if !inherited {
			s.waited = stdinGrace
		}
		return nil, s, nil
	}
	return readAllStdin(f)
}

// readAllStdin reads r to its end, at most api.MaxStdin bytes.
func readAllStdin(r io.Reader) ([]byte, *silentInput, error) {
	b, err := io.ReadAll(io.LimitReader(r, api.MaxStdin+1))
	if len(b) > api.MaxStdin {
		return nil, nil, fmt.Errorf("standard input is over %d bytes, more than airlock sends; pass -n, or move the data another way", api.MaxStdin)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading standard input: %v", err)
	}
	return b, nil, nil
}

// readable reports whether fd has bytes to read or its end (its writers
// are gone), waiting at most d.
func readable(fd int, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		// Never negative: poll(2) waits for ever on a negative timeout.
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			if time.Now().Before(deadline) {
				continue
			}
			return false, nil
		case err != nil:
			return false, err
		}
		return n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0, nil
	}
}

// sharedWithParent reports whether standard input (fi) is the very pipe
// or socket the parent process has as its own standard input: handed
// down by a shell or harness that holds it, not made for this command.
// False when that cannot be read (another user's parent).
func sharedWithParent(fi os.FileInfo) bool {
	parent, err := os.Stat(fmt.Sprintf("/proc/%d/fd/0", os.Getppid()))
	return err == nil && os.SameFile(fi, parent)
}

// silentInput is a standard input that had nothing on it when the action
// was requested, left unread: what arrives on it stays there, and is
// counted, never consumed.
type silentInput struct {
	fd int
	// inherited: it is the parent's standard input too.
	inherited bool
	// waited is how long airlock-ssh waited for it (0: not at all).
	waited time.Duration
}

// arrived is how many bytes wait on it now, and whether it is still open
// (no bytes, and a writer left); nil watches nothing. (TIOCINQ is
// FIONREAD: the bytes buffered, for a pipe and a socket alike.)
func (s *silentInput) arrived() (n int, open bool) {
	if s == nil {
		return 0, false
	}
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return 0, true
	}
	if fds[0].Revents&unix.POLLIN != 0 {
		if n, err := unix.IoctlGetInt(s.fd, unix.TIOCINQ); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, fds[0].Revents&(unix.POLLHUP|unix.POLLERR) == 0
}

// what says how long airlock-ssh looked at it.
func (s *silentInput) what() string {
	if s.inherited {
		return "standard input is the pipe of the process that started airlock-ssh, with nothing on it"
	}
	return fmt.Sprintf("standard input had nothing on it for %s", s.waited)
}
