package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// repeatWindow is how long after the first signal another one is the
// same interruption: timeout(1) signals its command and then its whole
// process group, and a terminal's Ctrl-C reaches every process of the
// foreground group, so one interruption can arrive twice.
const repeatWindow = time.Second

// interrupted returns a context cancelled by the first SIGINT, SIGTERM or
// SIGHUP. Signals within window of it are the same interruption and are
// ignored; after that, while airlock-ssh waits for the outcome, a second
// one ends it at once (the default action). stop releases the signals.
func interrupted(window time.Duration) (ctx context.Context, stop func()) {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, sigs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			signal.Stop(ch)
			cancel()
		})
	}
	go func() {
		select {
		case <-ch:
		case <-done:
			return
		}
		cancel()
		quiet := time.NewTimer(window)
		defer quiet.Stop()
		for {
			select {
			case <-ch:
			case <-done:
				return
			case <-quiet.C:
				signal.Stop(ch)
				return
			}
		}
	}()
	return ctx, stop
}
