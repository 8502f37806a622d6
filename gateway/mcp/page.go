package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/sshexec"
)

// Follow is how to go on with an action a call returned in flight: the
// tool to call and its arguments.
type Follow struct {
	Tool     string `json:"tool"`
	ActionID string `json:"action_id"`
	WaitS    int    `json:"wait_s"`
}

// PageResult is the structured result of get_action with a stream: the
// page alone — never the action's output again — with the action's id,
// state and outcome, and the arguments of the next page (none at the
// end).
type PageResult struct {
	ID       string          `json:"id"`
	State    api.State       `json:"state"`
	Outcome  sshexec.Outcome `json:"outcome,omitempty"`
	Page     *api.OutputPage `json:"page"`
	NextPage *PageArgs       `json:"next_page,omitempty"`
}

// PageArgs are get_action's arguments for a page.
type PageArgs struct {
	ActionID string `json:"action_id"`
	Stream   string `json:"stream"`
	Offset   int64  `json:"offset"`
	Limit    int64  `json:"limit"`
}

// page is get_action's result for a page of a's stored output.
func (t *tools) page(ctx context.Context, a *api.Action, in GetActionInput) (*sdk.CallToolResult, any, error) {
	limit := in.Limit
	if limit <= 0 || limit > int64(t.budget) {
		limit = int64(t.budget)
	}
	pg, err := t.b.Output(ctx, a.ID, in.Stream, in.Offset, limit)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return nil, nil, fmt.Errorf("the %s of action %s could not be read: %s", in.Stream, a.ID, ae.Err.Message)
		}
		return nil, nil, backendError("the output could not be read", err)
	}
	r := &PageResult{ID: a.ID, State: a.State, Outcome: a.Outcome, Page: pg}
	if pg.NextOffset != nil {
		r.NextPage = &PageArgs{ActionID: a.ID, Stream: pg.Stream, Offset: *pg.NextOffset, Limit: limit}
	}
	var b strings.Builder
	page(&b, pg)
	if n := r.NextPage; n != nil {
		fmt.Fprintf(&b, "next page: get_action with action_id %q, stream %q, offset %d and limit %d\n", n.ActionID, n.Stream, n.Offset, n.Limit)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimRight(b.String(), "\n")}}}, r, nil
}
