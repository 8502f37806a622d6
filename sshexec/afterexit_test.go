package sshexec_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// dribble writes n lines to the channel, one every gap, and stops early
// when the client goes away.
func dribble(e *sshtest.Exec, n int, gap time.Duration) {
	for i := range n {
		select {
		case <-time.After(gap):
		case <-e.Done:
			return
		}
		fmt.Fprintf(e.Channel, "line %d\n", i)
	}
}

func dribbled(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// An exit report may come before the output is all there: sshd sends it
// when the command ends, and a slow link still carries what the command
// wrote before. Run waits for the output's end as long as it keeps
// arriving; output cut by a broken or silent link after the report, or by
// the deadline, is never an "exited" outcome that looks complete.
func TestOutputAfterTheExitReport(t *testing.T) {
	t.Parallel()
	const grace = 500 * time.Millisecond
	tests := []afterExitCase{{
		name: "output arriving for longer than the grace after the exit status",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "start\n")
			e.ExitStatus(0)
			dribble(e, 12, grace/10)
			e.Channel.CloseWrite()
		},
		want: sshexec.Exited, stdout: "start\n" + dribbled(12), detail: "=exited",
	}, {
		name: "output ended and the channel left open",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "all\n")
			e.Channel.CloseWrite()
			e.ExitStatus(0)
			<-e.Done
		},
		want: sshexec.Exited, stdout: "all\n", detail: "=exited", atLeast: grace,
	}, {
		name: "output held open after the exit status, the link alive",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "hi\n")
			e.ExitStatus(0)
			<-e.Done
		},
		want: sshexec.Exited, stdout: "hi\n", detail: "kept the output open", atLeast: grace,
	}, {
		name: "the connection dropped after the exit status, before the output's end",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "part\n")
			e.ExitStatus(42)
			time.Sleep(50 * time.Millisecond)
			e.Drop()
		},
		want: sshexec.ConnectionLost, stdout: "part\n", detail: "did not finish arriving",
	}, {
		name: "the link went silent after the exit status",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "part\n")
			e.ExitStatus(0)
			time.Sleep(50 * time.Millisecond)
			e.Stall()
			io.WriteString(e.Channel, "lost\n")
		},
		want: sshexec.ConnectionLost, stdout: "part\n", detail: "did not finish arriving", atLeast: 2 * grace,
	}, {
		name: "a thin link: each packet takes longer than the grace to arrive, its bytes do not",
		exec: func(e *sshtest.Exec) {
			e.ExitStatus(0)
			e.Throttle(grace / 5) // per write of the server's transport: a few KiB
			for range 4 {
				e.Channel.Write(bytes.Repeat([]byte("y"), 32<<10))
			}
			e.Channel.CloseWrite()
		},
		want: sshexec.Exited, stdout: strings.Repeat("y", 4*32<<10), detail: "=exited",
	}, {
		name: "output still arriving at the deadline, after the exit status",
		exec: func(e *sshtest.Exec) {
			io.WriteString(e.Channel, "start\n")
			e.ExitStatus(0)
			dribble(e, 1000, grace/5)
		},
		timeout: 1500 * time.Millisecond,
		want:    sshexec.TimedOut, termination: sshexec.Confirmed, detail: "while the output was still arriving",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkAfterExit(t, tt, grace)
		})
	}
}

// afterExitCase is a case of TestOutputAfterTheExitReport.
type afterExitCase struct {
	name        string
	exec        func(e *sshtest.Exec)
	timeout     time.Duration
	want        sshexec.Outcome
	termination sshexec.Termination
	stdout      string
	detail      string // a part of the detail; "=…" the whole of it
	atLeast     time.Duration
}

