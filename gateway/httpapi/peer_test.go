package httpapi

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockgw/airlock/gateway/engine"
)

// A request over a Unix socket carries the kernel's word on its peer.
func TestConnContextPeerCred(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan engine.Peer, 1)
	srv := &http.Server{
		ConnContext: ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pc, _ := peerFrom(r.Context())
			got <- pc
		}),
	}
	go srv.Serve(l)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := client.Get("http://local/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if pc := <-got; pc.PID != os.Getpid() || pc.UID != os.Getuid() || pc.GID != os.Getgid() {
		t.Errorf("peer cred %+v, want this process (pid %d uid %d gid %d)", pc, os.Getpid(), os.Getuid(), os.Getgid())
	}
}
