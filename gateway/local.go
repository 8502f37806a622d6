package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/gateway/api"
)

// ControlFileName is the file next to the socket that carries the socket
// path and the local token; airlock-ssh and airlock mcp find it from
// $AIRLOCK_SOCKET.
const ControlFileName = api.ControlFileName

// localToken is the 128-bit token every local connection presents. It is
// compared in constant time and never logged.
type localToken struct{ hex string }

func newLocalToken() (localToken, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return localToken{}, fmt.Errorf("gateway: local token: %w", err)
	}
	return localToken{hex: hex.EncodeToString(b)}, nil
}

func (t localToken) equal(presented string) bool {
	return len(t.hex) > 0 && subtle.ConstantTimeCompare([]byte(t.hex), []byte(presented)) == 1
}

func (localToken) String() string   { return "[redacted]" }
func (localToken) GoString() string { return "[redacted]" }

// UnsafeDirError says a directory that must be private is not.
type UnsafeDirError struct {
	Path    string
	Mode    fs.FileMode
	UID     uint32
	Problem string
	Fix     string
}

func (e *UnsafeDirError) Error() string {
	return fmt.Sprintf("gateway: %s: %s (mode %04o, owner uid %d); refusing to start; run: %s", e.Path, e.Problem, e.Mode.Perm(), e.UID, e.Fix)
}

// privateDir creates dir if missing (mode 0700, or 0750 with group gid ≥ 0
// owning it) and otherwise checks it: a real directory, owned by us. A
// directory someone else could write to is refused, not repaired: files
// already in it cannot be trusted. One that only others could read or
// enter (systemd's RuntimeDirectoryMode, an old socket_group setting) is
// given the mode and group the configuration asks for: nothing in it can
// have come from anyone else.
func privateDir(dir string, gid int) error {
	if err := checkPrivateDir(dir, gid, true); err != nil {
		return err
	}
	return checkPrivateDir(dir, gid, false)
}

// checkPrivateDir is privateDir's check; with repair it first creates the
// directory or sets its mode and group where that is safe.
func checkPrivateDir(dir string, gid int, repair bool) error {
	want := fs.FileMode(0o700)
	if gid >= 0 {
		want = 0o750
	}
	if repair {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		if err := os.Mkdir(dir, want); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	me := uint32(os.Geteuid())
	fix := fmt.Sprintf("chmod %o %s", want, dir)
	switch {
	case !fi.IsDir():
		return &UnsafeDirError{Path: dir, Mode: fi.Mode(), UID: st.Uid, Problem: "not a directory (a symlink?)", Fix: "rm " + dir}
	case st.Uid != me:
		return &UnsafeDirError{Path: dir, Mode: fi.Mode(), UID: st.Uid, Problem: "owned by another user", Fix: fmt.Sprintf("chown %d %s", me, dir)}
	case fi.Mode().Perm()&0o022 != 0:
		return &UnsafeDirError{Path: dir, Mode: fi.Mode(), UID: st.Uid, Problem: "writable by group or others", Fix: fix}
	case repair:
		// Ours and written by nobody else: set what the configuration
		// asks for (umask may also have cut a new directory's mode).
		return repairDir(dir, want, gid)
	case fi.Mode().Perm() != want:
		return &UnsafeDirError{Path: dir, Mode: fi.Mode(), UID: st.Uid, Problem: fmt.Sprintf("mode must be %04o", want), Fix: fix}
	case gid >= 0 && int(st.Gid) != gid:
		return &UnsafeDirError{Path: dir, Mode: fi.Mode(), UID: st.Uid, Problem: "not owned by the socket group", Fix: fmt.Sprintf("chgrp %d %s", gid, dir)}
	}
	return nil
}

// repairDir gives dir mode want and, with gid ≥ 0, group gid, through a
// descriptor opened without following links, after checking again through
// it that the directory is ours and written by nobody else: the name could
// have been swapped since it was checked.
func repairDir(dir string, want fs.FileMode, gid int) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("gateway: open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uint32(os.Geteuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("gateway: %s changed while it was checked; refusing to start", dir)
	}
	if gid >= 0 && int(st.Gid) != gid {
		if err := f.Chown(-1, gid); err != nil {
			return fmt.Errorf("gateway: chown %s to the socket group: %w", dir, err)
		}
	}
	if fi.Mode().Perm() != want {
		if err := f.Chmod(want); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	return nil
}

// groupID resolves the socket group; -1 when none is set.
func groupID(name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("gateway: socket_group %q: %w", name, err)
	}
	return strconv.Atoi(g.Gid)
}

// writeControl publishes the control file: written to a temporary file with
// the final mode, checked, synced, then renamed over control.json, so that
// a reader sees either the old file or the new one, never a partial or
// over-permissive one. If the mode cannot be applied nothing is published.
func writeControl(dir string, gid int, c api.Control) error {
	return writeControlWith(dir, gid, c, (*os.File).Chmod)
}

// writeControlWith is writeControl with the call that applies the mode
// (tests stand in for a file system that ignores it).
func writeControlWith(dir string, gid int, c api.Control, chmod func(*os.File, fs.FileMode) error) error {
	mode := fs.FileMode(0o600)
	if gid >= 0 {
		mode = 0o640
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".control-*.tmp")
	if err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	tmp := f.Name()
	published := false
	defer func() {
		if !published {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := chmod(f, mode); err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	if gid >= 0 {
		if err := f.Chown(-1, gid); err != nil {
			return fmt.Errorf("gateway: control file: chown to the socket group: %w", err)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	if fi.Mode().Perm() != mode {
		return fmt.Errorf("gateway: control file: mode %04o could not be applied (got %04o); not publishing the token", mode, fi.Mode().Perm())
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ControlFileName)); err != nil {
		return fmt.Errorf("gateway: control file: %w", err)
	}
	published = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// listenSocket listens on the Unix socket path in its private directory,
// replacing a stale socket (never any other kind of file).
func listenSocket(path string, gid int) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("gateway: %s exists and is not a socket; remove it", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("gateway: another gateway is listening on %s", path)
		}
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	l.SetUnlinkOnClose(true)
	mode := fs.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("gateway: chown socket to the socket group: %w", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return l, nil
}

// PeerCred is the identity the kernel reports for the other end of a local
// connection (SO_PEERCRED): taken when the connection was made, so it cannot
// be forged by the client.
type PeerCred struct {
	PID int32
	UID uint32
	GID uint32
}

func peerCred(c net.Conn) (PeerCred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return PeerCred{}, errors.New("gateway: not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, err
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("gateway: SO_PEERCRED: %w", serr)
	}
	return PeerCred{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

type peerCredKey struct{}

// withPeerCred is the local listener's ConnContext.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	pc, err := peerCred(c)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerCredKey{}, pc)
}

// peerCredFrom returns the local caller's credentials, if the request came
// over the local socket.
func peerCredFrom(ctx context.Context) (PeerCred, bool) {
	pc, ok := ctx.Value(peerCredKey{}).(PeerCred)
	return pc, ok
}
