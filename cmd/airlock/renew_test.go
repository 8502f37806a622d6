package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
)

// e2eRunRenews: an agent under airlock run (a local anchor that lives on)
// whose run approval ran out is not a dead end: airlock-ssh's next action
// asks for a renewal of the run — approvals list names the run it renews,
// in its table and in --json — and, approved, runs in the new run; the
// anchor process is the same.
func e2eRunRenews(t *testing.T, d *daemon) {
	airlock, _ := binaries(t)
	gate := filepath.Join(t.TempDir(), "go-on")
	var out bytes.Buffer
	a := d.agent(airlock + " run -- sh -c 'airlock-ssh box echo before; while [ ! -e " + gate + " ]; do sleep 0.1; done; airlock-ssh box echo after'")
	a.Stdout, a.Stderr = &out, &out
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	first := d.pending(1)[0]
	if _, errs, code := d.cli("approvals", "approve", first.ID, "--ttl", "1s"); code != 0 {
		t.Fatalf("approve --ttl 1s: %s", errs)
	}
	// The run's approval runs out (the gateway's timer ends it), then the
	// agent acts again.
	testkit.EventuallyErr(t, func() error {
		got, errs, code := d.cli("runs", "list", "--json")
		if code != 0 {
			return testkit.Stop(errors.New("runs list: " + errs))
		}
		if strings.Contains(got, first.RunID) {
			return errors.New("the run is still active")
		}
		return nil
	}, "the run's approval to run out")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	renewal := d.pending(1)[0]
	if renewal.Kind != "run" || renewal.Renews != first.RunID || renewal.RunID == first.RunID {
		t.Fatalf("renewal request = %+v; want a run request of a new run that renews %s", renewal, first.RunID)
	}
	if table, _, _ := d.cli("approvals", "list"); !strings.Contains(table, renewal.ID+" renews run "+first.RunID) {
		t.Errorf("approvals list does not say what the request renews:\n%s", table)
	}
	if show, _, _ := d.cli("approvals", "show", renewal.ID); !strings.Contains(show, "run "+first.RunID+": its approval ran out") {
		t.Errorf("approvals show does not say what the request renews:\n%s", show)
	}
	if _, errs, code := d.cli("approvals", "approve", renewal.ID); code != 0 {
		t.Fatalf("approve the renewal: %s", errs)
	}
	if err := waitBounded(t, a); err != nil {
		t.Fatalf("agent: %v\n%s", err, out.String())
	}
	if got := out.String(); !strings.Contains(got, "before\n") || !strings.Contains(got, "after\n") {
		t.Errorf("agent output %q; want both actions to run", got)
	}
	var run api.Run
	got, _, _ := d.cli("runs", "list", "--all", "--json")
	var runs []api.Run
	json.Unmarshal([]byte(got), &runs)
	for _, r := range runs {
		if r.ID == renewal.RunID {
			run = r
		}
	}
	if run.Renews != first.RunID || run.Anchor == nil {
		t.Errorf("the renewal run = %+v; want one of the same anchor that renews %s", run, first.RunID)
	}
}
