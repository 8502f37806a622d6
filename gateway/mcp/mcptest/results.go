package mcptest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
)

// Structured decodes a tool result's structured content as T.
func Structured[T any](t testing.TB, res *sdk.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}

// Text joins a tool result's text content.
func Text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Events collects the log events airlock's MCP server sends during calls;
// Handle is the client's LoggingMessageHandler.
type Events struct {
	mu     sync.Mutex
	events []mcp.LogEvent
}

// Handle records one log message that carries a LogEvent.
func (e *Events) Handle(_ context.Context, r *sdk.LoggingMessageRequest) {
	var ev mcp.LogEvent
	b, _ := json.Marshal(r.Params.Data)
	if json.Unmarshal(b, &ev) == nil {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}
}

// Reset forgets the events so far.
func (e *Events) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = nil
}

// Wait returns the first event in state s, waiting up to testkit.Patience
// for it, and forgets it and every event before it.
func (e *Events) Wait(t testing.TB, s api.State) mcp.LogEvent {
	t.Helper()
	deadline := time.Now().Add(testkit.Patience)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		for i, ev := range e.events {
			if ev.State == s {
				e.events = slices.Delete(e.events, 0, i+1)
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s event", s)
	return mcp.LogEvent{}
}
