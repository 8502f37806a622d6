package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp"
)

// filesBackend is fakeBackend with the file tools' part: the stdio
// bridge's whole tool set is listed.
type filesBackend struct{ fakeBackend }

func (*filesBackend) Upload(context.Context, io.Reader, int64) (*api.Upload, error) {
	return nil, errors.New("the fake takes no uploads")
}

func (*filesBackend) Fetch(context.Context, *api.Action, io.Writer) (int64, error) {
	return 0, errors.New("the fake fetches nothing")
}

// maxToolList is the most JSON tools/list may take: a host sends every
// tool's name, description and schemas to the model with each request, so
// the list costs context on every turn.
const maxToolList = 12_000

// TestToolListIsSmall: tools/list, with all five tools (the stdio
// bridge's set), stays within maxToolList bytes of JSON. go test -run
// TestToolListIsSmall -v ./gateway/mcp prints its size.
func TestToolListIsSmall(t *testing.T) {
	t.Parallel()
	cs, _ := connect(t, &filesBackend{}, mcp.Options{FileRoot: t.TempDir()})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 5 {
		t.Fatalf("%d tools listed, want 5 (the file tools too)", len(res.Tools))
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list: %d bytes of JSON", len(b))
	for _, tool := range res.Tools {
		tb, _ := json.Marshal(tool)
		ob, _ := json.Marshal(tool.OutputSchema)
		t.Logf("  %s: %d bytes, output schema %d", tool.Name, len(tb), len(ob))
	}
	if len(b) > maxToolList {
		t.Errorf("tools/list is %d bytes of JSON, over %d", len(b), maxToolList)
	}
}
