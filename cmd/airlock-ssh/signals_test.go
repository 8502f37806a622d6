package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// followingGateway answers `--action act_sig`'s event stream with the
// action running, then stays silent; every other request gets nothing.
// followed is told when the stream was asked for.
func followingGateway(t *testing.T) (socket string, followed <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 1)
	socket = gatewaytest.HangingGateway(t, func(req *http.Request, c net.Conn) {
		if req == nil || !strings.HasSuffix(req.URL.Path, "/events") {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
			"event: state\ndata: {\"state\":\"running\",\"action_id\":\"act_sig\",\"kind\":\"run\"}\n\n")
		ch <- struct{}{}
	})
	return socket, ch
}

// TestOneInterruptionArrivingTwice: timeout(1) signals its command and
// then its process group, so airlock-ssh gets one SIGINT twice. That is
// one interruption: airlock-ssh reports where the action stands (here:
// the gateway went silent) and exits 255; it is not killed by the
// second copy, even when it comes a little later. A second signal after repeatWindow still ends it at once.
func TestOneInterruptionArrivingTwice(t *testing.T) {
	bin := gatewaytest.Binary(t, "airlock-ssh")
	start := func(t *testing.T, silence string) (*exec.Cmd, *bytes.Buffer) {
		t.Helper()
		sock, followed := followingGateway(t)
		var errs bytes.Buffer
		cmd := exec.Command(bin, "--socket", sock, "--action", "act_sig")
		cmd.Env = append(os.Environ(), "AIRLOCK_SILENCE="+silence)
		cmd.Stderr = &errs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		select {
		case <-followed:
		case <-time.After(testkit.Patience):
			t.Fatal("airlock-ssh never asked for the action's events")
		}
		return cmd, &errs
	}

	t.Run("twice", func(t *testing.T) {
		cmd, errs := start(t, "2s")
		cmd.Process.Signal(syscall.SIGINT)
		// The copy to the process group may come a little later, as it
		// does on a busy machine.
		time.Sleep(repeatWindow / 5)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 255 {
			t.Fatalf("exit %v, want 255 (stderr %q)", err, errs.String())
		}
		if !strings.Contains(errs.String(), "airlock-ssh: ") || !strings.Contains(errs.String(), "act_sig") {
			t.Errorf("stderr %q: want it to say what became of act_sig", errs.String())
		}
	})

	t.Run("again later", func(t *testing.T) {
		cmd, errs := start(t, "8s")
		cmd.Process.Signal(syscall.SIGINT)
		// It now waits for the action's state from a silent gateway
		// (AIRLOCK_SILENCE is longer than this).
		time.Sleep(3 * repeatWindow)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("exit %v, want killed by SIGINT", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("exit %v (stderr %q), want killed by the second SIGINT", err, errs.String())
		}
	})
}
