package systemtest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// TestAuthAbuse: guessing the local token or a reviewer's password is cut
// off with 429 after ten failures in a minute (the right secret too, for
// that minute); run tokens of another run, of an ended run, or truncated
// are refused; agent credentials never reach reviewer routes; nothing of it
// dials the target.
func TestAuthAbuse(t *testing.T) {
	g, s, _ := oneSSHD(t)
	ctl, _ := api.ReadControl(g.socket)
	body := []byte(`{"target":"box","command":"id"}`)
	const j = "application/json"

	// Requester credentials on reviewer routes: 403, before any guessing.
	remoteA, runA := g.remoteAgent()
	g.approveRun(remoteA, g.reviewer(), "box")
	conns := connections(s)
	for _, c := range []struct {
		name string
		c    *rawClient
	}{{"local token", socketRaw(g.socket, ctl.Token)}, {"run token", httpRaw(g.HTTPURL, runA.Token)}} {
		for _, route := range []struct{ method, path, body string }{
			{"GET", "/v1/approvals?state=pending", ""},
			{"POST", "/v1/approvals/apr_0/decision", `{"decision":"approve"}`},
			{"GET", "/v1/runs", ""},
			{"GET", "/v1/audit/entries?after=0", ""},
			{"GET", "/v1/audit/verify", ""},
		} {
			ct := ""
			if route.body != "" {
				ct = j
			}
			got := c.c.do(t, route.method, route.path, ct, []byte(route.body))
			if got.status != http.StatusForbidden {
				t.Errorf("%s on %s %s: status %d %s, want 403", c.name, route.method, route.path, got.status, gatewaytest.Tail(got.body, 200))
			}
		}
	}

	// Run tokens: another run's, truncated, of an ended run.
	remoteB, runB := g.remoteAgent()
	_ = remoteB
	if got := httpRaw(g.HTTPURL, runA.Token).do(t, "GET", "/v1/runs/"+runB.ID, "", nil); got.status/100 == 2 {
		t.Errorf("run A's token reads run B: %d", got.status)
	}
	if got := httpRaw(g.HTTPURL, runA.Token).do(t, "DELETE", "/v1/runs/"+runB.ID, "", nil); got.status/100 == 2 {
		t.Errorf("run A's token ends run B: %d", got.status)
	}
	refused := func(name, token string) {
		t.Helper()
		got := httpRaw(g.HTTPURL, token).do(t, "POST", "/v1/actions", j, body)
		if got.status == 200 && got.action.Outcome != sshexec.Rejected {
			t.Errorf("%s: action outcome %q, want refused", name, got.action.Outcome)
		} else if got.status != 200 && got.status != 401 && got.status != 403 {
			t.Errorf("%s: status %d %s, want 401/403 or a rejected action", name, got.status, gatewaytest.Tail(got.body, 200))
		}
	}
	if err := remoteA.EndRun(context.Background(), runA.ID); err != nil {
		t.Fatalf("end run A: %v", err)
	}
	refused("token of an ended run", runA.Token)

	// A token of no run is refused at the door, on every agent route, and
	// leaves no action behind.
	forged := []string{
		runA.Token[:len(runA.Token)-1], // truncated
		runA.Token[:len(runA.Token)/2], // its tail cut in half
		"airlock_run_",                 // the prefix only
		runA.Token[:len(runA.Token)-1] + flip(runA.Token[len(runA.Token)-1]), // last character flipped
		"x", // not a token at all
	}
	before := len(g.audit())
	var got []int
	for _, tok := range forged {
		for _, req := range []struct {
			method, path string
			body         []byte
		}{{"POST", "/v1/actions", body}, {"GET", "/v1/targets", nil}, {"GET", "/v1/runs/" + runA.ID, nil}} {
			got = append(got, httpRaw(g.HTTPURL, tok).do(t, req.method, req.path, j, req.body).status)
		}
	}
	want := slices.Repeat([]int{401}, 10)
	want = append(want, slices.Repeat([]int{429}, len(got)-10)...)
	if !slices.Equal(got, want) {
		t.Errorf("forged run tokens on POST /v1/actions, GET /v1/targets and GET /v1/runs/ID answered %v, want 401 ×10 then 429", got)
	}
	var actions, failed int
	for _, e := range g.audit()[before:] {
		switch e.Kind {
		case "action.requested":
			actions++
		case "auth.failed":
			failed++
		}
	}
	if actions != 0 || failed != 2 {
		t.Errorf("forged run tokens left %d actions and %d auth.failed entries in the audit log, want 0 and 2 (the first failure and the blocking one)", actions, failed)
	}
	// Blocked now: even run A's real token waits out the minute.
	if got := httpRaw(g.HTTPURL, runA.Token).do(t, "GET", "/v1/targets", "", nil); got.status != 429 {
		t.Errorf("after the forged tokens, a real one: status %d, want 429", got.status)
	}

	// Local token guessing: 401 ten times, then 429 even for the right one.
	var statuses []int
	for i := range 12 {
		tok := strings.Repeat("0", len(ctl.Token))
		if i == 11 {
			tok = ctl.Token
		}
		statuses = append(statuses, socketRaw(g.socket, tok).do(t, "POST", "/v1/actions", j, body).status)
	}
	if statuses[0] != 401 || statuses[9] != 401 || statuses[10] != 429 || statuses[11] != 429 {
		t.Errorf("local token guesses answered %v, want 401 ×10 then 429 (also for the right token)", statuses)
	}

	// Reviewer password guessing: the same.
	statuses = statuses[:0]
	for i := range 12 {
		pw := "wrong password number " + string(rune('a'+i))
		if i == 11 {
			pw = reviewerPass
		}
		_, err := api.NewHTTPClient(g.HTTPURL, "").Login(context.Background(), reviewerName, pw)
		st := 200
		if e, ok := err.(*api.Error); ok {
			st = e.Status
		} else if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, st)
	}
	if statuses[0] != 401 || statuses[9] != 401 || statuses[10] != 429 || statuses[11] != 429 {
		t.Errorf("reviewer password guesses answered %v, want 401 ×10 then 429 (also for the right password)", statuses)
	}
	if got := connections(s) - conns; got != 0 {
		t.Errorf("sshd saw %d connections during the auth abuse, want 0", got)
	}
	if !g.healthy() {
		t.Error("the gateway is not healthy")
	}
	g.verify()
}

func flip(b byte) string {
	if b == 'a' {
		return "b"
	}
	return "a"
}
