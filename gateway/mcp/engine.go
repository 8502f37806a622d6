package mcp

import (
	"context"
	"net/http"

	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/engine"
)

// EngineBackend is the tools' Backend for one agent over the gateway's
// engine: its action lifecycle, as POST /v1/actions runs it for that
// caller (MCP over Streamable HTTP: a run token).
type EngineBackend struct {
	e *engine.Actions
	c engine.Caller
}

// NewEngineBackend returns the tools' Backend for caller c over the
// engine's actions: the tools act and read, nothing else.
func NewEngineBackend(e *engine.Actions, c engine.Caller) *EngineBackend {
	return &EngineBackend{e: e, c: c}
}

// RunAction starts the action and follows its events. When ctx ends (the
// MCP call was cancelled or its session closed) the action is cancelled;
// RunAction waits until that outcome is recorded.
func (b *EngineBackend) RunAction(ctx context.Context, req api.ActionRequest, ev api.Events) (*api.Action, error) {
	a, err := b.e.Start(ctx, b.c, req)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeUnavailable, Message: "the gateway is shutting down"}, Status: http.StatusServiceUnavailable}
	}
	return b.follow(ctx, a, ev, func() (*api.Action, error) {
		<-a.Done() // the action records its cancellation
		return b.result(context.WithoutCancel(ctx), a)
	})
}

// follow passes a's events on to ev until it finishes, and returns its
// result then; when ctx ends first, it returns what ended returns.
func (b *EngineBackend) follow(ctx context.Context, a *engine.Action, ev api.Events, ended func() (*api.Action, error)) (*api.Action, error) {
	events, unsubscribe := a.Subscribe()
	defer unsubscribe()
	// Events before the subscription are summed up by the current state.
	if ev.State != nil {
		ev.State(a.StateEvent())
	}
	for {
		select {
		case e, ok := <-events:
			if !ok {
				<-a.Done() // the channel closes once the outcome is there
				return b.result(context.WithoutCancel(ctx), a)
			}
			switch d := e.Data.(type) {
			case api.StateEvent:
				if ev.State != nil {
					ev.State(d)
				}
			case api.OutputEvent:
				if ev.Output != nil {
					if p, err := api.DecodeBytes(d.Data, d.Encoding); err == nil {
						ev.Output(e.Name, p)
					}
				}
			}
		case <-ctx.Done():
			return ended()
		}
	}
}

// StartAction starts the action detached from ctx, as POST
// /v1/actions?wait=false does.
func (b *EngineBackend) StartAction(ctx context.Context, req api.ActionRequest) (string, error) {
	a, err := b.e.Start(context.WithoutCancel(ctx), b.c, req)
	if err != nil {
		return "", &api.Error{Err: api.ErrorBody{Code: api.CodeUnavailable, Message: "the gateway is shutting down"}, Status: http.StatusServiceUnavailable}
	}
	return a.ID(), nil
}

// WaitAction follows an action of this token's run until it finishes or
// ctx ends.
func (b *EngineBackend) WaitAction(ctx context.Context, id string, ev api.Events) (*api.Action, error) {
	a, err := b.e.ActionOf(ctx, b.c, id)
	switch {
	case err != nil && ctx.Err() != nil:
		// The wait ended before the action's run was known: it is
		// still being requested.
		return &api.Action{ID: id, State: api.StateRequested}, nil
	case err != nil:
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: err.Error()}, Status: http.StatusNotFound}
	}
	return b.follow(ctx, a, ev, func() (*api.Action, error) {
		select {
		case <-a.Done(): // it finished as the wait ended: its result
			return b.result(context.WithoutCancel(ctx), a)
		default:
		}
		obj := a.Snapshot()
		return &obj, nil
	})
}

// Output reads a page of an action of this token's run.
func (b *EngineBackend) Output(ctx context.Context, id, stream string, offset, limit int64) (*api.OutputPage, error) {
	a, err := b.e.ActionOf(ctx, b.c, id)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: err.Error()}, Status: http.StatusNotFound}
	}
	pg, err := a.Page(ctx, stream, offset, limit)
	if err != nil {
		return nil, engineError(err)
	}
	return &pg, nil
}

// engineError is a refusal of the engine as the API answers it.
func engineError(err error) error {
	if we := engine.WireError(err); we != nil {
		return we
	}
	return &api.Error{Err: api.ErrorBody{Code: api.CodeInternal, Message: "the output could not be read"}, Status: http.StatusInternalServerError}
}

// Targets lists the configured targets as GET /v1/targets does.
func (b *EngineBackend) Targets(ctx context.Context) ([]api.Target, error) {
	return b.e.Targets(), nil
}

// Action returns an action of this token's run, as GET /v1/actions/{id}
// does for the token.
func (b *EngineBackend) Action(ctx context.Context, id string) (*api.Action, error) {
	a, err := b.e.ActionOf(ctx, b.c, id)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeNotFound, Message: err.Error()}, Status: http.StatusNotFound}
	}
	return b.result(ctx, a)
}

// result is the action object with its output, as the tools return it.
func (b *EngineBackend) result(ctx context.Context, a *engine.Action) (*api.Action, error) {
	obj, err := a.Result(ctx)
	if err != nil {
		return nil, &api.Error{Err: api.ErrorBody{Code: api.CodeInternal, Message: "the action finished, but its output could not be read; get_action may find it"}, Status: http.StatusInternalServerError}
	}
	return &obj, nil
}
