package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/api"
)

// localListener is the agents' Unix socket: a private directory, the
// control file with the local token, and the connections made with it (so
// that rotating the token can cut them).
type localListener struct {
	s    *Server
	path string
	dir  string
	gid  int
	ln   *net.UnixListener
	srv  *http.Server

	mu    sync.Mutex
	token localToken
	conns map[net.Conn]struct{}
}

func (l *localListener) currentToken() localToken {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// rotate publishes a new local token and cuts every open local connection:
// whoever held the old token must read the new one.
func (l *localListener) rotate(ctx context.Context) error {
	tok, err := newLocalToken()
	if err != nil {
		return err
	}
	if err := writeControl(l.dir, l.gid, api.Control{Socket: l.path, Token: tok.hex}); err != nil {
		return err
	}
	l.mu.Lock()
	l.token = tok
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	if _, err := l.s.record(ctx, "", "", tokenRotated{ConnectionsCut: int64(len(conns))}); err != nil {
		l.s.log.Error("recording the token rotation", "error", err)
	}
	// Cut after this response is written: the rotating connection is one
	// of them.
	time.AfterFunc(100*time.Millisecond, func() {
		for c := range conns {
			c.Close()
		}
	})
	l.s.log.Info("local token rotated", "connections_cut", len(conns))
	return nil
}

func (l *localListener) track(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew:
		l.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	}
}

// Serve listens on the local socket and the HTTP listener and serves until
// ctx ends. Then it stops accepting, lets in-flight actions run on for the
// shutdown grace, cancels those still running (their outcome recorded),
// records gateway.stopped and signs a final checkpoint.
func (s *Server) Serve(ctx context.Context) error {
	// Failing to listen still stops the gateway properly.
	fail := func(err error) error {
		s.Close(context.Background())
		return err
	}
	gid, err := groupID(s.cfg.Listen.SocketGroup)
	if err != nil {
		return fail(err)
	}
	dir := filepath.Dir(s.cfg.Listen.Socket)
	if err := privateDir(dir, gid); err != nil {
		return fail(err)
	}
	tok, err := newLocalToken()
	if err != nil {
		return fail(err)
	}
	uln, err := listenSocket(s.cfg.Listen.Socket, gid)
	if err != nil {
		return fail(err)
	}
	l := &localListener{s: s, path: s.cfg.Listen.Socket, dir: dir, gid: gid, ln: uln, token: tok, conns: map[net.Conn]struct{}{}}
	if err := writeControl(dir, gid, api.Control{Socket: l.path, Token: tok.hex}); err != nil {
		uln.Close()
		return fail(err)
	}
	s.local = l
	handler := s.router()
	l.srv = &http.Server{
		Handler:           handler,
		ConnContext:       withPeerCred,
		ConnState:         l.track,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.Named("socket").StandardLogger(nil),
	}

	var servers []*http.Server
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	servers = append(servers, l.srv)
	wg.Go(func() {
		if err := l.srv.Serve(uln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	})
	s.log.Info("listening", "socket", l.path)

	if s.cfg.Listen.HTTP != "" {
		hs, ln, err := s.httpServer(handler)
		if err != nil {
			l.srv.Close()
			wg.Wait()
			os.Remove(filepath.Join(dir, ControlFileName))
			return fail(err)
		}
		servers = append(servers, hs)
		useTLS := hs.TLSConfig != nil
		wg.Go(func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
		s.httpAddr = ln.Addr().String()
		s.log.Info("listening", "http", s.httpAddr, "tls", useTLS)
	}
	s.log.Info("gateway ready")
	close(s.ready)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}

	// Stop accepting; let in-flight actions finish within the grace.
	s.draining.Store(true)
	s.log.Info("stopping: waiting for in-flight actions", "grace", s.grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	var swg sync.WaitGroup
	for _, hs := range servers {
		swg.Go(func() { hs.Shutdown(graceCtx) })
	}
	done := make(chan struct{})
	go func() { s.actionsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-graceCtx.Done():
		s.log.Warn("grace over: cancelling in-flight actions")
	}
	s.cancelBase()
	s.actionsWG.Wait()
	for _, hs := range servers {
		hs.Close()
	}
	swg.Wait()
	wg.Wait()
	os.Remove(filepath.Join(dir, ControlFileName))
	if err := s.Close(context.Background()); err != nil && serveErr == nil {
		serveErr = err
	}
	if serveErr == nil {
		s.log.Info("stopped: every action recorded, audit log closed")
	}
	return serveErr
}

func (s *Server) httpServer(h http.Handler) (*http.Server, net.Listener, error) {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.Named("http").StandardLogger(nil),
	}
	ln, err := net.Listen("tcp", s.cfg.Listen.HTTP)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: listen.http: %w", err)
	}
	if s.cfg.Listen.TLSCert != "" {
		if err := CheckSecretFile(s.cfg.Listen.TLSKey); err != nil {
			ln.Close()
			return nil, nil, err
		}
		cert, err := tls.LoadX509KeyPair(s.cfg.Listen.TLSCert, s.cfg.Listen.TLSKey)
		if err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("gateway: TLS: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	} else if host, _, _ := net.SplitHostPort(ln.Addr().String()); !isLoopback(host) {
		// The configuration check refuses this; never serve it anyway.
		ln.Close()
		return nil, nil, fmt.Errorf("gateway: listen.http %s is not loopback and has no TLS", s.cfg.Listen.HTTP)
	}
	return hs, ln, nil
}

// verifyAudit verifies this gateway's own chain with its own verifier key
// and checkpoints.log, for the reviewer's audit status.
func (s *Server) verifyAudit(ctx context.Context, vo auditchain.VerifyOptions) (*auditchain.Report, error) {
	key, err := auditchain.ParseVerifierKey(s.alog.VerifierKey())
	if err != nil {
		return nil, err
	}
	vo.Path = filepath.Join(s.cfg.StateDir, "audit.db")
	vo.Key = key
	if notes, err := auditchain.ReadTrustedNotes(filepath.Join(s.cfg.StateDir, "checkpoints.log")); err == nil {
		vo.Trusted = notes
	}
	return auditchain.Verify(ctx, vo)
}

// Ready is closed when Serve is listening.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// HTTPAddr is the HTTP listener's address once Ready is closed ("" when
// there is none).
func (s *Server) HTTPAddr() string { return s.httpAddr }

func fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

func osGeteuid() int { return os.Geteuid() }
