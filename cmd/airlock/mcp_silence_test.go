package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
)

// hangingGateway stands in for a gateway that hangs, which no real one
// does on demand: it registers runs, then answers an action with the
// start of its event stream (the action named, waiting for a reviewer)
// and never another byte; with silentFirst it answers nothing at all.
func hangingGateway(t *testing.T, silentFirst bool) string {
	t.Helper()
	return gatewaytest.HangingGateway(t, func(req *http.Request, c net.Conn) {
		switch {
		case req == nil || silentFirst:
		case req.URL.Path == "/v1/runs" && req.Method == http.MethodPost:
			body := `{"run_id":"run_hang","state":"active","kind":"local","requester":"uid:0","created_at":"2026-01-01T00:00:00Z"}`
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		case req.URL.Path == "/v1/actions":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
				"event: state\ndata: {\"state\":\"waiting_approval\",\"action_id\":\"act_hang\",\"kind\":\"call\",\"approval_id\":\"apr_x\"}\n\n")
		default:
			io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		}
	})
}

// TestMCPSilentGateway: the bridge gives up on a gateway silent for
// $AIRLOCK_SILENCE — before any answer, or while an action waits — with
// an error result that says so, naming the action when it had a name.
func TestMCPSilentGateway(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		silentFirst bool
		want        []string
	}{
		{"never answers", true, []string{"the gateway stopped answering: nothing came from it for 1s"}},
		{"silent while an action waits", false, []string{"the gateway stopped answering: nothing came from it for 1s (action act_hang)", "get_action with action_id act_hang"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cs, _, _ := startMCP(t, hangingGateway(t, tt.silentFirst), "AIRLOCK_SILENCE=1s")
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"target": "box", "command": "true"}})
			if err != nil {
				t.Fatalf("ssh_exec: %v, want a tool error result", err)
			}
			text := mcptest.Text(res)
			if !res.IsError {
				t.Errorf("ssh_exec: not an error: %q", text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("ssh_exec: %q, want it to say %q", text, w)
				}
			}
		})
	}
}
