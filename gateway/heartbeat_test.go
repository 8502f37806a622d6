package gateway

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// TestHeartbeatsKeepAWaitAlive: airlock-ssh gives up on a gateway silent
// for $AIRLOCK_SILENCE, and a real gateway is never silent that long: its
// heartbeats keep an approval wait alive however long the reviewer takes.
// (A short heartbeat and silence keep the test quick.)
func TestHeartbeatsKeepAWaitAlive(t *testing.T) {
	s := sharedSSHD(t)
	const silence = time.Second
	g := startGateway(t, s, gwOptions{options: func(o *Options) { o.heartbeat = 50 * time.Millisecond }})
	cmd := exec.Command(gatewaytest.Binary(t, "airlock-ssh"), "-n", "box-call", "--", "echo", "approved")
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+g.cfg.Listen.Socket, "AIRLOCK_SILENCE="+silence.String())
	var stdout, stderr gatewaytest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	g.waitPending(1)
	// The reviewer takes three silences to decide: the scenario itself,
	// not a wait for something to happen.
	select {
	case err := <-done:
		t.Fatalf("airlock-ssh ended while the action waited (%v): %s", err, stderr.String())
	case <-time.After(3 * silence):
	}
	g.decideNext("call", "approve", "")
	if err := <-done; err != nil || stdout.String() != "approved\n" {
		t.Fatalf("airlock-ssh: %v, stdout %q, stderr %q; want the approved command's output", err, stdout.String(), stderr.String())
	}
}
