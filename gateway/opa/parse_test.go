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
