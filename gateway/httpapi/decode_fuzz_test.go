package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
)

// documentedKeys are the top-level keys of POST /v1/actions that
// docs/api.md documents: a command's, then a transfer's.
var documentedKeys = map[string]bool{"target": true, "account": true, "command": true, "timeout_s": true,
	"stdin": true, "secret": true, "reason": true, "put": true, "get": true}

// FuzzDecodeActionRequest: the API's strict decoder never panics, and what
// it accepts has exactly the documented keys, each once, in their exact
// case: so the request a reviewer sees is the one that runs.
func FuzzDecodeActionRequest(f *testing.F) {
	for _, s := range []string{
		`{"target":"box","command":"uptime"}`,
		`{"target":"box","account":"deploy","command":"ls -la","timeout_s":30}`,
		`{"Target":"box","command":"x"}`,
		`{"target":"a","target":"b","command":"x"}`,
		`{"target":"box","command":"x"} {}`,
		`[]`, `null`, `{"command":"\u0000"}`, `{"timeout_s":1e400}`, `{"target":{"a":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/actions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var req api.ActionRequest
		ok := decodeJSON(w, r, &req)
		if !ok {
			if w.Code < 400 || w.Code >= 500 {
				t.Fatalf("refused with status %d", w.Code)
			}
			var e api.Error
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Err.Code == "" {
				t.Fatalf("refusal is not the error envelope: %q", w.Body.String())
			}
			return
		}
		// Accepted: decoding again with the standard decoder gives the
		// same request, and no key was a case variant or a duplicate.
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("accepted invalid JSON %q: %v", body, err)
		}
		for k := range m {
			if !documentedKeys[k] {
				t.Fatalf("accepted key %q", k)
			}
		}
	})
}
