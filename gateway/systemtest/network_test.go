package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// netPair is two network namespaces made by the test, joined by a veth
// pair: the gateway runs in one, the target's sshd in the other. No
// interface of the host's own namespace is touched, and the addresses
// exist only between the two.
type netPair struct {
	gw, tg     string // namespace names
	gwIf, tgIf string
	gwIP, tgIP string
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newNetPair makes the namespaces, or skips: network namespaces need root
// and iproute2, which are not peers CI must have.
func newNetPair(t *testing.T) *netPair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network fault tests need root for ip netns and tc; not a peer CI must have")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (iproute2); network fault tests skipped, not a peer CI must have", tool)
		}
	}
	r := rand.IntN(1 << 16)
	p := &netPair{
		gw: fmt.Sprintf("airlock-gw-%04x", r), tg: fmt.Sprintf("airlock-tg-%04x", r),
		gwIf: fmt.Sprintf("alg%04x", r), tgIf: fmt.Sprintf("alt%04x", r),
		gwIP: fmt.Sprintf("10.254.%d.1", r%250), tgIP: fmt.Sprintf("10.254.%d.2", r%250),
	}
	if out, err := exec.Command("ip", "netns", "add", p.gw).CombinedOutput(); err != nil {
		t.Skipf("ip netns add not permitted here (%v: %s); not a peer CI must have", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.gw).Run() })
	ipCmd(t, "netns", "add", p.tg)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.tg).Run() })
	ipCmd(t, "link", "add", p.gwIf, "netns", p.gw, "type", "veth", "peer", "name", p.tgIf, "netns", p.tg)
	for _, side := range []struct{ ns, ifc, ip string }{{p.gw, p.gwIf, p.gwIP}, {p.tg, p.tgIf, p.tgIP}} {
		ipCmd(t, "-n", side.ns, "link", "set", "lo", "up")
		ipCmd(t, "-n", side.ns, "addr", "add", side.ip+"/30", "dev", side.ifc)
		ipCmd(t, "-n", side.ns, "link", "set", side.ifc, "up")
	}
	return p
}

// netem sets (or with no args clears) a netem qdisc on both ends.
func (p *netPair) netem(t *testing.T, args ...string) {
	t.Helper()
	for _, side := range []struct{ ns, ifc string }{{p.gw, p.gwIf}, {p.tg, p.tgIf}} {
		exec.Command("ip", "netns", "exec", side.ns, "tc", "qdisc", "del", "dev", side.ifc, "root").Run()
		if len(args) > 0 {
			a := append([]string{"netns", "exec", side.ns, "tc", "qdisc", "add", "dev", side.ifc, "root", "netem"}, args...)
			if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
				t.Skipf("tc netem not available (%v: %s); not a peer CI must have", err, out)
			}
		}
	}
}

// loss drops pct percent of the packets leaving each end of the veth pair
// at random, with an nftables rule in each namespace (pct 0 removes it).
// Where tc netem exists it could do the same; nftables works on kernels
// built without sch_netem.
func (p *netPair) loss(t *testing.T, pct int) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not found (nftables; make test installs it as root); not a peer CI must have")
	}
	for _, side := range []struct{ ns, ifc string }{{p.gw, p.gwIf}, {p.tg, p.tgIf}} {
		exec.Command("ip", "netns", "exec", side.ns, "nft", "delete", "table", "inet", "airlock_loss").Run()
		if pct == 0 {
			continue
		}
		match := fmt.Sprintf("numgen random mod 100 < %d ", pct)
		if pct >= 100 {
			match = ""
		}
		rules := fmt.Sprintf(`table inet airlock_loss {
	chain out {
		type filter hook output priority 0; policy accept;
		oifname %q %sdrop
	}
}
`, side.ifc, match)
		cmd := exec.Command("ip", "netns", "exec", side.ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("nftables not usable here (%v: %s); not a peer CI must have", err, out)
		}
	}
}

// slowLink limits each end of the veth pair to rate with a token bucket
// (tc tbf; "" removes it): a thin link whose queue delays every packet.
func (p *netPair) slowLink(t *testing.T, rate string) {
	t.Helper()
	for _, side := range []struct{ ns, ifc string }{{p.gw, p.gwIf}, {p.tg, p.tgIf}} {
		exec.Command("ip", "netns", "exec", side.ns, "tc", "qdisc", "del", "dev", side.ifc, "root").Run()
		if rate == "" {
			continue
		}
		if out, err := exec.Command("ip", "netns", "exec", side.ns, "tc", "qdisc", "add", "dev", side.ifc, "root",
			"tbf", "rate", rate, "burst", "1540", "limit", "1000000").CombinedOutput(); err != nil {
			t.Skipf("tc tbf not available (%v: %s); not a peer CI must have", err, out)
		}
	}
}

