package engine

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlockgw/airlock/gateway/config"
)

// What the gateway asks of the host about its agents' socket: the
// socket_group's id, and whether that group can reach the socket through
// the directories above it.

// SocketGroupID is listen.socket_group's numeric id, -1 without one.
func SocketGroupID(l config.Listen) (int, error) {
	if l.SocketGroup == "" {
		return -1, nil
	}
	g, err := user.LookupGroup(l.SocketGroup)
	if err != nil {
		return 0, fmt.Errorf("socket_group %q: %w", l.SocketGroup, err)
	}
	return strconv.Atoi(g.Gid)
}

// socketUnderStateDir reports whether the socket is inside the state
// directory (the default): its group must then pass through that
// directory.
func socketUnderStateDir(cfg *config.Config) bool {
	rel, err := filepath.Rel(cfg.StateDir, cfg.Listen.Socket)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// CheckSocketReachable checks that socket_group's members can reach the
// socket: every existing directory above the ones the gateway makes and
// manages itself (the socket's, and the state directory when the socket
// is inside it) must let the group pass (config check).
func CheckSocketReachable(cfg *config.Config) error {
	gid, err := SocketGroupID(cfg.Listen)
	if err != nil || gid < 0 {
		return err
	}
	socket := cfg.Listen.Socket
	managed := map[string]bool{filepath.Dir(socket): true}
	if socketUnderStateDir(cfg) {
		for d := filepath.Dir(socket); d != cfg.StateDir && d != "/"; d = filepath.Dir(d) {
			managed[d] = true
		}
		managed[cfg.StateDir] = true
	}
	for d := filepath.Dir(socket); ; d = filepath.Dir(d) {
		if !managed[d] {
			var st syscall.Stat_t
			if err := syscall.Stat(d, &st); err == nil {
				if st.Mode&0o001 == 0 && (st.Mode&0o010 == 0 || int(st.Gid) != gid) {
					return fmt.Errorf("listen.socket_group %q cannot reach the socket %s: the directory %s (mode %04o) lets neither that group nor others pass; fix: chmod o+x %s, or chgrp %s %s && chmod g+x %s",
						cfg.Listen.SocketGroup, socket, d, st.Mode&0o7777, d, cfg.Listen.SocketGroup, d, d)
				}
			}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}
