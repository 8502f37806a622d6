package opa

import (
	"strings"
	"testing"
)

// Answers a real OPA does not give on demand: only an exact, well-typed
// decision counts, and nothing malformed reads as an allow.
func TestParseIsExact(t *testing.T) {
	for _, c := range []struct {
		answer string
		allow  bool
		err    string
	}{
		{`{"result": true}`, true, ""},
		{`{"result": false, "decision_id": "d-1"}`, false, ""},
		{`{"result": {"allow": true, "rule": "r", "reason": "why"}}`, true, ""},
		{`{"result": {"decision": false}}`, false, ""},
		{`{"result": {"allow": false, "ALLOW": true}}`, false, ""},
		{`{"result": {"ALLOW": true}}`, false, "no boolean"},
		{`{"result": {"allow": null, "decision": true}}`, false, "not true or false"},
		{`{"result": {"allow": "true"}}`, false, "not true or false"},
		{`{"result": {"allow": 1}}`, false, "not true or false"},
		{`{"result": {"allow": true, "decision": false}}`, false, "disagree"},
		{`{"result": {"allow": true, "rule": 7}}`, false, "not a string"},
		{`{"result": "yes"}`, false, "neither true/false"},
		{`{"result": [true]}`, false, "neither true/false"},
		{`{"result": null}`, false, "no decision"},
		{`{}`, false, "no decision"},
		{`{"Result": true}`, false, "no decision"},
		{`[true]`, false, "not a JSON object"},
		{`true`, false, "not a JSON object"},
		{`not json`, false, "not a JSON object"},
		// A key twice, at any depth: parsers disagree on which one
		// counts, so none does.
		{`{"result": {"allow": false, "allow": true}}`, false, `key "allow" twice in result`},
		{`{"result": {"allow": true, "\u0061llow": false}}`, false, `key "allow" twice in result`},
		{`{"result": false, "result": true}`, false, `key "result" twice`},
		{`{"decision_id": "a", "result": true, "decision_id": "b"}`, false, `key "decision_id" twice`},
		{`{"result": {"allow": true, "why": {"a": 1, "a": 2}}}`, false, `key "a" twice in result.why`},
		{`{"result": {"allow": true, "all": [{"k": 1}, {"k": 1, "k": 2}]}}`, false, `key "k" twice in result.all[]`},
		{`{"result": {"allow": true, "x": {"allow": 1}, "y": [{"allow": 2}, {"allow": 3}]}}`, true, ""},
	} {
		d, err := parse([]byte(c.answer))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.answer, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.answer, err, c.err)
		case d.Allow != c.allow || (err != nil && d.Allow):
			t.Errorf("%s: allow = %v", c.answer, d.Allow)
		}
	}
	if d, _ := parse([]byte(`{"result": {"allow": true, "rule": "` + strings.Repeat("x", 2000) + `"}}`)); len(d.Rule) > maxText+len("…") {
		t.Errorf("a %d-byte rule was kept", len(d.Rule))
	}
}
