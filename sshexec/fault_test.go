package sshexec_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/batchenv"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// Tests against the in-process fault server, for what sshd cannot be made
// to do on demand.

// hang writes line to stdout and then waits for the client to go away,
// answering a KILL with exit-signal when answerKill is set.
func hang(line string, answerKill bool) func(e *sshtest.Exec) {
	return func(e *sshtest.Exec) {
		io.WriteString(e.Channel, line)
		for {
			select {
			case sig := <-e.Signals:
				if answerKill && sig == "KILL" {
					e.ExitSignal("KILL")
					return
				}
			case <-e.Done:
				return
			}
		}
	}
}

// faultOutcome is what Run reports against a fault server with opts,
// under a deadline of timeout when it is set; an exit status, when there
// is one, is 42.
type faultOutcome struct {
	name            string
	opts            sshtest.FaultOptions
	timeout         time.Duration
	wantOutcome     sshexec.Outcome
	wantTermination sshexec.Termination
	wantSignal      string
	wantStdout      string
}

var faultOutcomes = []faultOutcome{
	{
		name:        "exit status",
		opts:        sshtest.FaultOptions{Exec: func(e *sshtest.Exec) { io.WriteString(e.Channel, "hi\n"); e.ExitStatus(42) }},
		wantOutcome: sshexec.Exited, wantStdout: "hi\n",
	},
	{
		name: "exit status but the channel left open",
		opts: sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "hi\n")
			e.ExitStatus(42)
			<-e.Done
		}},
		timeout:     time.Minute, // must end after the grace, not this
		wantOutcome: sshexec.Exited, wantStdout: "hi\n",
	},
	{
		name:        "exit signal",
		opts:        sshtest.FaultOptions{Exec: func(e *sshtest.Exec) { e.ExitSignal("SEGV") }},
		wantOutcome: sshexec.Signaled, wantSignal: "SEGV",
	},
	{
		name:        "channel closed without exit status",
		opts:        sshtest.FaultOptions{Exec: func(e *sshtest.Exec) { io.WriteString(e.Channel, "bye\n") }},
		wantOutcome: sshexec.ExitMissing, wantStdout: "bye\n",
	},
	{
		name: "channel closed without status, then TCP closed at once",
		opts: sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
			e.Channel.Close()
			time.Sleep(time.Millisecond)
			e.Drop()
		}},
		wantOutcome: sshexec.ExitMissing,
	},
	{
		name: "TCP connection dropped mid-command",
		opts: sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "working\n")
			time.Sleep(50 * time.Millisecond)
			e.Drop()
		}},
		wantOutcome: sshexec.ConnectionLost, wantStdout: "working\n",
	},
	{
		name:        "session channel refused",
		opts:        sshtest.FaultOptions{RefuseSession: true},
		wantOutcome: sshexec.SessionFailed, wantTermination: sshexec.NotStarted,
	},
	{
		name:        "exec refused",
		opts:        sshtest.FaultOptions{RefuseExec: true},
		wantOutcome: sshexec.SessionFailed, wantTermination: sshexec.NotStarted,
	},
	{
		name:        "slow version banner past the deadline",
		opts:        sshtest.FaultOptions{BannerDelay: 3 * time.Second},
		timeout:     300 * time.Millisecond,
		wantOutcome: sshexec.HandshakeFailed, wantTermination: sshexec.NotStarted,
	},
	{
		name:        "hang, KILL answered",
		opts:        sshtest.FaultOptions{Exec: hang("started\n", true)},
		timeout:     500 * time.Millisecond,
		wantOutcome: sshexec.TimedOut, wantTermination: sshexec.Confirmed, wantSignal: "KILL", wantStdout: "started\n",
	},
	{
		name:        "hang, KILL ignored",
		opts:        sshtest.FaultOptions{Exec: hang("started\n", false)},
		timeout:     500 * time.Millisecond,
		wantOutcome: sshexec.TimedOut, wantTermination: sshexec.Unconfirmed, wantStdout: "started\n",
	},
}

