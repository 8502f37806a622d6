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
// dials the target. The phases run in this order and share the gateway's
// limits.
func TestAuthAbuse(t *testing.T) {
	g, s, _ := oneSSHD(t)
	ctl, _ := api.ReadControl(g.socket)
	remoteA, runA := g.remoteAgent()
	g.approveRun(remoteA, g.reviewer(), "box")
	conns := connections(s)

	t.Run("requester credentials on reviewer routes: 403, before any guessing", func(t *testing.T) {
		for _, c := range []struct {
			name string
			c    *rawClient
		}{{"local token", socketRaw(g.socket, ctl.Token)}, {"run token", httpRaw(g.HTTPURL, runA.Token)}} {
			for _, route := range reviewerRoutes {
				ct := ""
				if route.body != "" {
					ct = jsonType
				}
				got := c.c.do(t, route.method, route.path, ct, []byte(route.body))
				if got.status != http.StatusForbidden {
					t.Errorf("%s on %s %s: status %d %s, want 403", c.name, route.method, route.path, got.status, gatewaytest.Tail(got.body, 200))
				}
			}
		}
	})

	t.Run("run tokens: another run's, of an ended run", func(t *testing.T) {
		_, runB := g.remoteAgent()
		if got := httpRaw(g.HTTPURL, runA.Token).do(t, "GET", "/v1/runs/"+runB.ID, "", nil); got.status/100 == 2 {
			t.Errorf("run A's token reads run B: %d", got.status)
		}
		if got := httpRaw(g.HTTPURL, runA.Token).do(t, "DELETE", "/v1/runs/"+runB.ID, "", nil); got.status/100 == 2 {
			t.Errorf("run A's token ends run B: %d", got.status)
		}
		if err := remoteA.EndRun(context.Background(), runA.ID); err != nil {
			t.Fatalf("end run A: %v", err)
		}
		got := httpRaw(g.HTTPURL, runA.Token).do(t, "POST", "/v1/actions", jsonType, actionBody)
		if got.status == 200 && got.action.Outcome != sshexec.Rejected {
			t.Errorf("token of an ended run: action outcome %q, want refused", got.action.Outcome)
		} else if got.status != 200 && got.status != 401 && got.status != 403 {
			t.Errorf("token of an ended run: status %d %s, want 401/403 or a rejected action", got.status, gatewaytest.Tail(got.body, 200))
		}
	})

	t.Run("a token of no run is refused at the door, on every agent route, and leaves no action behind", func(t *testing.T) {
		forgedRunTokens(t, g, runA)
	})

	t.Run("local token guessing: 401 ten times, then 429 even for the right one", func(t *testing.T) {
		wantCutOff(t, "local token", func(i int, right bool) int {
			tok := strings.Repeat("0", len(ctl.Token))
			if right {
				tok = ctl.Token
			}
			return socketRaw(g.socket, tok).do(t, "POST", "/v1/actions", jsonType, actionBody).status
		})
	})

	t.Run("reviewer password guessing: the same", func(t *testing.T) {
		wantCutOff(t, "reviewer password", func(i int, right bool) int {
			pw := "wrong password number " + string(rune('a'+i))
			if right {
				pw = reviewerPass
			}
			_, err := api.NewHTTPClient(g.HTTPURL, "").Login(context.Background(), reviewerName, pw)
			if e, ok := err.(*api.Error); ok {
				return e.Status
			} else if err != nil {
				t.Fatal(err)
			}
			return 200
		})
	})

	if got := connections(s) - conns; got != 0 {
		t.Errorf("sshd saw %d connections during the auth abuse, want 0", got)
	}
	if !g.healthy() {
		t.Error("the gateway is not healthy")
	}
	g.verify()
}

const jsonType = "application/json"

// actionBody asks for an action on box.
var actionBody = []byte(`{"target":"box","command":"id"}`)

// reviewerRoutes are routes for reviewers only, with a body where they
// take one.
var reviewerRoutes = []struct{ method, path, body string }{
	{"GET", "/v1/approvals?state=pending", ""},
	{"POST", "/v1/approvals/apr_0/decision", `{"decision":"approve"}`},
	{"GET", "/v1/runs", ""},
	{"GET", "/v1/audit/entries?after=0", ""},
	{"GET", "/v1/audit/verify", ""},
}

// forgedRunTokens tries tokens made from run's on every agent route: the
// first ten answer 401, the rest 429, the audit log records the first
// failure and the blocking one and no action; run's own token is still
// let in.
func forgedRunTokens(t *testing.T, g *gw, run *api.Run) {
	forged := []string{
		run.Token[:len(run.Token)-1], // truncated
		run.Token[:len(run.Token)/2], // its tail cut in half
		"airlock_run_",               // the prefix only
		run.Token[:len(run.Token)-1] + flip(run.Token[len(run.Token)-1]), // last character flipped
		"x", // not a token at all
	}
	before := len(g.audit())
	var got []int
	for _, tok := range forged {
		for _, req := range []struct {
			method, path string
			body         []byte
		}{{"POST", "/v1/actions", actionBody}, {"GET", "/v1/targets", nil}, {"GET", "/v1/runs/" + run.ID, nil}} {
			got = append(got, httpRaw(g.HTTPURL, tok).do(t, req.method, req.path, jsonType, req.body).status)
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
	// The address is blocked for wrong tokens, not for the run's real
	// one: nobody locks an agent out by guessing.
	if got := httpRaw(g.HTTPURL, run.Token).do(t, "GET", "/v1/targets", "", nil); got.status != 200 {
		t.Errorf("after the forged tokens, a real one: status %d, want 200", got.status)
	}
	if got := httpRaw(g.HTTPURL, forged[0]).do(t, "GET", "/v1/targets", "", nil); got.status != 429 {
		t.Errorf("after the real one, a forged one again: status %d, want 429", got.status)
	}
}

// wantCutOff makes twelve guesses of a secret, the last the right one:
// the first ten answer 401, the last two 429.
func wantCutOff(t *testing.T, secret string, guess func(i int, right bool) (status int)) {
	t.Helper()
	var statuses []int
	for i := range 12 {
		statuses = append(statuses, guess(i, i == 11))
	}
	if statuses[0] != 401 || statuses[9] != 401 || statuses[10] != 429 || statuses[11] != 429 {
		t.Errorf("%s guesses answered %v, want 401 ×10 then 429 (also for the right one)", secret, statuses)
	}
}

func flip(b byte) string {
	if b == 'a' {
		return "b"
	}
	return "a"
}
