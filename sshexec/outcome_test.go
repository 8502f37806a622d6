package sshexec_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/outcome"
)

// contractOutcomes is the contract's outcome table, in order. The names
// are persisted: this list may only grow at the end.
var contractOutcomes = []string{
	"rejected", "denied", "expired", "audit_unavailable", "dial_failed",
	"handshake_failed", "host_key_unknown", "host_key_mismatch",
	"host_key_revoked", "auth_failed", "session_failed", "exited", "signaled",
	"exit_missing", "timed_out", "cancelled", "connection_lost", "interrupted",
}

func TestOutcomeNamesMatchTheContract(t *testing.T) {
	var got []string
	for _, o := range sshexec.Outcomes() {
		got = append(got, o.String())
	}
	if diff := cmp.Diff(contractOutcomes, got); diff != "" {
		t.Fatalf("outcome names (-want +got):\n%s", diff)
	}
}

func TestOutcomeText(t *testing.T) {
	for _, name := range contractOutcomes {
		o, err := outcome.ParseOutcome(name)
		if err != nil {
			t.Fatalf("ParseOutcome(%q): %v", name, err)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", o, err)
		}
		var back sshexec.Outcome
		if err := json.Unmarshal(b, &back); err != nil || back != o {
			t.Fatalf("round trip of %s: got %v, %v", b, back, err)
		}
	}
	for _, bad := range []string{"", "Exited", "exited ", "success", "ok", "timeout"} {
		if _, err := outcome.ParseOutcome(bad); err == nil {
			t.Errorf("ParseOutcome(%q) accepted an unknown name", bad)
		}
	}
	var zero sshexec.Outcome
	if _, err := json.Marshal(zero); err == nil {
		t.Error("the zero Outcome marshalled; it must never be written as a result")
	}
}

func TestTerminationText(t *testing.T) {
	for _, name := range []string{"not_started", "confirmed", "unconfirmed"} {
		v, err := outcome.ParseTermination(name)
		if err != nil || v.String() != name {
			t.Errorf("ParseTermination(%q) = %v, %v", name, v, err)
		}
	}
	if _, err := outcome.ParseTermination("killed"); err == nil {
		t.Error("ParseTermination accepted an unknown name")
	}
	var zero sshexec.Termination
	if zero.String() != "" {
		t.Errorf("zero Termination String() = %q, want empty (no termination applies)", zero.String())
	}
}
