package systemtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/httpapi"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// rawClient sends hand-made requests over the socket or HTTP.
type rawClient struct {
	base   string
	http   *http.Client
	bearer string
}

func socketRaw(socket, token string) *rawClient {
	return &rawClient{base: "http://airlock.local", bearer: token, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}}
}

func httpRaw(base, token string) *rawClient {
	return &rawClient{base: base, bearer: token, http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// answer is what came back: the status, the error code if any, and the
// action object if the body was one.
type answer struct {
	status int
	code   string
	action api.Action
	body   string
}

func (c *rawClient) do(t *testing.T, method, path, ctype string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a := answer{status: resp.StatusCode, body: string(b)}
	var e api.Error
	if json.Unmarshal(b, &e) == nil && e.Err.Code != "" {
		a.code = e.Err.Code
	} else {
		json.Unmarshal(b, &a.action)
	}
	return a
}

// attack is one hostile request body and what it must get.
type attack struct {
	name  string
	ctype string
	body  string
	// Either an error status and code, or (status 200) an action with
	// outcome "rejected".
	status int
	code   string
}

func attacks(sshdAddr string) []attack {
	const j = "application/json"
	rejected := func(name, body string) attack { return attack{name: name, ctype: j, body: body, status: 200} }
	bad := func(name, body string) attack {
		return attack{name: name, ctype: j, body: body, status: 400, code: api.CodeBadRequest}
	}
	return []attack{
		rejected("unknown target", `{"target":"prod-db","command":"id"}`),
		rejected("the target's own address", fmt.Sprintf(`{"target":%q,"command":"id"}`, sshdAddr)),
		rejected("an address in the target", `{"target":"127.0.0.1","command":"id"}`),
		rejected("user@target", `{"target":"root@box","command":"id"}`),
		rejected("ssh URL", `{"target":"ssh://127.0.0.1:22","command":"id"}`),
		rejected("target with a newline", `{"target":"box\n","command":"id"}`),
		rejected("target with a NUL", `{"target":"box\u0000","command":"id"}`),
		rejected("unknown account", `{"target":"box","account":"root","command":"id"}`),
		rejected("path in the account", `{"target":"box","account":"../../etc/passwd","command":"id"}`),
		rejected("empty command", `{"target":"box","command":""}`),
		rejected("blank command", `{"target":"box","command":" \t\n "}`),
		rejected("command over 32 KiB", fmt.Sprintf(`{"target":"box","command":"echo %s"}`, strings.Repeat("A", 32<<10))),
		rejected("NUL in the command", `{"target":"box","command":"echo a\u0000; id"}`),
		bad("invalid UTF-8 bytes in the command", "{\"target\":\"box\",\"command\":\"echo \xff\xfe\"}"),
		bad("lone surrogate escape in the command", `{"target":"box","command":"echo \ud800"}`),
		bad("lone low surrogate escape in the command", `{"target":"box","command":"echo \udc00x"}`),
		rejected("a paired surrogate escape is text like any other (not a target)", `{"target":"box\ud83d\ude00","command":"id"}`),
		rejected("negative timeout", `{"target":"box","command":"id","timeout_s":-1}`),
		rejected("timeout over the maximum", `{"target":"box","command":"id","timeout_s":100000}`),
		rejected("timeout that overflows a duration to negative", `{"target":"box","command":"id","timeout_s":9223372037}`),
		rejected("timeout that overflows a duration to 0.29 s", `{"target":"box","command":"id","timeout_s":18446744074}`),
		rejected("largest int timeout", `{"target":"box","command":"id","timeout_s":9223372036854775807}`),
		bad("timeout beyond int64", `{"target":"box","command":"id","timeout_s":1e30}`),
		bad("fractional timeout", `{"target":"box","command":"id","timeout_s":1.5}`),
		bad("timeout as a string", `{"target":"box","command":"id","timeout_s":"30"}`),
		bad("duplicate target key", `{"target":"box","target":"prod","command":"id"}`),
		bad("duplicate command key", `{"target":"box","command":"id","command":"rm -rf /"}`),
		bad("case-variant key", `{"Target":"box","command":"id"}`),
		bad("case-variant key next to the real one", `{"target":"box","Command":"rm -rf /","command":"id"}`),
		bad("unknown key", `{"target":"box","command":"id","host":"10.0.0.1"}`),
		bad("unknown key address", `{"target":"box","command":"id","address":"127.0.0.1:22"}`),
		bad("trailing object", `{"target":"box","command":"id"}{"target":"box","command":"rm -rf /"}`),
		bad("trailing garbage", `{"target":"box","command":"id"} x`),
		bad("array body", `[{"target":"box","command":"id"}]`),
		bad("string body", `"id"`),
		bad("null body", `null`),
		bad("empty body", ``),
		bad("truncated JSON", `{"target":"box","command":"id"`),
		bad("command as an array", `{"target":"box","command":["id"]}`),
		bad("invalid UTF-8 in a key", "{\"targ\xffet\":\"box\",\"command\":\"id\"}"),
		bad("deep nesting", `{"target":"box","command":"id","x":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`),
		{name: "oversized body", ctype: j, body: `{"target":"box","command":"` + strings.Repeat("A", httpapi.MaxActionBody) + `"}`, status: 413, code: api.CodeTooLarge},
		// Under the body limit, over a field's: rejected actions, whose
		// records hold a bounded prefix of what was sent.
		rejected("command of 300 KiB", `{"target":"box","command":"`+strings.Repeat("A", 300<<10)+`"}`),
		rejected("reason over 500 characters", `{"target":"box","command":"id","reason":"`+strings.Repeat("é", 501)+`"}`),
		rejected("reason of 5 MiB", `{"target":"box","command":"id","reason":"`+strings.Repeat("R", 5<<20)+`"}`),
		rejected("target of 5 MiB", `{"target":"`+strings.Repeat("t", 5<<20)+`","command":"id"}`),
		rejected("stdin not base64", `{"target":"box","command":"cat","stdin":"not base64!"}`),
		rejected("stdin unpadded", `{"target":"box","command":"cat","stdin":"YQ"}`),
		rejected("stdin over max_stdin", `{"target":"box","command":"cat","stdin":"`+base64.StdEncoding.EncodeToString(make([]byte, 2<<20))+`"}`),
		bad("stdin as a number", `{"target":"box","command":"cat","stdin":7}`),
		{name: "text/plain", ctype: "text/plain", body: `{"target":"box","command":"id"}`, status: 415, code: api.CodeUnsupportedType},
		{name: "form", ctype: "application/x-www-form-urlencoded", body: `target=box&command=id`, status: 415, code: api.CodeUnsupportedType},
		{name: "no content type", ctype: "", body: `{"target":"box","command":"id"}`, status: 415, code: api.CodeUnsupportedType},
		{name: "multipart", ctype: "multipart/form-data; boundary=x", body: "--x\r\n\r\n{}\r\n--x--", status: 415, code: api.CodeUnsupportedType},
	}
}

// connections counts the TCP connections sshd has seen.
func connections(s *sshtest.SSHD) int { return strings.Count(s.Log(), "Connection from ") }

// TestHostileRequests sends a corpus of hostile POST /v1/actions bodies
// over the socket and over HTTP: each gets the contract's error or a
// rejected action, nothing reaches sshd (not even a TCP connection), every
// rejected action is audited, and the gateway stays healthy.
func TestHostileRequests(t *testing.T) {
	g, s, agent := oneSSHD(t)
	remote, run := g.remoteAgent()
	g.approveRun(remote, g.reviewer(), "box")
	ctl, _ := api.ReadControl(g.socket)
	_ = agent
	transports := []struct {
		name string
		c    *rawClient
	}{{"socket", socketRaw(g.socket, ctl.Token)}, {"http", httpRaw(g.HTTPURL, run.Token)}}
	_, requestedBefore := finished(g.audit())
	conns := connections(s)
	tried, rejectedN := 0, 0
	for _, tr := range transports {
		for _, at := range attacks(s.Addr) {
			t.Run(tr.name+"/"+at.name, func(t *testing.T) {
				got := tr.c.do(t, http.MethodPost, "/v1/actions", at.ctype, []byte(at.body))
				tried++
				if got.status != at.status || got.code != at.code {
					t.Fatalf("status %d code %q, want %d %q: %s", got.status, got.code, at.status, at.code, gatewaytest.Tail(got.body, 300))
				}
				if at.status == 200 {
					rejectedN++
					if got.action.Outcome != sshexec.Rejected || got.action.ID == "" {
						t.Errorf("outcome %q (%s), want rejected", got.action.Outcome, got.action.Detail)
					}
				}
			})
		}
	}
	if got := connections(s) - conns; got != 0 {
		t.Errorf("sshd saw %d connections during the hostile requests, want 0", got)
	}
	_, requested := finished(g.audit())
	if got := requested - requestedBefore; got != rejectedN {
		t.Errorf("%d actions audited, want %d (one per rejected request)", got, rejectedN)
	}
	a, err := agent.RunAction(context.Background(), api.ActionRequest{Target: "box", Command: "echo still fine"}, api.Events{})
	if err != nil || !a.Success() {
		t.Fatalf("a normal action after the corpus: %+v %v", a, err)
	}
	g.verify()
	t.Logf("hostile requests: %d tried, %d rejected actions audited, the rest refused with the contract's errors; 0 dialed", tried, rejectedN)
}
