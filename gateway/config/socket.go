package config

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// What the configuration asks of the operating system: its groups and
// the directories above the socket. Decoding and checking the file stay
// apart from it, but for socket_group's existence.

// GroupID is socket_group's numeric id, -1 without one.
func (l Listen) GroupID() (int, error) {
	if l.SocketGroup == "" {
		return -1, nil
	}
	g, err := user.LookupGroup(l.SocketGroup)
	if err != nil {
		return 0, fmt.Errorf("socket_group %q: %w", l.SocketGroup, err)
	}
	return strconv.Atoi(g.Gid)
}

// SocketUnderStateDir reports whether the socket is inside the state
// directory (the default): its group must then pass through that
// directory.
func (c *Config) SocketUnderStateDir() bool {
	rel, err := filepath.Rel(c.StateDir, c.Listen.Socket)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// SocketReachable checks that socket_group's members can reach the
// socket: every existing directory above the ones the gateway makes and
// manages itself (the socket's, and the state directory when the socket
// is inside it) must let the group pass.
func (c *Config) SocketReachable() error {
	gid, err := c.Listen.GroupID()
	if err != nil || gid < 0 {
		return err
	}
	managed := map[string]bool{filepath.Dir(c.Listen.Socket): true}
	if c.SocketUnderStateDir() {
		for d := filepath.Dir(c.Listen.Socket); d != c.StateDir && d != "/"; d = filepath.Dir(d) {
			managed[d] = true
		}
		managed[c.StateDir] = true
	}
	for d := filepath.Dir(c.Listen.Socket); ; d = filepath.Dir(d) {
		if !managed[d] {
			var st syscall.Stat_t
			if err := syscall.Stat(d, &st); err == nil {
				if st.Mode&0o001 == 0 && (st.Mode&0o010 == 0 || int(st.Gid) != gid) {
					return fmt.Errorf("listen.socket_group %q cannot reach the socket %s: the directory %s (mode %04o) lets neither that group nor others pass; fix: chmod o+x %s, or chgrp %s %s && chmod g+x %s",
						c.Listen.SocketGroup, c.Listen.Socket, d, st.Mode&0o7777, d, c.Listen.SocketGroup, d, d)
				}
			}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// groupExists reports whether the group name exists on this host.
func groupExists(name string) bool {
	_, err := user.LookupGroup(name)
	return err == nil
}
