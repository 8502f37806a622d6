package opa_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/gateway/opa"
	"github.com/airlockgw/airlock/gateway/opa/opatest"
)

// policy refuses destructive and stronger commands on db-* targets, and
// only allows input of the documented shape.
const policy = `package airlock

default decision := {"allow": false, "rule": "shape", "reason": "the input is not the documented shape"}

shape_ok if {
	input.subject.type == "agent"
	input.subject.id != ""
	input.subject.properties.run != ""
	input.action.name in {"read_only", "mutating", "destructive", "privileged", "forbidden"}
	input.resource.type == "ssh_account"
	input.resource.id == concat("/", [input.resource.properties.target, input.resource.properties.account])
	count(input.resource.properties.parts) > 0
	input.context.action_id != ""
}

risky if input.action.name in {"destructive", "privileged", "forbidden"}

decision := {"allow": true, "rule": "default-allow"} if {
	shape_ok
	not risky
}

decision := {"allow": true, "rule": "default-allow"} if {
	shape_ok
	risky
	not startswith(input.resource.properties.target, "db")
}

decision := {"allow": false, "rule": "db-no-destructive", "reason": "destructive commands never run on database hosts"} if {
	shape_ok
	risky
	startswith(input.resource.properties.target, "db")
}

allow := decision.allow

not_a_decision := "yes"
`

func input(target, class string) opa.Input {
	return opa.Input{
		Subject: opa.Subject{Type: "agent", ID: "unix:ci", Properties: opa.SubjectProperties{Run: "run_1", RunState: "approved", Transport: "socket"}},
		Action:  opa.Action{Name: class, Properties: opa.ActionProperties{Mode: "run"}},
		Resource: opa.Resource{Type: "ssh_account", ID: target + "/deploy", Properties: opa.ResourceProperties{
			Target: target, Account: "deploy", Command: "rm -rf /srv/x", TimeoutS: 60,
			Parts: []opa.Part{{Text: "rm -rf /srv/x", Class: class, Rule: "rm deletes files"}}}},
		Context: opa.Context{Time: time.Now().UTC(), Gateway: "gw", Action: "act_1"},
	}
}

func TestDecideAgainstOPA(t *testing.T) {
	t.Parallel()
	srv := opatest.Start(t, map[string]string{"airlock.rego": policy})
	ctx := context.Background()
	c, err := opa.New(opa.Options{URL: srv.URL + "/v1/data/airlock/decision", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Decide(ctx, input("web-1", "destructive"))
	if err != nil || !d.Allow || d.Rule != "default-allow" {
		t.Fatalf("web-1 destructive: %+v, %v", d, err)
	}
	d, err = c.Decide(ctx, input("db-1", "destructive"))
	if err != nil || d.Allow || d.Rule != "db-no-destructive" || !strings.Contains(d.Reason, "database hosts") {
		t.Fatalf("db-1 destructive: %+v, %v", d, err)
	}
	if d, err = c.Decide(ctx, input("db-1", "read_only")); err != nil || !d.Allow {
		t.Fatalf("db-1 read_only: %+v, %v", d, err)
	}
	bad := input("web-1", "read_only")
	bad.Subject.Type = ""
	if d, err = c.Decide(ctx, bad); err != nil || d.Allow || d.Rule != "shape" {
		t.Fatalf("an input of another shape: %+v, %v", d, err)
	}

	// A bare boolean rule.
	cb, _ := opa.New(opa.Options{URL: srv.URL + "/v1/data/airlock/allow", Timeout: 10 * time.Second})
	if d, err := cb.Decide(ctx, input("db-1", "privileged")); err != nil || d.Allow {
		t.Fatalf("allow rule: %+v, %v", d, err)
	}

	// No usable decision: an error, for the caller's fail_closed.
	for path, want := range map[string]string{
		"/v1/data/airlock/nothing":        "no decision",
		"/v1/data/airlock/not_a_decision": "neither true/false",
		"/v2/nowhere":                     "answered 404",
	} {
		cx, _ := opa.New(opa.Options{URL: srv.URL + path, Timeout: 10 * time.Second})
		if d, err := cx.Decide(ctx, input("web-1", "read_only")); err == nil || !strings.Contains(err.Error(), want) || d.Allow {
			t.Errorf("%s: %+v, %v; want an error saying %q", path, d, err, want)
		}
	}
	srv.Kill()
	if d, err := c.Decide(ctx, input("web-1", "read_only")); err == nil || d.Allow {
		t.Fatalf("OPA gone: %+v, %v", d, err)
	}
}

func TestNewChecksItsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("a\nb\n"), 0o600)
	notPEM := filepath.Join(dir, "ca")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for name, o := range map[string]opa.Options{
		"missing token":     {URL: "http://127.0.0.1:1", TokenFile: filepath.Join(dir, "none")},
		"two-line token":    {URL: "http://127.0.0.1:1", TokenFile: two},
		"CA without a cert": {URL: "http://127.0.0.1:1", CAFile: notPEM},
	} {
		if _, err := opa.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDecideRefusesDuplicateKeys: an answer that names a key twice is
// no decision, whichever of the two a reader would keep; the caller's
// fail_closed decides. A real OPA never sends one, so a server stands in
// for it.
func TestDecideRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"result": {"allow": false, "allow": true}}`,
		`{"result": {"allow": true, "allow": false}}`,
		`{"decision_id": "d-1", "result": {"decision": true, "rule": "r", "rule": "other"}}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		defer srv.Close()
		c, err := opa.New(opa.Options{URL: srv.URL + "/v1/data/airlock/decision", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := c.Decide(context.Background(), input("web-1", "read_only")); err == nil || d.Allow || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%s: %+v, %v; want an error naming the key", body, d, err)
		}
	}
}
