package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// silentGateway stands in for a gateway that hangs, which no real one does
// on demand: it accepts, reads a request and answers prefix (nothing, or
// the start of an event stream), then never another byte.
func silentGateway(t *testing.T, prefix string) string {
	t.Helper()
	return gatewaytest.HangingGateway(t, func(req *http.Request, c net.Conn) {
		if req != nil && prefix != "" {
			io.WriteString(c, prefix)
		}
	})
}

// runBounded is run, failing the test when it still waits after
// testkit.Patience (the silence under test is a second).
func runBounded(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	type result struct {
		code   int
		stderr string
	}
	ch := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		ch <- result{code, stderr.String()}
	}()
	select {
	case r := <-ch:
		return r.code, r.stderr
	case <-time.After(testkit.Patience):
		t.Fatal("airlock-ssh still waits on a silent gateway")
		return 0, ""
	}
}

// TestSilentGateway: a gateway that accepts and never answers, or answers
// and goes silent while the action waits, is given up on after
// $AIRLOCK_SILENCE: exit 255 and a line that says so, naming the action
// when the gateway had named it.
func TestSilentGateway(t *testing.T) {
	t.Setenv("AIRLOCK_SILENCE", "1s")
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" +
		"event: state\ndata: {\"state\":\"waiting_approval\",\"action_id\":\"act_silent\",\"kind\":\"call\",\"approval_id\":\"apr_x\"}\n\n"
	for _, tt := range []struct {
		name, prefix string
		want         []string
	}{
		{"never answers", "", []string{"airlock-ssh: the gateway at ", "stopped answering: nothing came from it for 1s"}},
		{"silent mid-stream", head, []string{"airlock-ssh: the gateway stopped answering: nothing came from it for 1s during action act_silent", "airlock-ssh --action act_silent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock := silentGateway(t, tt.prefix)
			code, stderr := runBounded(t, "--socket", sock, "-n", "--timeout", "2s", "box", "true")
			if code != 255 {
				t.Errorf("exit %d, want 255", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q, want it to say %q", stderr, w)
				}
			}
		})
	}
}

// TestRefusesForeignGateway: a socket directory and control file that
// another local user owns, or that others can write, get nothing: not
// even a connection.
func TestRefusesForeignGateway(t *testing.T) {
	other, _ := testkit.LocalUser(t, "alk-ssh-other", false)
	for _, tt := range []struct {
		name  string
		setup func(dir string) error
	}{
		{"another user's", func(dir string) error {
			for _, p := range []string{dir, filepath.Join(dir, api.ControlFileName)} {
				if err := os.Chown(p, other, -1); err != nil {
					return err
				}
			}
			return nil
		}},
		{"group-writable directory", func(dir string) error { return os.Chmod(dir, 0o770) }},
		{"control file others can read", func(dir string) error { return os.Chmod(filepath.Join(dir, api.ControlFileName), 0o604) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock, l := gatewaytest.GatewayDir(t)
			if err := tt.setup(filepath.Dir(sock)); err != nil {
				t.Fatal(err)
			}
			code, stderr := runBounded(t, "--socket", sock, "-n", "box", "true")
			if code != 255 || !strings.Contains(stderr, "refusing the gateway's") || !strings.Contains(stderr, "nothing was sent") {
				t.Errorf("exit %d, stderr %q: want 255 and the refusal", code, stderr)
			}
			// A connection reaches the listener's backlog before the
			// connect returns: none is there now, so none was made.
			l.SetDeadline(time.Now())
			if c, err := l.Accept(); err == nil {
				c.Close()
				t.Error("airlock-ssh connected to the gateway it refused")
			}
		})
	}
}

// stuckGateway stands in for a gateway whose action never ends, which no
// real one does on demand: it names the action, says it is connecting,
// and then sends only heartbeats.
func stuckGateway(t *testing.T) string {
	t.Helper()
	sock, l := gatewaytest.GatewayDir(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); l.Close(); <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
			"event: state\ndata: {\"state\":\"requested\",\"action_id\":\"act_stuck\"}\n\n"+
			"event: state\ndata: {\"state\":\"connecting\"}\n\n")
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, ": keep-alive\n\n"); err != nil {
					return
				}
			}
		}
	}()
	return sock
}

// TestTimeoutBoundsTheWait: once the action started, airlock-ssh waits
// for its outcome no longer than --timeout, the kill grace and the
// silence, even from a gateway that keeps sending heartbeats.
func TestTimeoutBoundsTheWait(t *testing.T) {
	t.Setenv("AIRLOCK_SILENCE", "1s")
	code, stderr := runBounded(t, "--socket", stuckGateway(t), "-n", "--timeout", "1s", "box", "true")
	if code != 255 || !strings.Contains(stderr, "airlock-ssh: the gateway stopped answering: action act_stuck started, and no outcome came within its timeout, the 2s kill grace and 1s more") {
		t.Errorf("exit %d, stderr %q: want 255 and the overdue outcome named", code, stderr)
	}
}
