package systemtest

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on an OS thread that has entered the named network
// namespace (ip netns add NAME); processes fn starts and sockets it opens
// live there. The thread is discarded afterwards.
func inNetNS(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/var/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}
