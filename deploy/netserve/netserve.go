// Package netserve is the accept loop airlock's in-process servers share
// (the demo's SSH target, the tests' fault server and network proxies):
// each accepted connection is served in a goroutine the server owns and
// is tracked, so that Close stops accepting, ends every connection and
// returns only once every handler has returned.
//
// It knows nothing of what is spoken on the connections.
package netserve

import (
	"net"
	"sync"
)

// Server serves one listener until Close.
type Server struct {
	ln     net.Listener
	handle func(net.Conn)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Serve accepts connections on ln and calls handle for each in a goroutine
// of its own; the connection is closed when handle returns. Serve takes
// ownership of ln: Close closes it.
func Serve(ln net.Listener, handle func(net.Conn)) *Server {
	s := &Server{ln: ln, handle: handle, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s
}

// Close stops accepting, closes every connection and waits for every
// handler to return. It returns the listener's Close error.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.handle(c)
		})
	}
}
