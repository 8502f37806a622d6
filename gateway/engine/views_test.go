package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/api"
)

// TestRunViewShowsWhatReviewersJudge: the run's view carries the API's
// view and, beyond it, the decision, the limits as texts and the anchor's
// warnings worded for a reviewer.
func TestRunViewShowsWhatReviewersJudge(t *testing.T) {
	ended := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := approvals.Run{ID: "run_00000000000000000000000000000001", State: approvals.RunEnded, Requester: "alice",
		Explicit: true, DecidedBy: "bob", Reason: "release", MaxActions: 3, Actions: 2,
		Scope:   []approvals.Scope{{Target: "db"}, {Target: "web", Account: "deploy"}},
		EndedAt: ended, EndReason: approvals.EndRevoked, EndedBy: "bob", EndNote: "done",
		Anchor: &approvals.Process{ProcStat: approvals.ProcStat{ID: approvals.ProcessID{PID: 42, StartTime: 7}, Comm: "agent"},
			Chain:    []approvals.ProcStat{{ID: approvals.ProcessID{PID: 1}, Comm: "init", Exe: "/sbin/init"}},
			Warnings: []string{approvals.WarnExeGone, approvals.WarnSessionAnchor}},
	}
	got := runView(r)
	want := Run{Run: apiRun(r), Explicit: true, DecidedBy: "bob", Reason: "release", MaxActions: 3,
		Scope: []string{"db", "deploy@web"}, EndedAt: ended,
		AnchorWarnings: []string{approvals.WarningText(approvals.WarnExeGone), approvals.WarningText(approvals.WarnSessionAnchor)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runView (-want +got):\n%s", diff)
	}
	if got.Kind != api.RunLocal || got.EndReason != "revoked" || got.Anchor.Covers != 0 || len(got.Anchor.Parents) != 1 {
		t.Errorf("the API's view: %+v", got.Run)
	}
	for state, ended := range map[approvals.RunState]bool{approvals.RunPending: false, approvals.RunApproved: false,
		approvals.RunDenied: true, approvals.RunEnded: true, approvals.RunExpired: true} {
		if v := runView(approvals.Run{State: state}); v.Ended() != ended || v.Ended() != state.Terminal() {
			t.Errorf("a %s run: Ended() = %t, want %t", state, v.Ended(), ended)
		}
	}
}

// TestRequestViewSaysItsKindAndStatus: a request's view says whether it
// asks for a run and whether it waits.
func TestRequestViewSaysItsKindAndStatus(t *testing.T) {
	for _, tc := range []struct {
		kind            approvals.Kind
		status          approvals.Status
		forRun, pending bool
	}{
		{approvals.KindRun, approvals.StatusPending, true, true},
		{approvals.KindCall, approvals.StatusPending, false, true},
		{approvals.KindCall, approvals.StatusApproved, false, false},
		{approvals.KindRun, approvals.StatusExpired, true, false},
	} {
		q := Request{Approval: approvalView(approvals.Request{Kind: tc.kind, Status: tc.status})}
		if q.ForRun() != tc.forRun || q.Pending() != tc.pending {
			t.Errorf("%s %s: ForRun %t, Pending %t; want %t, %t", tc.kind, tc.status, q.ForRun(), q.Pending(), tc.forRun, tc.pending)
		}
	}
}