func TestFaultOutcomes(t *testing.T) {
	t.Parallel()
	for _, tt := range faultOutcomes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := sshtest.NewFaultServer(t, tt.opts)
			cfg := faultConfig(f)
			if tt.timeout != 0 {
				cfg.Timeout = tt.timeout
			}
			res, err := sshexec.Run(context.Background(), cfg, "anything")
			if res == nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Outcome != tt.wantOutcome || res.Termination != tt.wantTermination || res.Signal != tt.wantSignal {
				t.Fatalf("got %v/%q/%q, want %v/%q/%q (%s)", res.Outcome, res.Termination, res.Signal,
					tt.wantOutcome, tt.wantTermination, tt.wantSignal, res.Detail)
			}
			if string(res.Stdout) != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, tt.wantStdout)
			}
			var e *sshexec.Error
			switch tt.wantOutcome {
			case sshexec.Exited, sshexec.Signaled, sshexec.ExitMissing:
				if err != nil {
					t.Errorf("err = %v, want nil for a command that ran to a reported end", err)
				}
			default:
				if !errors.As(err, &e) || e.Outcome != tt.wantOutcome {
					t.Errorf("err = %v, want *Error with outcome %v", err, tt.wantOutcome)
				}
			}
			if tt.wantOutcome == sshexec.Exited && res.ExitCode != 42 {
				t.Errorf("exit code = %d, want 42", res.ExitCode)
			}
			if res.Timings.Total > 10*time.Second {
				t.Errorf("Run took %v", res.Timings.Total)
			}
			if res.Success() {
				t.Errorf("%v counted as success", res.Outcome)
			}
		})
	}
}

