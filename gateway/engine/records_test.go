package engine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// Every record the engine writes is one auditchain accepts, and reads
// back as it was written: the field names live in the struct tags only.
func TestRecordsRoundTrip(t *testing.T) {
	pid, uid, code := int64(4242), int64(1000), int64(3)
	note, reason, yes := "enough", "looks fine", true
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		kind auditchain.Kind
		rec  any
		back func() any // a pointer to decode into
	}{
		{"gateway.started", auditchain.KindGatewayStarted, &gatewayStarted{PID: 1, Host: "h", Version: "v"}, func() any { return new(gatewayStarted) }},
		{"gateway.stopped", auditchain.KindGatewayStopped, &gatewayStopped{PID: 1}, func() any { return new(gatewayStopped) }},
		{"config.loaded", auditchain.KindConfigLoaded, &configLoaded{Path: "/etc/airlock.hcl", SHA256: "ab", Targets: 2}, func() any { return new(configLoaded) }},
		{"action.requested over the socket", auditchain.KindActionRequested, &actionRequested{Target: "t", Account: "a", Command: "uptime", TimeoutS: 60,
			Transport: "socket", PeerPID: &pid, PeerUID: &uid}, func() any { return new(actionRequested) }},
		{"action.requested over HTTP", auditchain.KindActionRequested, &actionRequested{Target: "t", Command: "uptime", Transport: "http", RemoteAddr: "10.0.0.1:5"},
			func() any { return new(actionRequested) }},
		{"action.connecting with a certificate", auditchain.KindActionConnecting, &actionConnecting{Address: "10.0.0.5:22", Account: "a", Credential: "ca",
			Cert: &certIssued{KeyID: "airlock:act_x", Serial: 7, ValidBefore: at}}, func() any { return new(actionConnecting) }},
		{"action.finished before a connection", auditchain.KindActionFinished, &actionFinished{Outcome: sshexec.Denied, Detail: "no",
			Approval: &approvalFacts{ID: "apr_x", Mode: api.ModeCall}, DecidedBy: "alice", ApprovalReason: reason}, func() any { return new(actionFinished) }},
		{"action.finished with a result", auditchain.KindActionFinished, &actionFinished{Outcome: sshexec.TimedOut, Detail: "late", Termination: sshexec.Confirmed,
			Stdout: &auditchain.Blob{Size: 9, Stored: 9}, Stderr: &auditchain.Blob{},
			Result:       &connResult{StdoutReceived: 9, HostKeyType: "ssh-ed25519", TotalUS: 5, ExitCode: &code, Signal: "KILL", CoreDumped: new(bool)},
			RecordedLate: true}, func() any { return new(actionFinished) }},
		{"run.created of a local run", auditchain.KindRunCreated, &runEvent{RunState: approvals.RunPending, Requester: "dev",
			Anchor: &anchorFacts{PID: 10, StartTime: 99, Exe: "/usr/bin/agent", UID: 1000, Argv: `"agent"`}}, func() any { return new(runEvent) }},
		{"run.approved", auditchain.KindRunApproved, &runEvent{RunState: approvals.RunApproved, Requester: "dev", ExpiresAt: at, MaxActions: &pid},
			func() any { return new(runEvent) }},
		{"run.ended by a reviewer", auditchain.KindRunEnded, &runEvent{RunState: approvals.RunEnded, Requester: "dev", EndReason: approvals.EndRevoked,
			EndedBy: "alice", EndNote: &note}, func() any { return new(runEvent) }},
		{"approval.decided", auditchain.KindApprovalDecided, &runEvent{RunState: approvals.RunApproved, Requester: "dev",
			Request: &requestFacts{ID: "apr_x", Kind: approvals.KindCall, Status: approvals.StatusApproved, Target: "t", Account: "a",
				Command: "uptime", TimeoutS: 60, Digest: approvals.Digest{1}, DecidedBy: "alice", Reason: &reason}}, func() any { return new(runEvent) }},
		{"output.read", auditchain.KindOutputRead, &outputRead{Reviewer: "alice", Via: "web", StdoutSHA256: &[32]byte{1}, StdoutStored: &code},
			func() any { return new(outputRead) }},
		{"auth.failed", auditchain.KindAuthFailed, &authFailed{Credential: "run_token", Subject: "run-token:10.0.0.1", Failures: 10, Blocked: yes},
			func() any { return new(authFailed) }},
		{"token.rotated", auditchain.KindTokenRotated, &tokenRotated{ConnectionsCut: 2}, func() any { return new(tokenRotated) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, ok := tt.rec.(record); ok && r.kind() != tt.kind {
				t.Errorf("kind %v, want %v", r.kind(), tt.kind)
			}
			f, err := auditchain.FieldsOf(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := auditchain.EncodeLeaf(auditchain.Entry{Kind: tt.kind, Fields: f})
			if err != nil {
				t.Fatalf("the log refuses it: %v", err)
			}
			e, err := auditchain.DecodeLeaf(leaf)
			if err != nil {
				t.Fatal(err)
			}
			back := tt.back()
			if err := e.Decode(back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rec, back); diff != "" {
				t.Errorf("read back (-written +read):\n%s", diff)
			}
		})
	}
}

// Every event of the approvals store has an audit kind of its own name.
func TestEveryApprovalEventHasAnAuditKind(t *testing.T) {
	n := 0
	for k := approvals.EventKind(1); ; k++ {
		name, err := k.MarshalText()
		if err != nil {
			break // past the last
		}
		n++
		if _, err := auditchain.ParseKind(string(name)); err != nil {
			t.Errorf("approvals event %s: %v", name, err)
		}
	}
	if n == 0 {
		t.Fatal("no event kinds")
	}
}
