package gateway

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// witnessRuns scrapes airlock_audit_witness_runs_total{result} from the
// gateway's /metrics, as Prometheus would.
func witnessRuns(t *testing.T, g *testGateway, result string) float64 {
	t.Helper()
	resp, err := g.httpc.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^airlock_audit_witness_runs_total\{result="` + result + `"\} (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no airlock_audit_witness_runs_total{result=%q}:\n%s", result, body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A witness_command that fails shows in /metrics as
// airlock_audit_witness_runs_total{result="failed"}, and the gateway's log
// names the command and the fix; one that works counts as result="ok".
// Every entry is checkpointed, so the gateway's first entries get a
// checkpoint signed and handed to the witness.
func TestWitnessRunsAreCounted(t *testing.T) {
	s := sharedSSHD(t)
	notes := filepath.Join(t.TempDir(), "notes.log")
	for _, tc := range []struct {
		name      string
		command   []string
		rises     string // the result that must rise
		staysZero string
	}{
		{"failing", []string{"/bin/sh", "-c", "echo witness mount missing >&2; exit 1"}, "failed", "ok"},
		{"working", []string{"/bin/sh", "-c", "cat >> " + notes}, "ok", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var quoted []string
			for _, a := range tc.command {
				quoted = append(quoted, strconv.Quote(a))
			}
			extra := fmt.Sprintf("audit {\n  checkpoint_every = \"1 entries\"\n  witness_command  = [%s]\n}\n", strings.Join(quoted, ", "))
			g := startGateway(t, s, gwOptions{extraConfig: extra})
			testkit.Eventually(t, func() bool { return witnessRuns(t, g, tc.rises) >= 1 },
				"airlock_audit_witness_runs_total{result=%q} did not rise after checkpoints were signed", tc.rises)
			if got := witnessRuns(t, g, tc.staysZero); got != 0 {
				t.Errorf("airlock_audit_witness_runs_total{result=%q} = %v, want 0", tc.staysZero, got)
			}
			logs := g.logs.String()
			if tc.rises == "failed" {
				for _, want := range []string{"witness command failed", "run the command by hand with a note on its standard input to see why", "exit 1", "witness mount missing"} {
					if !strings.Contains(logs, want) {
						t.Errorf("the gateway's log lacks %q:\n%s", want, logs)
					}
				}
				return
			}
			if strings.Contains(logs, "witness command failed") {
				t.Errorf("a working witness was logged as failing:\n%s", logs)
			}
			b, err := os.ReadFile(notes)
			if err != nil || !strings.Contains(string(b), "\n\n\u2014 ") {
				t.Errorf("the witness kept no signed note (%v): %q", err, b)
			}
		})
	}
}