// A server that closes every connection before its version line — as
// sshd does past its MaxStartups limit, saying so or not — is a handshake
// failure whose detail says what the server sent, control characters
// masked.
func TestHandshakeFailedBeforeVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, sent, want string }{
		{"nothing", "", "closed the connection before sending anything"},
		{"MaxStartups", "Exceeded MaxStartups\r\n", `sent no SSH version line but "Exceeded MaxStartups"`},
		{"after a blank line", "\r\n\r\nAccess denied by policy\r\n", `sent no SSH version line but "Access denied by policy"`},
		{"control characters", "\x1b]0;owned\x07 go away\r\n", `sent no SSH version line but "?]0;owned? go away"`},
		{"not SSH at all", "HTTP/1.1 400 Bad Request\r\n\r\n", `sent no SSH version line but "HTTP/1.1 400 Bad Request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			t.Cleanup(func() { ln.Close(); wg.Wait() })
			wg.Go(func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					io.WriteString(c, tc.sent)
					c.Close()
				}
			})
			cfg := faultConfig(sshtest.NewFaultServer(t, sshtest.FaultOptions{}))
			cfg.Addr = ln.Addr().String()
			res, err := sshexec.Run(context.Background(), cfg, "true")
			var e *sshexec.Error
			if res == nil || !errors.As(err, &e) || res.Outcome != sshexec.HandshakeFailed || res.Termination != sshexec.NotStarted || res.HostKeyFingerprint != "" {
				t.Fatalf("got %+v (%v), want handshake_failed, not started, no host key", res, err)
			}
			if !strings.Contains(res.Detail, tc.want) {
				t.Errorf("detail %q, want it to contain %q", res.Detail, tc.want)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	t.Run("before exec", func(t *testing.T) {
		t.Parallel()
		f := sshtest.NewFaultServer(t, sshtest.FaultOptions{BannerDelay: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		res, err := sshexec.Run(ctx, faultConfig(f), "true")
		var e *sshexec.Error
		if !errors.As(err, &e) || res.Outcome != sshexec.Cancelled || res.Termination != sshexec.NotStarted {
			t.Fatalf("got %v/%v (%v), want cancelled/not_started", res.Outcome, res.Termination, err)
		}
		if res.Timings.Total > 2*time.Second {
			t.Errorf("cancel took %v", res.Timings.Total)
		}
	})
	t.Run("after exec", func(t *testing.T) {
		t.Parallel()
		f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: hang("started\n", true)})
		ctx, cancel := context.WithCancel(context.Background())
		cfg := faultConfig(f)
		cfg.Output = func(s sshexec.Stream, p []byte) {
			if bytes.Contains(p, []byte("started")) {
				cancel()
			}
		}
		res, err := sshexec.Run(ctx, cfg, "true")
		var e *sshexec.Error
		if !errors.As(err, &e) || res.Outcome != sshexec.Cancelled || res.Termination != sshexec.Confirmed || res.Signal != "KILL" {
			t.Fatalf("got %v/%v/%q (%v), want cancelled/confirmed/KILL", res.Outcome, res.Termination, res.Signal, err)
		}
	})
}

// TestNoForwardingEver checks both directions: we never ask for a PTY,
// agent forwarding, X11, port forwarding or a subsystem, and no
// environment but the fixed non-interactive set (package batchenv), and
// every channel or request the server sends toward us is refused.
func TestNoForwardingEver(t *testing.T) {
	t.Parallel()
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
		for _, typ := range []string{"forwarded-tcpip", "auth-agent@openssh.com", "x11", "direct-tcpip", "session"} {
			e.OpenToClient(typ, nil)
		}
		e.SendGlobal("keepalive@openssh.com")
		e.ExitStatus(0)
	}})
	res, err := sshexec.Run(context.Background(), faultConfig(f), "true")
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"channel:session"}
	for _, v := range batchenv.Vars() {
		want = append(want, "req:env:"+v.String())
	}
	want = append(want,
		"req:exec",
		"open-to-client:forwarded-tcpip:rejected",
		"open-to-client:auth-agent@openssh.com:rejected",
		"open-to-client:x11:rejected",
		"open-to-client:direct-tcpip:rejected",
		"open-to-client:session:rejected",
		"global-to-client:keepalive@openssh.com:rejected",
	)
	if diff := cmp.Diff(want, f.Seen()); diff != "" {
		t.Errorf("what the server saw (-want +got):\n%s", diff)
	}
}

// TestLargeOutputIsBounded sends 100 MiB on stdout under the default 8 MiB
// cap: the command is never blocked, the counts are exact, and memory stays
// bounded.
func TestLargeOutputIsBounded(t *testing.T) {
	t.Parallel()
	const (
		total      = 100 << 20
		stderrSize = 3 << 20
	)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
		var wg sync.WaitGroup
		wg.Go(func() {
			for sent := 0; sent < stderrSize; sent += len(chunk) {
				if _, err := e.Channel.Stderr().Write(chunk); err != nil {
					return
				}
			}
		})
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := e.Channel.Write(chunk); err != nil {
				return
			}
		}
		wg.Wait()
		e.ExitStatus(0)
	}})
	cfg := faultConfig(f)
	cfg.Timeout = 5 * time.Minute
	var streamed atomic.Int64
	cfg.Output = func(s sshexec.Stream, p []byte) { streamed.Add(int64(len(p))) }

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	res, err := sshexec.Run(context.Background(), cfg, "yes")
	close(stop)
	wg.Wait()
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v", err)
	}
	if res.StdoutBytes != total || !res.StdoutTruncated || len(res.Stdout) != sshexec.DefaultOutputLimit || cap(res.Stdout) > sshexec.DefaultOutputLimit {
		t.Errorf("stdout: %d bytes counted, %d kept (cap %d), truncated %v; want %d counted, %d kept, truncated",
			res.StdoutBytes, len(res.Stdout), cap(res.Stdout), res.StdoutTruncated, total, sshexec.DefaultOutputLimit)
	}
	if !bytes.Equal(res.Stdout[:len(chunk)], chunk) {
		t.Error("stdout does not start with the first bytes sent")
	}
	if res.StderrBytes != stderrSize || res.StderrTruncated || len(res.Stderr) != stderrSize {
		t.Errorf("stderr: %d counted, %d kept, truncated %v; want %d, all kept", res.StderrBytes, len(res.Stderr), res.StderrTruncated, stderrSize)
	}
	if got := streamed.Load(); got != total+stderrSize {
		t.Errorf("Output callback saw %d bytes, want %d", got, total+stderrSize)
	}
	// Both caps (16 MiB) plus the fault server's and x/crypto's buffers;
	// far below the 100 MiB that would be held without the cap.
	if p := peak.Load(); p > 64<<20 {
		t.Errorf("heap in use peaked at %d MiB", p>>20)
	}
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
		io.WriteString(e.Channel, strings.Repeat("x", 1000))
		io.WriteString(e.Channel.Stderr(), "short")
		e.ExitStatus(0)
	}})
	for _, tt := range []struct {
		name      string
		limit     int64
		wantKept  int
		wantTrunc bool
	}{
		{"limit below output", 100, 100, true},
		{"limit equal to output", 1000, 1000, false},
		{"negative keeps nothing", -1, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := faultConfig(f)
			cfg.OutputLimit = tt.limit
			res, err := sshexec.Run(context.Background(), cfg, "x")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) != tt.wantKept || res.StdoutTruncated != tt.wantTrunc || res.StdoutBytes != 1000 {
				t.Errorf("kept %d truncated %v counted %d, want %d %v 1000", len(res.Stdout), res.StdoutTruncated, res.StdoutBytes, tt.wantKept, tt.wantTrunc)
			}
		})
	}
}

func TestInvalidConfigDialsNothing(t *testing.T) {
	t.Parallel()
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{})
	valid := faultConfig(f)
	tests := []struct {
		name   string
		modify func(c *sshexec.Config)
	}{
		{"no address port", func(c *sshexec.Config) { c.Addr = "127.0.0.1" }},
		{"no user", func(c *sshexec.Config) { c.User = "" }},
		{"no signers", func(c *sshexec.Config) { c.Signers = nil }},
		{"no host keys at all", func(c *sshexec.Config) { c.HostKeys = sshexec.HostKeys{} }},
		{"missing known_hosts file", func(c *sshexec.Config) {
			c.HostKeys = sshexec.HostKeys{KnownHostsFiles: []string{t.TempDir() + "/missing"}}
		}},
		{"negative timeout", func(c *sshexec.Config) { c.Timeout = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := *valid
			tt.modify(&cfg)
			res, err := sshexec.Run(context.Background(), &cfg, "true")
			if !errors.Is(err, sshexec.ErrInvalidConfig) || res != nil {
				t.Fatalf("got %v, %v; want nil result and ErrInvalidConfig", res, err)
			}
		})
	}
	if seen := f.Seen(); len(seen) != 0 {
		t.Errorf("the server saw %v; an invalid config must dial nothing", seen)
	}
}

func TestStartedCallback(t *testing.T) {
	t.Parallel()
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) { e.ExitStatus(0) }})
	var calls atomic.Int32
	cfg := faultConfig(f)
	cfg.Started = func() { calls.Add(1) }
	if res, err := sshexec.Run(context.Background(), cfg, "silent"); err != nil || !res.Success() {
		t.Fatalf("Run: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Started called %d times for a command that ran, want 1", n)
	}
	refused := sshtest.NewFaultServer(t, sshtest.FaultOptions{RefuseExec: true})
	cfg = faultConfig(refused)
	cfg.Started = func() { calls.Add(1) }
	sshexec.Run(context.Background(), cfg, "x")
	if n := calls.Load(); n != 1 {
		t.Errorf("Started called %d times in all, want 1: not for a refused exec", n)
	}
}
