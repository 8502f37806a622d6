package testkit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a failure instead of failing the test that uses it, so
// that the kit's failure path can be tested.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeTB in a goroutine of its own (Fatalf ends it, as
// the testing package's does) and returns the failure message, "" if none.
func run(fn func(tb testing.TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.failed
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	failed := run(func(tb testing.TB) {
		Eventually(tb, func() bool { return calls.Add(1) >= 3 }, "never three")
	})
	if failed != "" {
		t.Fatalf("Eventually failed: %s", failed)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("condition called %d times, want 3", got)
	}
}

func TestPollGivesUpAfterTheTimeout(t *testing.T) {
	start := time.Now()
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("Poll gave up after %v, before its timeout", waited)
	}
}

func TestEventuallyFailsWithTheMessage(t *testing.T) {
	// Eventually with a short timeout in place of Patience.
	failed := run(func(tb testing.TB) {
		eventually(tb, 20*time.Millisecond, func() bool { return false }, "%d sessions left", 2)
	})
	if !strings.Contains(failed, "2 sessions left") {
		t.Errorf("failure %q does not carry the message", failed)
	}
}

func TestEventuallyErrFailsWithTheLastError(t *testing.T) {
	last := errors.New("still 2 sessions")
	failed := run(func(tb testing.TB) {
		EventuallyErr(tb, func() error { return Stop(last) }, "sessions to end")
	})
	for _, want := range []string{"sessions to end", "still 2 sessions"} {
		if !strings.Contains(failed, want) {
			t.Errorf("failure %q does not say %q", failed, want)
		}
	}
}

func TestPollErrReturnsTheLastErrorAfterTheTimeout(t *testing.T) {
	n := 0
	err := PollErr(30*time.Millisecond, func() error { n++; return fmt.Errorf("try %d", n) })
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("try %d", n)) {
		t.Errorf("PollErr = %v, want the last error (try %d)", err, n)
	}
}

func TestStopEndsPollingAtOnce(t *testing.T) {
	gone := errors.New("child exited")
	calls := 0
	err := PollErr(time.Hour, func() error { calls++; return Stop(gone) })
	if !errors.Is(err, gone) {
		t.Errorf("PollErr = %v, want %v", err, gone)
	}
	if calls != 1 {
		t.Errorf("condition called %d times after Stop, want 1", calls)
	}
}

func TestOnPortTriesAnotherPortWhenTaken(t *testing.T) {
	var tried []int
	port, err := OnPort(func(p int) error {
		tried = append(tried, p)
		if len(tried) < 3 {
			return fmt.Errorf("child: %w", ErrPortInUse)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tried) != 3 || port != tried[2] {
		t.Errorf("OnPort = %d after %v, want the third port tried", port, tried)
	}
	for _, p := range tried {
		if p < lowPort || p >= highPort {
			t.Errorf("port %d outside [%d, %d)", p, lowPort, highPort)
		}
	}
}

func TestOnPortStopsAtAnotherError(t *testing.T) {
	broken := errors.New("bad configuration")
	calls := 0
	if _, err := OnPort(func(int) error { calls++; return broken }); !errors.Is(err, broken) || calls != 1 {
		t.Errorf("OnPort = %v after %d calls, want %v after 1", err, calls, broken)
	}
}

func TestPortInUse(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      bool
	}{
		{"sshd", "Bind to port 20001 on 127.0.0.1 failed: Address already in use.", true},
		{"postgres", `LOG:  could not bind IPv4 address "127.0.0.1": Address already in use`, true},
		{"go", "listen tcp 127.0.0.1:20001: bind: address already in use", true},
		{"another failure", "Missing privilege separation directory: /run/sshd", false},
	} {
		if got := PortInUse(tc.log); got != tc.want {
			t.Errorf("%s: PortInUse = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestListeningAddrsFindsAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addrs, err := ListeningAddrs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(addrs, l.Addr().String()) {
		t.Errorf("ListeningAddrs = %v, want %s among them", addrs, l.Addr())
	}
}

func TestParseProcAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0100007F:1F90", "127.0.0.1:8080"},
		{"00000000000000000000000001000000:0016", "[::1]:22"},
	} {
		if got, err := parseProcAddr(tc.in); err != nil || got != tc.want {
			t.Errorf("parseProcAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseProcAddr("nonsense"); err == nil {
		t.Error("parseProcAddr(nonsense) succeeded")
	}
}
