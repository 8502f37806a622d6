package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// driftWarning and driftCleared are how a replica's log says it sees
// configuration drift, and no more.
const (
	driftWarning = "configuration drift: live replicas enforce another configuration"
	driftCleared = "configuration drift cleared"
)

// Three replicas on one database with the same configuration agree; one
// reloaded with another approval mode is flagged in every replica's
// /metrics and log (once, not at each renewal) and by storage status,
// text and --json, against the two that agree; reloaded with the same
// file again, the flag clears everywhere.
func TestStorageStatusConfigDrift(t *testing.T) {
	s := sshtest.NewSSHD(t, sshtest.Options{})
	dsn := pgtest.Shared(t).NewDatabase(t)
	ds := replicas(t, s, dsn, 3, "run", "")
	a, b, c := ds[0], ds[1], ds[2]

	st := waitStatus(t, a.cfgFile, func(st statusJSON) error {
		if len(st.Replicas) != 3 || st.Drift || st.Reference != st.File.ConfigDigest {
			return fmt.Errorf("want 3 replicas agreeing on this file's digest")
		}
		return nil
	})
	if len(st.SharedKeys) == 0 || st.CheckpointVerifier == "" || st.SchemaVersions["replicas"] < 2 {
		t.Errorf("keys and versions: %+v", st)
	}
	same := st.File.ConfigDigest
	for _, d := range ds {
		waitDrift(t, d, 0, same)
	}

	// B reloads a file whose account asks every call.
	good, err := os.ReadFile(b.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(good), `approval = "run"`, `approval = "call"`, 1)
	if edited == string(good) {
		t.Fatalf("no approval mode to change in:\n%s", good)
	}
	reload(t, b, edited)
	st = waitStatus(t, a.cfgFile, func(st statusJSON) error {
		if !st.Drift || st.Reference != same {
			return fmt.Errorf("want B drifting from the majority's %s", same)
		}
		return nil
	})
	other := ""
	for _, r := range st.Replicas {
		isB := r.PID == int64(b.PID())
		if r.Drift != isB || r.MatchesFile == isB {
			t.Errorf("replica %s (pid %d, B is %d): drift %v, matches the file %v", r.ID, r.PID, b.PID(), r.Drift, r.MatchesFile)
		}
		if isB {
			other = r.ConfigDigest
		}
	}
	out, errs, code := runCLIEnv(t, nil, "storage", "status", "--config", a.cfgFile)
	if code != exitDamaged || !strings.Contains(out, "DRIFT: differs from the majority's "+same[:12]) ||
		!strings.Contains(out, "1 of 3 live replicas differ") || strings.Count(out, "same as this file") != 2 {
		t.Errorf("storage status with B drifting: exit %d\n%s%s", code, out, errs)
	}
	waitDrift(t, a, 1, same)
	waitDrift(t, c, 1, same)
	waitDrift(t, b, 2, other)
	// The warning is said once per change, not at each renewal (every
	// 500ms with this lease): let a few pass.
	time.Sleep(2 * time.Second)
	for name, d := range map[string]*daemon{"A": a, "B": b, "C": c} {
		if n := strings.Count(d.logText(), driftWarning); n != 1 {
			t.Errorf("%s logged the drift %d times, want once:\n%s", name, n, gatewaytest.Tail(d.logText(), 3000))
		}
	}

	// B reloads the same file as the others again.
	reload(t, b, string(good))
	waitStatus(t, a.cfgFile, func(st statusJSON) error {
		if st.Drift || st.Reference != same {
			return fmt.Errorf("want no drift")
		}
		return nil
	})
	for _, d := range ds {
		waitDrift(t, d, 0, same)
		testkit.EventuallyErr(t, func() error {
			if !strings.Contains(d.logText(), driftCleared) {
				return fmt.Errorf("not in the log:\n%s", gatewaytest.Tail(d.logText(), 2000))
			}
			return nil
		}, "the drift cleared in the log")
	}
	if out, errs, code := runCLIEnv(t, nil, "storage", "status", "--config", a.cfgFile); code != exitOK ||
		!strings.Contains(out, "every live replica enforces "+same[:12]) || strings.Contains(out, "DRIFT") {
		t.Errorf("storage status after B's second reload: exit %d\n%s%s", code, out, errs)
	}
}

// reload writes src to d's configuration file and reloads it.
func reload(t *testing.T, d *daemon, src string) {
	t.Helper()
	if err := os.WriteFile(d.cfgFile, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := d.cli("config", "reload"); code != 0 {
		t.Fatalf("config reload: exit %d: %s %s", code, out, errs)
	}
}

// waitStatus runs storage status --json with cfgFile until ok accepts
// what it says.
func waitStatus(t *testing.T, cfgFile string, ok func(statusJSON) error) statusJSON {
	t.Helper()
	var st statusJSON
	testkit.EventuallyErr(t, func() error {
		out, errs, code := runCLIEnv(t, nil, "storage", "status", "--config", cfgFile, "--json")
		if code == exitFailed {
			t.Fatalf("storage status: %s", errs)
		}
		st = statusJSON{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("storage status --json: %v\n%s", err, out)
		}
		if (code == exitDamaged) != st.Drift {
			t.Fatalf("storage status: exit %d with drift %v", code, st.Drift)
		}
		if err := ok(st); err != nil {
			return fmt.Errorf("%v; storage status said:\n%s", err, out)
		}
		return nil
	}, "storage status")
	return st
}

// waitDrift waits until d's /metrics counts n drifting peers and names
// digest as its configuration's.
func waitDrift(t *testing.T, d *daemon, n int, digest string) {
	t.Helper()
	testkit.EventuallyErr(t, func() error {
		m := scrape(t, d.HTTPURL+"/metrics")
		if got := m["airlock_replicas_config_drift"]; got != float64(n) {
			return fmt.Errorf("airlock_replicas_config_drift %v, want %d", got, n)
		}
		if got := m[`airlock_config_digest_info{digest="`+digest[:12]+`"}`]; got != 1 {
			return fmt.Errorf("airlock_config_digest_info for %s is %v, want 1", digest[:12], got)
		}
		return nil
	}, "the drift metrics")
}

// scrape reads the samples of a Prometheus text page, by series.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
