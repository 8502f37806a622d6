// Package opa asks Open Policy Agent about an action over its REST data
// API, with an input shaped like an AuthZEN access evaluation request
// (subject, action, resource, context).
//
// The gateway asks only about actions its own policy allows, and OPA can
// only refuse them: an "allow" changes nothing a reviewer or the local
// policy decided. What OPA answered (allow or deny, the rule that decided,
// its reason and decision id) goes to the audit log with the action.
//
// This package knows nothing of approvals or SSH; it builds no policy.
package opa

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
)

// Input is the document OPA evaluates: input.subject, input.action,
// input.resource and input.context, as AuthZEN names them.
type Input struct {
	Subject  Subject  `json:"subject"`
	Action   Action   `json:"action"`
	Resource Resource `json:"resource"`
	Context  Context  `json:"context"`
}

// Subject is who asks: the verified requester of the run.
type Subject struct {
	Type       string            `json:"type"` // "agent"
	ID         string            `json:"id"`   // the run's requester
	Properties SubjectProperties `json:"properties"`
}

// SubjectProperties describe the requester's run.
type SubjectProperties struct {
	Run      string `json:"run"`
	RunState string `json:"run_state"`
	// Transport is how the request came: "socket" (a local process,
	// identified by the kernel) or "http" (a token or certificate).
	Transport string `json:"transport"`
	// Agent is the agent token's id, when the run has one.
	Agent string `json:"agent,omitempty"`
}

// Action is what is asked: the command's class.
type Action struct {
	Name       string           `json:"name"` // read_only … forbidden
	Properties ActionProperties `json:"properties"`
}

// ActionProperties say how the gateway will ask a reviewer.
type ActionProperties struct {
	// Mode is the account's approval mode, "run" or "call".
	Mode string `json:"mode"`
	// Escalated is set when the local policy asks a reviewer about this
	// action inside an approved run.
	Escalated bool `json:"escalated"`
	// Unreviewed is set when the local policy lets it pass with no
	// reviewer (allow_unreviewed).
	Unreviewed bool `json:"unreviewed"`
}

// Resource is where: the target account, and the command as its parts.
type Resource struct {
	Type       string             `json:"type"` // "ssh_account"
	ID         string             `json:"id"`   // "target/account"
	Properties ResourceProperties `json:"properties"`
}

// ResourceProperties carry the command. Command is as reviewers see it:
// what looks like a credential is replaced.
type ResourceProperties struct {
	Target  string `json:"target"`
	Account string `json:"account"`
	Command string `json:"command"`
	// Parts are the parts of the command that decided its class.
	Parts []Part `json:"parts"`
	// Secret names the gateway-held secret on standard input, "" none.
	Secret    string `json:"secret,omitempty"`
	TimeoutS  int    `json:"timeout_s"`
	StdinSize int64  `json:"stdin_bytes,omitempty"`
}

// Part is one classified part of the command.
type Part struct {
	Text  string `json:"text"`
	Class string `json:"class"`
	Rule  string `json:"rule"`
}

// Context is when and through which gateway.
type Context struct {
	Time    time.Time `json:"time"`
	Gateway string    `json:"gateway"`
	Action  string    `json:"action_id"`
}

// Decision is what OPA answered.
type Decision struct {
	Allow bool
	// Rule and Reason are the policy's own words, DecisionID OPA's id for
	// its decision log; each "" when it gave none.
	Rule, Reason, DecisionID string
}

// Client asks one OPA decision URL.
type Client struct {
	url   string
	token string
	http  *http.Client
}

// Options configure a Client.
type Options struct {
	// URL is the decision's data API URL, such as
	// http://127.0.0.1:8181/v1/data/airlock/decision.
	URL     string
	Timeout time.Duration
	// TokenFile holds a bearer token; CAFile the CA bundle of an https
	// OPA. "" for none.
	TokenFile, CAFile string
}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 64 << 10

// ReadToken reads the bearer token file as New does: a credential owned
// by account uid (-1: whoever runs this; config check run by root passes
// the gateway's service user) and read by it alone.
func ReadToken(file string, uid int) (string, error) {
	tok, err := securefile.ReadTokenFor(file, maxAnswer, uid)
	if err != nil {
		return "", fmt.Errorf("policy.opa_token_file: %w", err)
	}
	return tok, nil
}

