package approvals

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// TestNoGoroutineLeftBehind: waiting, cancelling, expiring and watching
// anchors leave no goroutine once the store is closed.
func TestNoGoroutineLeftBehind(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t, func(o *Options) { o.Inspector = &ProcFS{} })
	ctx := context.Background()
	run, _ := e.remoteRun()
	for range 20 {
		cctx, cancel := context.WithCancel(ctx)
		_, ch := e.authorize(cctx, run.ID, act("call-box", "ls"))
		cancel()
		recv(t, ch)
	}
	_, ch := e.authorize(ctx, run.ID, act("run-box", "ls"))
	e.clock.Advance(DefaultApprovalTimeout)
	recv(t, ch)
	// A real anchor watcher (this process's parent chain).
	e.s.RegisterAnchor(ctx, Peer{PID: os.Getpid(), UID: os.Geteuid()})
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	if e.opts.DB != nil {
		e.opts.DB.Close() // the caller's pool, as the engine closes it
	}
	testkit.Poll(testkit.Patience, func() bool { return runtime.NumGoroutine() <= before })
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
