package systemtest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
)

// TestSlowClientsDoNotExhaust: hundreds of HTTP clients sending their
// headers a byte at a time, local-socket clients that stall in their
// headers or body, and an event stream of a 20 MB action that is never
// read, all at once; meanwhile a normal action over each transport still
// completes, the stalled stream does not hold its action back, and
// once the slow clients go the gateway is back to its resting goroutines
// and file descriptors.
func TestSlowClientsDoNotExhaust(t *testing.T) {
	nHTTP, nSocket, hold := 200, 200, 4*time.Second
	if soak() {
		nHTTP, nSocket, hold = 1000, 1000, 20*time.Second
	}
	g, _, agent := oneSSHD(t)
	rv := g.reviewer()
	remote, _ := g.remoteAgent()
	g.approveRun(remote, rv, "box")
	base, _ := g.settle(procStats{fds: 1 << 30, goroutines: 1 << 30}, 0, 0)
	ctl, _ := api.ReadControl(g.socket)
	addr := strings.TrimPrefix(g.HTTPURL, "http://")

	crowd := &slowCrowd{stop: make(chan struct{})}
	defer crowd.release()
	crowd.trickleHTTP(t, addr, nHTTP)
	crowd.stallSocket(t, g.socket, ctl.Token, nSocket)

	// An event stream nobody reads, of an action with 20 MB of output.
	id := detached(t, agent, api.ActionRequest{Target: "box", Command: "head -c 20000000 /dev/zero"})
	sc := crowd.dial(t, "unix", g.socket, "the event stream's client")
	fmt.Fprintf(sc, "GET /v1/actions/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", id, ctl.Token)

	time.Sleep(500 * time.Millisecond)
	held := g.stats()
	for _, tc := range []struct {
		name string
		c    *api.Client
	}{{"socket", agent}, {"http", remote}} {
		// How long it takes depends on the machine and is only logged; a
		// gateway the slow clients starve never answers, which the
		// minute's bound turns into a failure instead of a hung test.
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		a, err := tc.c.RunAction(ctx, api.ActionRequest{Target: "box", Command: "echo through"}, api.Events{})
		cancel()
		took := time.Since(start)
		if err != nil || !a.Success() || a.Stdout != "through\n" {
			t.Fatalf("a normal action over the %s among slow clients (after %s): %+v %v", tc.name, took.Round(time.Millisecond), a, err)
		}
		t.Logf("a normal action over the %s with %d slow HTTP and %d stalled socket clients held: %s", tc.name, nHTTP, nSocket, took.Round(time.Millisecond))
	}
	big := waitState(t, agent, id, api.StateFinished, testkit.Patience)
	if big.FinishedAt != nil && big.StartedAt != nil {
		t.Logf("the 20 MB action behind the unread stream took %s", big.FinishedAt.Sub(*big.StartedAt).Round(time.Millisecond))
	}
	if !big.Success() || big.StdoutBytes != 20000000 {
		t.Errorf("the action behind the unread stream: %s %s, %d bytes", big.Outcome, big.Detail, big.StdoutBytes)
	}
	if !g.healthy() {
		t.Error("/healthz does not answer among slow clients")
	}
	time.Sleep(hold)
	if g.exited() {
		t.Fatal("the gateway died")
	}
	t.Logf("held: %d fds, %d goroutines in the gateway", held.fds, held.goroutines)

	crowd.release()
	after, ok := g.settle(base, 8, 20*time.Second)
	t.Logf("gateway process: fds %d → %d → %d, goroutines %d → %d → %d", base.fds, held.fds, after.fds, base.goroutines, held.goroutines, after.goroutines)
	if !ok {
		t.Errorf("the gateway kept what the slow clients took: fds %d → %d, goroutines %d → %d", base.fds, after.fds, base.goroutines, after.goroutines)
	}
}

// slowCrowd is clients of the gateway that hold their connections open
// while sending next to nothing.
type slowCrowd struct {
	stop  chan struct{} // closed: the trickling clients stop
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	once  sync.Once
}

// dial opens a connection for the client who, and keeps it.
func (c *slowCrowd) dial(t *testing.T, network, addr, who string) net.Conn {
	t.Helper()
	conn, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	return conn
}

// trickleHTTP opens n connections to the HTTP listener at addr whose
// clients send their headers a byte every 300 ms.
func (c *slowCrowd) trickleHTTP(t *testing.T, addr string, n int) {
	t.Helper()
	for i := range n {
		conn := c.dial(t, "tcp", addr, fmt.Sprintf("slow HTTP client %d", i))
		c.wg.Go(func() {
			fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
			tick := time.NewTicker(300 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-c.stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
				}
			}
		})
	}
}

// stallSocket opens n connections to the local socket whose clients,
// holding token, stop in their request's headers (half of them) or body.
func (c *slowCrowd) stallSocket(t *testing.T, socket, token string, n int) {
	t.Helper()
	for i := range n {
		conn := c.dial(t, "unix", socket, fmt.Sprintf("stalled socket client %d", i))
		if i%2 == 0 {
			fmt.Fprintf(conn, "POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n", token)
		} else {
			fmt.Fprintf(conn, "POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"target\":", token)
		}
	}
}

// release stops the trickling clients, closes every connection and waits
// for the clients to end; only the first call does anything.
func (c *slowCrowd) release() {
	c.once.Do(func() {
		close(c.stop)
		c.mu.Lock()
		for _, conn := range c.conns {
			conn.Close()
		}
		c.conns = nil
		c.mu.Unlock()
		c.wg.Wait()
	})
}
