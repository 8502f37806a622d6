package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/gateway/api"
)

// LogEvent is the data of the log messages a call sends as its action
// moves: hosts show them, and scripts can read the action id before the
// result arrives.
type LogEvent struct {
	ActionID   string    `json:"action_id"`
	State      api.State `json:"state"`
	ApprovalID string    `json:"approval_id,omitempty"`
	// Kind is "run" or "call" while waiting for approval.
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
}

// reporter turns an action's state events into MCP progress notifications
// (when the caller gave a progress token) and log messages (when the
// client set a log level), and repeats the notice while a reviewer is
// being asked, so that a host shows a human is in the loop and does not
// give up on a silent call.
type reporter struct {
	ctx      context.Context
	session  *sdk.ServerSession
	token    any
	interval time.Duration

	// mu serialises sends: progress must increase on the wire.
	mu       sync.Mutex
	progress float64
	last     LogEvent
	waiting  bool
	since    time.Time

	stopc chan struct{}
	done  chan struct{}
}

func newReporter(ctx context.Context, req *sdk.CallToolRequest, interval time.Duration) *reporter {
	r := &reporter{ctx: ctx, session: req.Session, interval: interval, stopc: make(chan struct{}), done: make(chan struct{})}
	if req.Params != nil {
		r.token = req.Params.GetProgressToken()
	}
	go r.heartbeat()
	return r
}

// stop ends the heartbeat and waits for it.
func (r *reporter) stop() {
	close(r.stopc)
	<-r.done
}

func (r *reporter) heartbeat() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stopc:
			return
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.mu.Lock()
			if r.waiting {
				ev := r.last
				ev.Message = fmt.Sprintf("still waiting for a human reviewer to approve (approval %s, %s so far)", ev.ApprovalID, time.Since(r.since).Round(time.Second))
				r.sendLocked(ev, false)
			}
			r.mu.Unlock()
		}
	}
}

// state reports one state event of the action.
func (r *reporter) state(s api.StateEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := LogEvent{ActionID: r.last.ActionID, State: s.State, ApprovalID: s.ApprovalID, Kind: s.Kind, Message: s.Message}
	if s.ActionID != "" {
		ev.ActionID = s.ActionID
	}
	if ev.State == r.last.State && ev.ApprovalID == r.last.ApprovalID && ev.ActionID == r.last.ActionID {
		return // the stream's first event repeats the current state
	}
	switch ev.State {
	case api.StateRequested:
		ev.Message = "action " + ev.ActionID + " requested"
	case api.StateWaitingApproval:
		if ev.Message == "" {
			ev.Message = "waiting for a reviewer to approve"
		}
		ev.Message = fmt.Sprintf("%s: a human is being asked (approval %s)", ev.Message, ev.ApprovalID)
		r.waiting, r.since = true, time.Now()
	case api.StateConnecting:
		ev.Message = "connecting to the target"
	case api.StateRunning:
		ev.Message = "the command is running"
	case api.StateFinished:
		ev.Message = "finished"
	}
	if ev.State != api.StateWaitingApproval {
		r.waiting = false
	}
	r.last = ev
	r.sendLocked(ev, true)
}

// sendLocked sends a progress notification and, for state changes, a log
// message. Failures are ignored: a client that went away cancels the call.
func (r *reporter) sendLocked(ev LogEvent, log bool) {
	if r.ctx.Err() != nil || r.session == nil {
		return
	}
	if r.token != nil {
		r.progress++
		r.session.NotifyProgress(r.ctx, &sdk.ProgressNotificationParams{ProgressToken: r.token, Progress: r.progress, Message: ev.Message})
	}
	if log {
		level := sdk.LoggingLevel("info")
		if ev.State == api.StateWaitingApproval {
			level = "notice"
		}
		r.session.Log(r.ctx, &sdk.LoggingMessageParams{Level: level, Logger: "airlock", Data: ev})
	}
}