// checkAfterExit runs one case of TestOutputAfterTheExitReport.
func checkAfterExit(t *testing.T, tt afterExitCase, grace time.Duration) {
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: tt.exec})
	cfg := faultConfig(f)
	cfg.KillGrace = grace
	if tt.timeout != 0 {
		cfg.Timeout = tt.timeout
	}
	res, _ := sshexec.Run(context.Background(), cfg, "anything")
	if res == nil {
		t.Fatal("no result")
	}
	if res.Outcome != tt.want || res.Termination != tt.termination {
		t.Fatalf("outcome %v/%q (%s), want %v/%q", res.Outcome, res.Termination, res.Detail, tt.want, tt.termination)
	}
	if tt.stdout != "" && string(res.Stdout) != tt.stdout {
		t.Errorf("stdout %q, want %q", res.Stdout, tt.stdout)
	}
	if exact, ok := strings.CutPrefix(tt.detail, "="); ok && res.Detail != exact || !ok && !strings.Contains(res.Detail, tt.detail) {
		t.Errorf("detail %q, want %q", res.Detail, tt.detail)
	}
	if !res.HasExitCode {
		t.Errorf("the exit status the server reported is not kept")
	}
	if tt.want != sshexec.Exited && res.Success() {
		t.Errorf("%v counts as success", res.Outcome)
	}
	if res.Timings.Total < tt.atLeast {
		t.Errorf("Run took %s, less than %s", res.Timings.Total, tt.atLeast)
	}
	limit := 10 * time.Second
	if tt.timeout != 0 {
		// After the report nothing is killed: no grace past the
		// deadline.
		limit = tt.timeout + grace
	}
	if res.Timings.Total > limit {
		t.Errorf("Run took %s, over %s", res.Timings.Total, limit)
	}
}

// Against a real sshd: a command that leaves a background process
// holding its output ends as exited soon after the shell's exit status,
// and says that later output was not collected; one that leaves a
// background process writing to it runs into its deadline, told as
// output still arriving, with the shell's exit status kept.
func TestBackgroundProcessHoldingTheOutput(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		cfg := configFor(s)
		cfg.KillGrace = 300 * time.Millisecond
		res, _ := sshexec.Run(context.Background(), cfg, "echo first; sleep 8 &")
		if res.Outcome != sshexec.Exited || res.ExitCode != 0 || string(res.Stdout) != "first\n" || !strings.Contains(res.Detail, "kept the output open") {
			t.Fatalf("outcome %v %d stdout %q (%s), want exited 0 with first and the held output told", res.Outcome, res.ExitCode, res.Stdout, res.Detail)
		}
		if res.Timings.Total > 10*time.Second {
			t.Errorf("took %s: the background process held the action", res.Timings.Total)
		}
	})
	t.Run("writing", func(t *testing.T) {
		t.Parallel()
		cfg := configFor(s)
		cfg.KillGrace = 300 * time.Millisecond
		cfg.Timeout = 3 * time.Second
		res, _ := sshexec.Run(context.Background(), cfg, "(while sleep 0.1; do echo tick; done) & exit 7")
		if res.Outcome != sshexec.TimedOut || res.Termination != sshexec.Confirmed || !res.HasExitCode || res.ExitCode != 7 ||
			!strings.Contains(res.Detail, "still arriving") {
			t.Fatalf("outcome %v/%q code %d (%s), want timed_out, confirmed, exit status 7 kept", res.Outcome, res.Termination, res.ExitCode, res.Detail)
		}
		if res.Success() {
			t.Error("counted as success")
		}
	})
}

// An Output callback that blocks (back-pressure from a slow follower)
// after the exit report is not the server's silence: every byte arrives
// and the action is exited with nothing said missing.
func TestSlowOutputCallbackAfterTheExitReport(t *testing.T) {
	t.Parallel()
	const total = 4 << 20
	f := sshtest.NewFaultServer(t, sshtest.FaultOptions{Exec: func(e *sshtest.Exec) {
		e.ExitStatus(0)
		e.Channel.Write(bytes.Repeat([]byte("x"), total))
		e.Channel.CloseWrite()
	}})
	cfg := faultConfig(f)
	cfg.KillGrace = 300 * time.Millisecond
	var once sync.Once
	cfg.Output = func(sshexec.Stream, []byte) { once.Do(func() { time.Sleep(time.Second) }) }
	res, _ := sshexec.Run(context.Background(), cfg, "anything")
	if res.Outcome != sshexec.Exited || res.StdoutBytes != total || res.Detail != "exited" {
		t.Fatalf("outcome %v, %d of %d bytes (%s)", res.Outcome, res.StdoutBytes, total, res.Detail)
	}
}
