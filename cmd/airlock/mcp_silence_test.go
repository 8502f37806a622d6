package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
)

// hangingGateway stands in for a gateway that hangs, which no real one
// does on demand: it registers runs, then answers an action with the
// start of its event stream (the action named, waiting for a reviewer)
// and never another byte; with silentFirst it answers nothing at all.
func hangingGateway(t *testing.T, silentFirst bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "airlock.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, api.ControlFileName), fmt.Appendf(nil, `{"socket":%q,"token":"t"}`, sock), 0o600); err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
		for len(conns) > 0 {
			(<-conns).Close()
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if len(conns) == cap(conns) {
				c.Close()
				continue
			}
			conns <- c
			req, err := http.ReadRequest(bufio.NewReader(c))
			switch {
			case err != nil || silentFirst:
			case req.URL.Path == "/v1/runs" && req.Method == http.MethodPost:
				body := `{"run_id":"run_hang","state":"active","kind":"local","requester":"uid:0","created_at":"2026-01-01T00:00:00Z"}`
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
			case req.URL.Path == "/v1/actions":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+
					"event: state\ndata: {\"state\":\"waiting_approval\",\"action_id\":\"act_hang\",\"kind\":\"call\",\"approval_id\":\"apr_x\"}\n\n")
			default:
				io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
			}
		}
	}()
	return sock
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
