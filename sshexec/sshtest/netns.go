package sshtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/netserve"
)

// NetNS is a network namespace of its own with only its loopback
// interface up: a server started in it (Options.NetNS) cannot be reached
// from the test's namespace at all, only by something that joins it, such
// as another server in the same namespace or Expose.
type NetNS struct {
	// Path is the namespace's file, for nsenter --net.
	Path   string
	holder *exec.Cmd
	done   chan struct{}
}

// NewNetNS makes a network namespace that lives until the test ends. It
// needs root (CAP_SYS_ADMIN); without it the test fails under CI=true and
// is skipped elsewhere, like Need.
func NewNetNS(tb testing.TB) *NetNS {
	tb.Helper()
	// The holder keeps the namespace alive; its loopback is brought up
	// first. It ends when its stdin closes.
	cmd := exec.Command("unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec cat >/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		needNetNS(tb, err.Error())
	}
	up := make([]byte, 3)
	if _, err := io.ReadFull(stdout, up); err != nil || string(up) != "up\n" {
		stdin.Close()
		cmd.Wait()
		needNetNS(tb, fmt.Sprintf("unshare --net: %v %s", err, stderr.String()))
	}
	n := &NetNS{Path: "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net", holder: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }()
	tb.Cleanup(func() {
		stdin.Close()
		select {
		case <-n.done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-n.done
		}
	})
	return n
}

func needNetNS(tb testing.TB, why string) {
	tb.Helper()
	msg := "a network namespace of its own is needed (run as root): " + why
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// Dial connects to addr inside the namespace.
func (n *NetNS) Dial(addr string) (c net.Conn, err error) {
	err = n.do(func() error {
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
		return err
	})
	return c, err
}

// Listen listens on addr ("host:port"; port 0 for one the kernel
// chooses) inside the namespace.
func (n *NetNS) Listen(addr string) (l net.Listener, err error) {
	err = n.do(func() error {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// do runs fn on a thread in the namespace. The thread joins the namespace
// and is never given back to the runtime: it ends with fn's goroutine. A
// socket made there keeps the namespace it was made in.
func (n *NetNS) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(n.Path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Expose listens on 127.0.0.1 in the test's namespace and forwards every
// connection to addr inside the namespace; it returns the listening
// address. It stops when the test ends.
func (n *NetNS) Expose(tb testing.TB, addr string) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	// Closing the outside connection ends pipe, which closes the inside one.
	srv := netserve.Serve(l, func(c net.Conn) {
		in, err := n.Dial(addr)
		if err != nil {
			return
		}
		pipe(c, in)
	})
	tb.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err == nil || errors.Is(err, net.ErrClosed) {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}
