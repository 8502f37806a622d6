package approvals

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type textEnum interface {
	String() string
	MarshalText() ([]byte, error)
}

func TestEnumNames(t *testing.T) {
	// Persisted names: these must never change.
	for _, tc := range []struct {
		v    textEnum
		want string
	}{
		{ModeRun, "run"}, {ModeCall, "call"},
		{RunPending, "pending"}, {RunApproved, "approved"}, {RunDenied, "denied"}, {RunEnded, "ended"}, {RunExpired, "expired"},
		{KindRun, "run"}, {KindCall, "call"},
		{StatusPending, "pending"}, {StatusApproved, "approved"}, {StatusDenied, "denied"}, {StatusExpired, "expired"},
		{Approve, "approve"}, {Deny, "deny"},
		{EndAnchorExited, "anchor_exited"}, {EndClosed, "closed"}, {EndRevoked, "revoked"}, {EndTTL, "ttl"},
		{EndMaxActions, "max_actions"}, {EndTokenExpired, "token_expired"},
		{EventRunCreated, "run.created"}, {EventRunApproved, "run.approved"}, {EventRunDenied, "run.denied"},
		{EventRunEnded, "run.ended"}, {EventApprovalRequested, "approval.requested"}, {EventApprovalDecided, "approval.decided"},
	} {
		b, err := tc.v.MarshalText()
		if err != nil || string(b) != tc.want || tc.v.String() != tc.want {
			t.Errorf("%T %d: MarshalText %q, %v; String %q; want %q", tc.v, tc.v, b, err, tc.v.String(), tc.want)
		}
	}
}

func TestEnumRoundTripAndRejects(t *testing.T) {
	check := func(name string, parse func(string) (textEnum, error), valid []string) {
		t.Run(name, func(t *testing.T) {
			for _, s := range valid {
				v, err := parse(s)
				if err != nil {
					t.Fatalf("parse %q: %v", s, err)
				}
				if b, _ := v.MarshalText(); string(b) != s {
					t.Errorf("parse %q round-trips to %q", s, b)
				}
			}
			for _, s := range []string{"", "RUN", " run", "approved ", "unknown", "run.created\x00"} {
				if _, err := parse(s); !errors.Is(err, ErrUnknownValue) {
					t.Errorf("parse %q: err = %v, want ErrUnknownValue", s, err)
				}
			}
		})
	}
	check("mode", func(s string) (textEnum, error) { return ParseMode(s) }, []string{"run", "call"})
	check("run state", func(s string) (textEnum, error) { return ParseRunState(s) }, []string{"pending", "approved", "denied", "ended", "expired"})
	check("kind", func(s string) (textEnum, error) { return ParseKind(s) }, []string{"run", "call"})
	check("status", func(s string) (textEnum, error) { return ParseStatus(s) }, []string{"pending", "approved", "denied", "expired"})
	check("verdict", func(s string) (textEnum, error) { return parseVerdict(s) }, []string{"approve", "deny"})
	check("end reason", func(s string) (textEnum, error) { return ParseEndReason(s) },
		[]string{"anchor_exited", "closed", "revoked", "ttl", "max_actions", "token_expired"})
	check("event kind", func(s string) (textEnum, error) { return parseEventKind(s) },
		[]string{"run.created", "run.approved", "run.denied", "run.ended", "approval.requested", "approval.decided"})
}

func TestEnumInvalidValuesDoNotMarshal(t *testing.T) {
	if _, err := Mode(0).MarshalText(); err == nil {
		t.Error("Mode(0) marshalled")
	}
	if _, err := json.Marshal(struct{ K EventKind }{99}); err == nil {
		t.Error("EventKind(99) marshalled")
	}
	var v struct{ V Verdict }
	if err := json.Unmarshal([]byte(`{"V":"maybe"}`), &v); !errors.Is(err, ErrUnknownValue) {
		t.Errorf("unmarshal verdict maybe: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"V":"deny"}`), &v); err != nil || v.V != Deny {
		t.Errorf("unmarshal deny: %v %v", v.V, err)
	}
}

func FuzzParseEnums(f *testing.F) {
	for _, s := range []string{"run", "call", "pending", "approve", "run.created", "ttl", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parsers := []func(string) (textEnum, error){
			func(s string) (textEnum, error) { return ParseMode(s) },
			func(s string) (textEnum, error) { return ParseRunState(s) },
			func(s string) (textEnum, error) { return ParseKind(s) },
			func(s string) (textEnum, error) { return ParseStatus(s) },
			func(s string) (textEnum, error) { return parseVerdict(s) },
			func(s string) (textEnum, error) { return ParseEndReason(s) },
			func(s string) (textEnum, error) { return parseEventKind(s) },
		}
		for _, p := range parsers {
			v, err := p(s)
			if err != nil {
				continue
			}
			if b, err := v.MarshalText(); err != nil || string(b) != s {
				t.Errorf("parsed %q marshals as %q, %v", s, b, err)
			}
		}
	})
}

func TestRequestJSONHasContractFields(t *testing.T) {
	b, err := json.Marshal(Request{ID: "apr_1", Kind: KindCall, RunID: "run_1", Status: StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	var missing []string
	for _, k := range []string{"id", "kind", "run_id", "target", "account", "command", "requested_at", "expires_at", "requester"} {
		if _, ok := m[k]; !ok {
			missing = append(missing, k)
		}
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("missing contract fields (-want +got):\n%s", diff)
	}
	if m["kind"] != "call" {
		t.Errorf("kind = %v, want \"call\"", m["kind"])
	}
}

// parseVerdict and parseEventKind parse as UnmarshalText does: the
// gateway reads these only from JSON and from the audit log.
func parseVerdict(s string) (Verdict, error) { return enumParse(verdictNames, s, "verdict") }

func parseEventKind(s string) (EventKind, error) {
	return enumParse(eventKindNames, s, "event kind")
}
