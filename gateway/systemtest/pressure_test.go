package systemtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestMaxStartupsPressure: a target whose sshd takes at most two
// connections that have not logged in yet (MaxStartups 2) and drops the
// rest. With max_parallel = 2 the gateway queues a burst of actions so
// that sshd drops none; with max_parallel above what sshd takes, sshd
// drops some, and each of those actions ends with an outcome that says the
// target closed the connection before login — exactly as many as sshd
// logged — and never with a success it did not have.
func TestMaxStartupsPressure(t *testing.T) {
	const burst = 24
	s := sshtest.NewSSHD(t, sshtest.Options{MaxStartups: "2"})
	s.LogOnFailure(t)
	_, keyFile := clientKey(t, s)
	box := func(name string, mp int) target {
		return target{name: name, address: s.Addr, hostKey: keyLine(s.HostKey), user: s.User, credential: "key", maxParallel: mp}
	}
	g := newGateway(t, config{credentials: map[string]string{"key": keyFile},
		targets: []target{box("tight", 2), box("loose", burst)}})
	agent := g.agent()
	g.approveRun(agent, g.reviewer(), "tight")
	drops := func() int { return strings.Count(s.Log(), "past MaxStartups") }

	// fire starts burst actions on tgt at once and returns them.
	fire := func(tgt string) []*api.Action {
		t.Helper()
		var wg sync.WaitGroup
		out := make([]*api.Action, burst)
		gate := make(chan struct{})
		for i := range burst {
			wg.Go(func() {
				<-gate
				a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: tgt, Command: fmt.Sprintf("echo %d", i), TimeoutS: 60}, api.Events{})
				if err != nil {
					t.Errorf("%s action %d: %v", tgt, i, err)
					return
				}
				out[i] = a
			})
		}
		close(gate)
		wg.Wait()
		return out
	}

	t.Run("max_parallel within MaxStartups", func(t *testing.T) {
		before, start := drops(), time.Now()
		for i, a := range fire("tight") {
			if a != nil && (!a.Success() || a.Stdout != fmt.Sprintf("%d\n", i)) {
				t.Errorf("action %d: %s (%s) stdout %q", i, a.Outcome, a.Detail, a.Stdout)
			}
		}
		if got := drops() - before; got != 0 {
			t.Errorf("sshd dropped %d connections although the gateway kept to max_parallel 2", got)
		}
		t.Logf("%d actions through max_parallel 2 in %s, sshd dropped %d", burst, time.Since(start).Round(time.Millisecond), drops()-before)
	})

	t.Run("max_parallel over MaxStartups", func(t *testing.T) {
		// Whether sshd drops depends on timing; a few bursts make it
		// certain in practice.
		for round := 1; round <= 5; round++ {
			before, logins := drops(), s.Accepted()
			counts := map[sshexec.Outcome]int{}
			dropped := 0
			for i, a := range fire("loose") {
				if a == nil {
					continue
				}
				counts[a.Outcome]++
				switch {
				case a.Success() && a.Stdout == fmt.Sprintf("%d\n", i):
				case a.Outcome == sshexec.HandshakeFailed && a.Termination == sshexec.NotStarted &&
					(strings.Contains(a.Detail, `"Exceeded MaxStartups"`) || strings.Contains(a.Detail, "closed the connection before sending anything")):
					dropped++
					if dropped == 1 {
						t.Logf("a dropped action: %s: %s", a.Outcome, a.Detail)
					}
				default:
					t.Errorf("action %d: %s (%s) stdout %q", i, a.Outcome, a.Detail, a.Stdout)
				}
			}
			got := drops() - before
			t.Logf("round %d: %v; sshd logged %d drops", round, counts, got)
			if dropped != got {
				t.Errorf("%d actions ended handshake_failed, sshd dropped %d connections", dropped, got)
			}
			if n := s.Accepted() - logins; n != counts[sshexec.Exited] {
				t.Errorf("sshd logged %d logins for %d successful actions", n, counts[sshexec.Exited])
			}
			if got > 0 {
				break
			}
			if round == 5 {
				t.Fatal("sshd never dropped a connection: is MaxStartups applied?")
			}
		}
	})
	g.verify()
}
