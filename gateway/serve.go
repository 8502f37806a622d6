package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/httpapi"
)

// localListener is the agents' Unix socket: a private directory, the
// control file with the local token, and the connections made with it (so
// that rotating the token can cut them). It is the API's httpapi.Local.
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

// ValidToken reports, in constant time, whether token is the local token.
func (l *localListener) ValidToken(token string) bool {
	l.mu.Lock()
	t := l.token
	l.mu.Unlock()
	return t.equal(token)
}

// Rotate publishes a new local token and cuts every open local connection:
// whoever held the old token must read the new one.
func (l *localListener) Rotate(ctx context.Context) error {
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
	if err := l.s.eng.Admin().RecordTokenRotated(ctx, len(conns)); err != nil {
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
	uln, err := s.listenLocal()
	if err != nil {
		return fail(err)
	}
	l := s.local

	var servers []*http.Server
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	serve := func(hs *http.Server, ln net.Listener) {
		servers = append(servers, hs)
		wg.Go(func() {
			// Every connection's goroutine inherits the label: a CPU
			// profile counts reading, checking and answering requests as
			// HTTP handling, apart from the actions' phases.
			engine.SetCPUPhase(engine.CPUHTTP)
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
	}
	serve(l.srv, uln)
	s.log.Info("listening", "socket", l.path)

	// A listener that cannot start stops those already serving.
	abort := func(err error) error {
		for _, hs := range servers {
			hs.Close()
		}
		wg.Wait()
		os.Remove(filepath.Join(l.dir, ControlFileName))
		return fail(err)
	}
	if s.cfg.Listen.HTTP != "" {
		hs, ln, err := s.httpServer(s.handler)
		if err != nil {
			return abort(err)
		}
		useTLS := hs.TLSConfig != nil
		serve(hs, ln)
		s.httpAddr = ln.Addr().String()
		s.log.Info("listening", "http", s.httpAddr, "tls", useTLS)
	}
	if t := s.cfg.Telemetry; t != nil && t.PprofListen != "" {
		ps, ln, err := pprofServer(t.PprofListen, s.log)
		if err != nil {
			return abort(err)
		}
		serve(ps, ln)
		s.log.Warn("serving Go profiles to this host", "pprof", ln.Addr().String())
	}
	s.log.Info("gateway ready")
	s.readyOnce.Do(func() { close(s.ready) })

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	return s.stop(servers, &wg, serveErr)
}

// stop stops the gateway that serves on servers (whose Serve calls wg
// waits for), after serveErr: it stops accepting, lets in-flight actions
// finish within the grace and cancels the rest, removes the control file
// and closes the engine.
func (s *Server) stop(servers []*http.Server, wg *sync.WaitGroup, serveErr error) error {
	// Stop accepting; let in-flight actions finish within the grace.
	s.eng.Drain()
	s.log.Info("stopping: waiting for in-flight actions", "grace", s.grace)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	var swg sync.WaitGroup
	for _, hs := range servers {
		swg.Go(func() { hs.Shutdown(graceCtx) })
	}
	select {
	case <-s.eng.Idle():
	case <-graceCtx.Done():
		s.log.Warn("grace over: cancelling in-flight actions")
	}
	// Cancel what still runs and wait for its outcome, so that its caller
	// gets the answer before the listeners close.
	s.eng.Cancel()
	for _, hs := range servers {
		hs.Close()
	}
	swg.Wait()
	wg.Wait()
	os.Remove(filepath.Join(s.local.dir, ControlFileName))
	if err := s.Close(context.Background()); err != nil && serveErr == nil {
		serveErr = err
	}
	if serveErr == nil {
		s.log.Info("stopped: every action recorded, audit log closed")
	}
	return serveErr
}

// listenLocal opens the agents' Unix socket in its private directory and
// publishes a fresh local token in the control file beside it.
func (s *Server) listenLocal() (*net.UnixListener, error) {
	gid, err := engine.SocketGroupID(s.cfg.Listen)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(s.cfg.Listen.Socket)
	if err := securefile.PrivateDir(dir, gid); err != nil {
		return nil, err
	}
	tok, err := newLocalToken()
	if err != nil {
		return nil, err
	}
	uln, err := listenSocket(s.cfg.Listen.Socket, gid)
	if err != nil {
		return nil, err
	}
	l := s.local
	l.path, l.dir, l.gid, l.ln, l.conns = s.cfg.Listen.Socket, dir, gid, uln, map[net.Conn]struct{}{}
	l.mu.Lock()
	l.token = tok
	l.mu.Unlock()
	if err := writeControl(dir, gid, api.Control{Socket: l.path, Token: tok.hex}); err != nil {
		uln.Close()
		return nil, err
	}
	l.srv = &http.Server{
		Handler:           s.handler,
		ConnContext:       httpapi.ConnContext,
		ConnState:         l.track,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.log.Named("socket").StandardLogger(nil),
	}

	return uln, nil
}

func (s *Server) httpServer(h http.Handler) (*http.Server, net.Listener, error) {
	// The gateway's own listener problems say "gateway:"; the API's are
	// httpapi's.
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
		return nil, nil, fmt.Errorf("listen.http: %w", err)
	}
	if s.cfg.Listen.TLSCert != "" {
		if err := securefile.CheckSecret(s.cfg.Listen.TLSKey, nil, -1); err != nil {
			ln.Close()
			return nil, nil, err
		}
		cert, err := tls.LoadX509KeyPair(s.cfg.Listen.TLSCert, s.cfg.Listen.TLSKey)
		if err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("listen.tls_cert/tls_key: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if f := s.cfg.Listen.ClientCAFile; f != "" {
			// Agents with an mtls block present a certificate of this CA;
			// everyone else (reviewers, token agents) presents none.
			pool, err := config.LoadCertPool(f)
			if err != nil {
				ln.Close()
				return nil, nil, fmt.Errorf("listen.client_ca_file: %w", err)
			}
			hs.TLSConfig.ClientCAs, hs.TLSConfig.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
		ln = tls.NewListener(ln, hs.TLSConfig)
	} else if host, _, _ := net.SplitHostPort(ln.Addr().String()); !config.IsLoopback(host) {
		// The configuration check refuses this; never serve it anyway.
		ln.Close()
		return nil, nil, fmt.Errorf("listen.http %s is not loopback and has no TLS", s.cfg.Listen.HTTP)
	}
	return hs, ln, nil
}

// pprofServer serves Go's profiles (/debug/pprof/) on a loopback address,
// for the host's operator: stacks and timings, never the API.
func pprofServer(addr string, log hclog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry.pprof_listen: %w", err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !config.IsLoopback(host) {
		ln.Close()
		return nil, nil, fmt.Errorf("telemetry.pprof_listen %s is not loopback", addr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.Named("pprof").StandardLogger(nil),
	}, ln, nil
}

// uiBase is the pages' base URL as the HTTP listener serves them, "" when
// there is none.
func (s *Server) uiBase() string {
	addr := s.HTTPAddr()
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	scheme := "http"
	if s.cfg.Listen.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
