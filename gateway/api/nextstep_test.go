package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"
)

// ranNothing says whether an action's facts prove that no command ran on
// the target: it never reached one, or its termination says it never
// started.
func ranNothing(a *Action) bool {
	switch a.Outcome {
	case sshexec.Rejected, sshexec.Denied, sshexec.Expired, sshexec.DialFailed, sshexec.HandshakeFailed,
		sshexec.HostKeyUnknown, sshexec.HostKeyMismatch, sshexec.HostKeyRevoked, sshexec.AuthFailed, sshexec.SessionFailed:
		return true
	case sshexec.AuditUnavailable:
		return a.StartedAt == nil
	}
	return a.Termination == sshexec.NotStarted
}

// TestNextStepRetriesOnlyWhatNeverRan: next_step.retry is "yes" only for an
// action that cannot have run in part; whatever else may have run is
// "after_check" or "no". A timed-out command whose kill was confirmed ran
// until it was killed, as a cancelled one did.
func TestNextStepRetriesOnlyWhatNeverRan(t *testing.T) {
	now := time.Now()
	one := 1
	for _, o := range sshexec.Outcomes() {
		for _, term := range []sshexec.Termination{0, sshexec.NotStarted, sshexec.Confirmed, sshexec.Unconfirmed} {
			for _, started := range []*time.Time{nil, &now} {
				a := &Action{Outcome: o, Termination: term, StartedAt: started, TimeoutS: 30}
				if o == sshexec.Exited {
					a.ExitCode = &one
				}
				s := NextStepOf(a)
				if s != nil && s.Retry == RetryYes && !ranNothing(a) {
					t.Errorf("%s (termination %s, started %v): retry %q, though it may have run: %q", o, term, started != nil, s.Retry, s.Text)
				}
			}
		}
	}
}

// TestNextStepTimedOut: a timed-out command that started may have run in
// part whether or not its kill was confirmed; the text says what to check
// and names the timeout it had, but no one client's flag (the action
// object does not say which client asked).
func TestNextStepTimedOut(t *testing.T) {
	for _, c := range []struct {
		name      string
		term      sshexec.Termination
		retry     string
		wantWords []string
	}{
		{"kill confirmed", sshexec.Confirmed, RetryAfterCheck, []string{"30s", "may have run in part", "check its effects", "longer timeout", "end confirmed"}},
		{"kill unconfirmed", sshexec.Unconfirmed, RetryAfterCheck, []string{"30s", "may have run in part", "may still be running"}},
		{"never started", sshexec.NotStarted, RetryYes, []string{"nothing ran"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NextStepOf(&Action{Outcome: sshexec.TimedOut, Termination: c.term, TimeoutS: 30})
			if s == nil || s.Retry != c.retry || s.Who != WhoAgent {
				t.Fatalf("next step %+v, want retry %q by %q", s, c.retry, WhoAgent)
			}
			for _, w := range c.wantWords {
				if !strings.Contains(s.Text, w) {
					t.Errorf("text %q does not say %q", s.Text, w)
				}
			}
			for _, flag := range []string{"--timeout", "timeout_s"} {
				if strings.Contains(s.Text, flag) {
					t.Errorf("text %q names %s, though the action does not say which client asked", s.Text, flag)
				}
			}
		})
	}
}

// TestNextStepTextIsTheGateways: the text printed for an action is the
// next step the gateway sent with it (which knows that a reviewer stopped
// it), and NextStepOf only for an object without one.
func TestNextStepTextIsTheGateways(t *testing.T) {
	sent := &NextStepInfo{Retry: RetryNo, Who: WhoReviewer, Text: "a reviewer stopped this action"}
	a := &Action{Outcome: sshexec.Cancelled, Termination: sshexec.Confirmed, NextStep: sent}
	if got := NextStep(a); got != sent.Text {
		t.Errorf("NextStep = %q, want the gateway's %q", got, sent.Text)
	}
	a.NextStep = nil
	if got, want := NextStep(a), NextStepOf(a).Text; got != want {
		t.Errorf("NextStep without the gateway's = %q, want %q", got, want)
	}
}

// TestNextStepFailedTransfer: a failed put or get points at its detail
// (why the target refused it), not at output it does not have.
func TestNextStepFailedTransfer(t *testing.T) {
	one := 1
	a := &Action{Outcome: sshexec.Exited, ExitCode: &one, Transfer: &Transfer{Direction: "put", Path: "/srv/x"}}
	s := NextStepOf(a)
	if s == nil || s.Retry != RetryAfterCheck || !strings.Contains(s.Text, "detail") || strings.Contains(s.Text, "output") {
		t.Errorf("next step of a failed put: %+v", s)
	}
}

// TestApprovalModeOmittedWhenNoneApplied: an action rejected before it
// named a configured account had no approval mode, and its approval
// object says none rather than an empty one; a mode that applied is sent.
func TestApprovalModeOmittedWhenNoneApplied(t *testing.T) {
	for _, c := range []struct {
		name string
		info ApprovalInfo
		want string
	}{
		{"none applied", ApprovalInfo{}, `{}`},
		{"run", ApprovalInfo{Mode: ModeRun, ID: "apr_1"}, `{"mode":"run","id":"apr_1"}`},
	} {
		b, err := json.Marshal(&Action{Outcome: sshexec.Rejected, Approval: c.info})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Approval json.RawMessage `json:"approval"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.Approval) != c.want {
			t.Errorf("%s: approval %s, want %s", c.name, got.Approval, c.want)
		}
	}
}
