package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/gateway/engine"
)

// peerCred returns the identity the kernel reports for the other end of a
// local connection (SO_PEERCRED): taken when the connection was made, so
// it cannot be forged by the client.
func peerCred(c net.Conn) (engine.Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return engine.Peer{}, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return engine.Peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return engine.Peer{}, err
	}
	if serr != nil {
		return engine.Peer{}, fmt.Errorf("local caller's credentials (SO_PEERCRED): %w", serr)
	}
	return engine.Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

type peerKey struct{}

// ConnContext is the local socket's http.Server.ConnContext: it attaches
// the connection's peer credentials, which make its requests local ones.
// A connection whose credentials cannot be read gets none, and is then
// treated as an HTTP caller without a local identity.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	pc, err := peerCred(c)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, pc)
}

// peerFrom returns the local caller's credentials, if the request came
// over the local socket.
func peerFrom(ctx context.Context) (engine.Peer, bool) {
	pc, ok := ctx.Value(peerKey{}).(engine.Peer)
	return pc, ok
}