// New makes a client, reading its token and CA files.
func New(o Options) (*Client, error) {
	c := &Client{url: o.URL}
	if o.TokenFile != "" {
		tok, err := ReadToken(o.TokenFile, -1)
		if err != nil {
			return nil, err
		}
		c.token = tok
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // OPA is asked directly, never through an environment's proxy
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("policy.opa_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("policy.opa_ca_file %s holds no PEM certificate", o.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c.http = &http.Client{Transport: tr, Timeout: o.Timeout,
		// A redirect would send the input elsewhere: refused.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// Decide asks OPA about in. An error says why no usable decision came
// (unreachable, a status other than 200, no decision at that path, an
// answer of another shape); whether that refuses the action is the
// caller's choice (fail_closed).
func (c *Client) Decide(ctx context.Context, in Input) (Decision, error) {
	body, err := json.Marshal(struct {
		Input Input `json:"input"`
	}{in})
	if err != nil {
		return Decision{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Decision{}, fmt.Errorf("OPA request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Decision{}, fmt.Errorf("OPA at %s: %w", c.url, unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return Decision{}, fmt.Errorf("OPA: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Decision{}, fmt.Errorf("OPA at %s answered %s", c.url, resp.Status)
	}
	if len(raw) > maxAnswer {
		return Decision{}, fmt.Errorf("OPA: the answer is over %d bytes", maxAnswer)
	}
	return parse(raw)
}

// parse reads {"result": true|false} or {"result": {"allow"|"decision":
// bool, "rule": "…", "reason": "…"}}, with OPA's "decision_id".
func parse(raw []byte) (Decision, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return Decision{}, errors.New("OPA: the answer is not a JSON object")
	}
	if err := uniqueKeys(raw); err != nil {
		return Decision{}, err
	}
	var d Decision
	if id, ok := top["decision_id"]; ok {
		_ = json.Unmarshal(id, &d.DecisionID) // an id of another type is left out
		d.DecisionID = clip(d.DecisionID)
	}
	result := bytes.TrimSpace(top["result"])
	if len(result) == 0 || string(result) == "null" {
		return d, errors.New("OPA: no decision at that path (is the policy loaded, and the URL its package and rule?)")
	}
	switch string(result) {
	case "true":
		d.Allow = true
		return d, nil
	case "false":
		return d, nil
	}
	ans := struct{ Result json.RawMessage }{result}
	// Keys are matched exactly (encoding/json would take "ALLOW" for
	// "allow"), and a value must be of its type: anything else is no
	// decision.
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(ans.Result, &obj); err != nil || obj == nil {
		return d, errors.New(`OPA: the decision is neither true/false nor an object with "allow" or "decision"`)
	}
	allow, hasAllow, err := boolField(obj, "allow")
	if err != nil {
		return d, err
	}
	dec, hasDec, err := boolField(obj, "decision")
	switch {
	case err != nil:
		return d, err
	case hasAllow && hasDec && allow != dec:
		return d, errors.New(`OPA: the decision's "allow" and "decision" disagree`)
	case !hasAllow && !hasDec:
		return d, errors.New(`OPA: the decision has no boolean "allow" or "decision"`)
	}
	for key, to := range map[string]*string{"rule": &d.Rule, "reason": &d.Reason} {
		if raw, ok := obj[key]; ok {
			var v string
			if err := json.Unmarshal(raw, &v); err != nil || string(raw) == "null" {
				return Decision{DecisionID: d.DecisionID}, fmt.Errorf("OPA: the decision's %q is not a string", key)
			}
			*to = clip(v)
		}
	}
	d.Allow = allow || dec
	return d, nil
}

// uniqueKeys refuses an answer in which an object, at any depth, names a
// key twice. encoding/json keeps the last of them and other parsers the
// first, so {"allow": false, "allow": true} reads as a deny to one reader
// and an allow to the next; OPA itself never sends one. raw is valid
// JSON (parse has read it).
func uniqueKeys(raw []byte) error {
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool
		last    string // the last key of an object
		where   string // the path of the object or array, "" at the top
	}
	var stack []*level
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("OPA: the answer is not JSON: %w", err)
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.wantKey {
			if top.keys[key] {
				if top.where == "" {
					return fmt.Errorf("OPA: the answer has the key %q twice", clip(key))
				}
				return fmt.Errorf("OPA: the answer has the key %q twice in %s", clip(key), clip(top.where))
			}
			top.keys[key], top.wantKey, top.last = true, false, key
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			in := &level{}
			if tok == json.Delim('{') {
				in.keys, in.wantKey = map[string]bool{}, true
			}
			switch {
			case top == nil:
			case top.keys == nil:
				in.where = top.where + "[]"
			case top.where == "":
				in.where = top.last
			default:
				in.where = top.where + "." + top.last
			}
			stack = append(stack, in)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the object it is in wants its next key.
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
}

// boolField reads obj[key] as a boolean: present says whether it is
// there; a value that is not true or false is an error.
func boolField(obj map[string]json.RawMessage, key string) (v, present bool, err error) {
	raw, ok := obj[key]
	if !ok {
		return false, false, nil
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, fmt.Errorf("OPA: the decision's %q is not true or false", key)
}

// maxText bounds the rule and reason kept.
const maxText = 512

func clip(s string) string {
	if len(s) > maxText {
		return strings.ToValidUTF8(s[:maxText], "") + "…"
	}
	return s
}

// unwrapURL drops the *url.Error wrapper, which repeats the URL.
func unwrapURL(err error) error {
	if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), "Post ") {
		return u
	}
	return err
}