// blackhole makes the target's address vanish (or come back): packets to
// it are then dropped silently, with no reset and no ICMP, as on a dead
// host. This needs no netem.
func (p *netPair) blackhole(t *testing.T, on bool) {
	t.Helper()
	verb := "add"
	if on {
		verb = "del"
	}
	ipCmd(t, "-n", p.tg, "addr", verb, p.tgIP+"/30", "dev", p.tgIf)
}

// cliNS runs the airlock CLI inside the gateway's namespace (its HTTP
// listener is on that namespace's loopback).
func (g *gw) cliNS(args ...string) (string, int) {
	g.t.Helper()
	var out string
	code := 0
	err := inNetNS(g.netns, func() error {
		cmd := exec.Command(binary(g.t, "airlock"), args...)
		cmd.Env = append(os.Environ(), "AIRLOCK_URL="+g.HTTPURL, "AIRLOCK_REVIEWER="+reviewerName,
			"AIRLOCK_PASSWORD_FILE="+g.pwFile, "AIRLOCK_CONFIG="+g.cfgFile)
		b, err := cmd.CombinedOutput()
		out = string(b)
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			return nil
		}
		return err
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return out, code
}

// farTarget is a gateway in one namespace of a netPair and, in the other,
// the sshd of its target "far", whose run the agent has approved.
type farTarget struct {
	p     *netPair
	s     *sshtest.SSHD
	g     *gw
	agent *api.Client
}

// newFarTarget starts both ends and has the agent's first action, through
// the reviewer CLI inside the gateway's namespace, approved and run.
func newFarTarget(t *testing.T) *farTarget {
	t.Helper()
	p := newNetPair(t)
	var s *sshtest.SSHD
	if err := inNetNS(p.tg, func() (err error) {
		s, err = sshtest.StartSSHD(sshtest.Options{Host: p.tgIP})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.LogOnFailure(t)
	addr := s.Addr
	_, keyFile := clientKey(t, s)
	g := newGatewayIn(t, config{credentials: map[string]string{"key": keyFile},
		targets: []target{{name: "far", address: addr, hostKey: keyLine(s.HostKey), user: s.User, credential: "key"}}}, p.gw)
	agent := g.agent()

	// Approve the run through the reviewer CLI inside the namespace.
	first := make(chan *api.Action, 1)
	go func() {
		a, _ := agent.RunAction(context.Background(), api.ActionRequest{Target: "far", Command: "echo ok"}, api.Events{})
		first <- a
	}()
	testkit.EventuallyErr(t, func() error {
		out, code := g.cliNS("approvals", "list", "--json")
		var list []api.Approval
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return fmt.Errorf("approvals list: %s", out)
		}
		if out, code := g.cliNS("approvals", "approve", list[0].ID); code != 0 {
			t.Fatalf("approve: %s", out)
		}
		return nil
	}, "no approval request")
	if a := <-first; a == nil || !a.Success() {
		t.Fatalf("first action across the veth pair: %+v", a)
	}
	return &farTarget{p: p, s: s, g: g, agent: agent}
}

// run runs cmd on far with a deadline of timeoutS seconds, calling
// onOutput at its first output, and checks that it ends within the
// deadline and the kill grace (with a second to spare).
func (f *farTarget) run(t *testing.T, cmd string, timeoutS int, onOutput func()) (*api.Action, time.Duration) {
	t.Helper()
	var once sync.Once
	start := time.Now()
	a, err := f.agent.RunAction(context.Background(), api.ActionRequest{Target: "far", Command: cmd, TimeoutS: timeoutS},
		api.Events{Output: func(string, []byte) {
			if onOutput != nil {
				once.Do(onOutput)
			}
		}})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if limit := time.Duration(timeoutS)*time.Second + sshexec.DefaultKillGrace + time.Second; took > limit {
		t.Errorf("%q took %s, over its deadline %ds + kill grace", cmd, took.Round(time.Millisecond), timeoutS)
	}
	return a, took
}

// TestNetworkFaults: with the target behind a veth pair — a route
// blackhole, delay (tc netem, where the kernel has it), random and total
// loss (nftables), a thin link (tc tbf), a blackhole before the dial and in
// the middle of a command — each action ends within its deadline (plus the
// kill grace) with the outcome that fits.
func TestNetworkFaults(t *testing.T) {
	f := newFarTarget(t)
	t.Run("route blackhole", func(t *testing.T) {
		ipCmd(t, "-n", f.p.gw, "route", "add", "blackhole", f.p.tgIP+"/32")
		defer ipCmd(t, "-n", f.p.gw, "route", "del", "blackhole", f.p.tgIP+"/32")
		a, took := f.run(t, "echo ok", 3, nil)
		if a.Outcome != sshexec.DialFailed {
			t.Errorf("outcome %q (%s), want dial_failed", a.Outcome, a.Detail)
		}
		t.Logf("route blackhole: %s in %s", a.Outcome, took.Round(time.Millisecond))
	})
	t.Run("delay 100ms each way (netem)", func(t *testing.T) {
		f.p.netem(t, "delay", "100ms")
		defer f.p.netem(t)
		a, took := f.run(t, "echo ok", 20, nil)
		if !a.Success() || a.Stdout != "ok\n" {
			t.Errorf("outcome %q (%s), want exited 0", a.Outcome, a.Detail)
		}
		t.Logf("delay 100ms: %s in %s", a.Outcome, took.Round(time.Millisecond))
	})
	t.Run("loss 20% (nftables)", func(t *testing.T) {
		f.p.loss(t, 20)
		defer f.p.loss(t, 0)
		counts := map[sshexec.Outcome]int{}
		for range 5 {
			a, took := f.run(t, "echo ok", 10, nil)
			counts[a.Outcome]++
			switch {
			case a.Success() && a.Stdout == "ok\n":
			case a.Outcome == sshexec.DialFailed || a.Outcome == sshexec.HandshakeFailed || a.Outcome == sshexec.SessionFailed || a.Outcome == sshexec.TimedOut || a.Outcome == sshexec.ConnectionLost:
				// Lost packets can push any phase past the deadline;
				// what matters is that none reports a success it lacks.
			default:
				t.Errorf("under loss: outcome %q (%s) stdout %q", a.Outcome, a.Detail, a.Stdout)
			}
			t.Logf("loss 20%%: %s in %s", a.Outcome, took.Round(time.Millisecond))
		}
		t.Logf("loss 20%%: %v", counts)
	})
	t.Run("loss 100% mid-command (nftables)", func(t *testing.T) {
		defer f.p.loss(t, 0)
		a, took := f.run(t, "echo started; sleep 30", 4, func() { f.p.loss(t, 100) })
		if a.Outcome != sshexec.TimedOut && a.Outcome != sshexec.ConnectionLost {
			t.Errorf("outcome %q (%s), want timed_out or connection_lost", a.Outcome, a.Detail)
		}
		if a.Outcome == sshexec.TimedOut && a.Termination == sshexec.Confirmed {
			t.Errorf("termination confirmed although every packet is dropped")
		}
		t.Logf("loss 100%% mid-command: %s (%s) in %s", a.Outcome, a.Termination, took.Round(time.Millisecond))
	})
	t.Run("slow link 64 kbit/s (tbf)", func(t *testing.T) {
		f.p.slowLink(t, "64kbit")
		defer f.p.slowLink(t, "")
		// 32 KiB of output needs about 4 s at 64 kbit/s on top of the
		// handshake: it arrives whole within a 20 s deadline ...
		a, took := f.run(t, "head -c 32768 /dev/zero | tr '\\0' x", 20, nil)
		if !a.Success() || a.StdoutBytes != 32768 {
			t.Errorf("outcome %q (%s), %d bytes of stdout; want exited 0 with 32768", a.Outcome, a.Detail, a.StdoutBytes)
		}
		t.Logf("slow link, 32 KiB: %s in %s", a.Outcome, took.Round(time.Millisecond))
		// ... and 256 KiB (about 33 s) cannot: the deadline ends it.
		a, took = f.run(t, "head -c 262144 /dev/zero | tr '\\0' x", 5, nil)
		if a.Outcome != sshexec.TimedOut {
			t.Errorf("outcome %q (%s), want timed_out", a.Outcome, a.Detail)
		}
		t.Logf("slow link, 256 KiB in 5 s: %s (%s) after %d bytes in %s", a.Outcome, a.Termination, a.StdoutBytes, took.Round(time.Millisecond))
	})
	t.Run("blackhole before the dial", func(t *testing.T) {
		f.p.blackhole(t, true)
		defer f.p.blackhole(t, false)
		before := connections(f.s)
		a, took := f.run(t, "echo ok", 3, nil)
		if a.Outcome != sshexec.DialFailed {
			t.Errorf("outcome %q (%s), want dial_failed", a.Outcome, a.Detail)
		}
		if got := connections(f.s) - before; got != 0 {
			t.Errorf("sshd saw %d connections through the blackhole", got)
		}
		t.Logf("blackhole: %s in %s", a.Outcome, took.Round(time.Millisecond))
	})
	t.Run("blackhole mid-command", func(t *testing.T) {
		defer f.p.blackhole(t, false)
		a, took := f.run(t, "echo started; sleep 30", 4, func() { f.p.blackhole(t, true) })
		if a.Outcome != sshexec.TimedOut && a.Outcome != sshexec.ConnectionLost {
			t.Errorf("outcome %q (%s), want timed_out or connection_lost", a.Outcome, a.Detail)
		}
		if a.Outcome == sshexec.TimedOut && a.Termination == sshexec.Confirmed {
			t.Errorf("termination confirmed through a blackhole")
		}
		t.Logf("blackhole mid-command: %s (%s) in %s", a.Outcome, a.Termination, took.Round(time.Millisecond))
	})
	f.g.stop(0x0f)
	f.g.verify()
}
