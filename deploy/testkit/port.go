package testkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// ErrPortInUse is what a start function given to OnPort returns (wrapped)
// when its child reported that the port was taken; see PortInUse.
var ErrPortInUse = errors.New("testkit: port in use")

// PortInUse reports whether a child's log says it could not bind its
// port because something else holds it. sshd ("Bind to port … failed:
// Address already in use."), PostgreSQL ("could not bind IPv4 address
// …: Address already in use") and Go programs ("bind: address already in
// use") all say it so.
func PortInUse(log string) bool {
	return strings.Contains(strings.ToLower(log), "address already in use")
}

// The ports OnPort picks from: below Linux's default range for
// ephemeral ports (32768–60999), so that the kernel never gives one to an
// outgoing connection; only another listener can hold it, and the child
// then says so.
const (
	lowPort  = 20000
	highPort = 32768
	tries    = 20
)

// OnPort starts a child that binds a port it is told and cannot report
// one it chose itself (PostgreSQL, OPA): it calls start with a random
// port, and again with another while start returns an error wrapping
// ErrPortInUse. The child binds the port itself, so a collision is seen
// and retried, never raced. It returns the port start succeeded with, or
// start's last error.
func OnPort(start func(port int) error) (int, error) {
	var err error
	for range tries {
		port := lowPort + rand.IntN(highPort-lowPort)
		if err = start(port); err == nil {
			return port, nil
		}
		if !errors.Is(err, ErrPortInUse) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("testkit: %d ports tried: %w", tries, err)
}
