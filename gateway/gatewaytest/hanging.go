package gatewaytest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
)

// GatewayDir lays out what a gateway publishes — a directory with its
// socket and control file (token "t") — with a listener that accepts
// nothing itself, closed when the test ends.
func GatewayDir(tb testing.TB) (socket string, l *net.UnixListener) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	socket = filepath.Join(dir, "airlock.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	if err := os.WriteFile(filepath.Join(dir, api.ControlFileName), fmt.Appendf(nil, `{"socket":%q,"token":"t"}`, socket), 0o600); err != nil {
		tb.Fatal(err)
	}
	return socket, l
}

// HangingGateway serves a GatewayDir as a gateway that hangs, which no
// real one does on demand: each connection's request is read and handed
// to answer (req nil when it could not be read), which may write to the
// connection; then the connection stays open and silent until the test
// ends.
func HangingGateway(tb testing.TB, answer func(req *http.Request, c net.Conn)) (socket string) {
	tb.Helper()
	socket, l := GatewayDir(tb)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	tb.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				req = nil
			}
			answer(req, c)
		}
	}()
	return socket
}
