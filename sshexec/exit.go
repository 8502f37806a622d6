package sshexec

import (
	"sync"

	"golang.org/x/crypto/ssh"
)

// exitWatcher collects the session channel's requests from the server:
// exit-status and exit-signal (RFC 4254 §6.10).
type exitWatcher struct {
	reported chan struct{} // closed at the first exit-status or exit-signal
	closed   chan struct{} // closed when the channel's requests end

	mu sync.Mutex
	st exitState
}

type exitState struct {
	code       int
	hasCode    bool
	signal     string
	coreDumped bool
}

func (s exitState) reported() bool { return s.hasCode || s.signal != "" }

func newExitWatcher() *exitWatcher {
	return &exitWatcher{reported: make(chan struct{}), closed: make(chan struct{})}
}

func (w *exitWatcher) collect(reqs <-chan *ssh.Request) {
	defer close(w.closed)
	var once sync.Once
	for r := range reqs {
		switch r.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(r.Payload, &m) == nil {
				w.mu.Lock()
				if !w.st.reported() {
					w.st.code, w.st.hasCode = int(m.Status), true
				}
				w.mu.Unlock()
				once.Do(func() { close(w.reported) })
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(r.Payload, &m) == nil && m.Signal != "" {
				w.mu.Lock()
				if !w.st.reported() {
					w.st.signal, w.st.coreDumped = m.Signal, m.CoreDumped
				}
				w.mu.Unlock()
				once.Do(func() { close(w.reported) })
			}
		}
		if r.WantReply {
			r.Reply(false, nil)
		}
	}
}

func (w *exitWatcher) result() exitState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}
