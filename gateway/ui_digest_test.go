package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/approvals/clocktest"
	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/notify"
	"github.com/airlockgw/airlock/gateway/web/webtest"
)

// TestUIBrowserExpiredCard approves a call after its request expired: the
// page says so, and the agent's action ends expired.
func TestUIBrowserExpiredCard(t *testing.T) {
	s := sharedSSHD(t)
	browser := webtest.Browser(t)
	// The request expires when the test moves the clock, not while a busy
	// machine is still loading the page.
	clk := clocktest.New(time.Now())
	g := startGateway(t, s, gwOptions{
		mutate:  func(c *config.Config) { c.Approval.Timeout = 3 * time.Second },
		options: func(o *Options) { o.clock = clk },
	})
	tab := webtest.Tab(t, browser)
	if err := webtest.Login(tab, g.base, testReviewer, testkit.Password); err != nil {
		t.Fatal(err)
	}
	cmd := "echo too late"
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	q := g.pendingFor(cmd)
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q) !== null`, q.ID), testkit.Patience); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Second)
	if err := webtest.WaitFor(tab, fmt.Sprintf(`document.getElementById(%q).classList.contains('expired') || document.getElementById(%q).classList.contains('gone')`, q.ID, q.ID), testkit.Patience); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, func() bool {
		got, _ := g.srv.eng.Review().Request(context.Background(), q.ID)
		return got.State == "expired"
	}, "the request did not expire")
	if _, err := webtest.Eval[bool](tab, fmt.Sprintf(`document.querySelector('#approve-%s').form.submit(), true`, q.ID)); err != nil {
		t.Fatal(err)
	}
	if err := webtest.WaitFor(tab, `document.getElementById('flash') !== null && document.getElementById('flash').textContent.includes('expired before your decision')`, testkit.Patience); err != nil {
		text, _ := webtest.Eval[string](tab, `document.body.textContent.slice(0, 300)`)
		t.Fatalf("%v; the page says %q", err, text)
	}
	if r := <-res; r.err != nil || r.a.Outcome != sshexec.Expired {
		t.Errorf("the action: %+v %v, want expired", r.a, r.err)
	}
}

// otherDigest is a well-formed digest that is not digest: its last hex
// digit changed.
func otherDigest(digest string) string {
	last := "0"
	if strings.HasSuffix(digest, "0") {
		last = "1"
	}
	return digest[:len(digest)-1] + last
}

func TestUIDecisionBoundToTheShownDigest(t *testing.T) {
	s := sharedSSHD(t)
	g := startGateway(t, s, gwOptions{})
	cmd := "echo bound to its digest"
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: cmd})
	q := g.pendingFor(cmd)
	c := uiClient(t, g.base)
	tok := uiCSRF(t, c, g.base+"/ui/pending")
	decide := func(digest string) string {
		t.Helper()
		resp, err := c.PostForm(g.base+"/ui/approvals/"+q.ID+"/decision", url.Values{"csrf": {tok}, "decision": {"approve"}, "digest": {digest}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("decision: status %d", resp.StatusCode)
		}
		resp, err = c.Get(g.base + "/ui/pending")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(page)
	}
	if page := decide(otherDigest(q.Digest)); !strings.Contains(page, "its digest differs") {
		t.Error("a decision for another digest was not refused clearly")
	}
	if got, _ := g.srv.eng.Review().Request(context.Background(), q.ID); !got.Pending() {
		t.Fatalf("after a decision with the wrong digest the request is %s", got.State)
	}
	if page := decide(q.Digest); !strings.Contains(page, "Approved call "+q.ID) {
		t.Error("the decision with the shown digest was not confirmed")
	}
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v", r.a, r.err)
	}
}

func TestUIWebhookRefusesAnExposedSecret(t *testing.T) {
	s := sharedSSHD(t)
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("readable-by-everyone"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, gwOptions{extraConfig: fmt.Sprintf("notify {\n  url = %q\n  secret_file = %q\n}\n", srv.URL, secretFile)})
	res := g.runAsync(api.ActionRequest{Target: "box-call", Command: "echo unnoticed"})
	g.decideNext("call", "approve", "")
	if r := <-res; r.err != nil || !r.a.Success() {
		t.Fatalf("action: %+v %v (notifications off must not stop the gateway)", r.a, r.err)
	}
	time.Sleep(2 * notify.Poll)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.calls) != 0 {
		t.Errorf("%d notifications signed with a secret others can read", len(hook.calls))
	}
}
