package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/airlockgw/airlock/deploy/securefile"
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
		return localToken{}, fmt.Errorf("local API token: %w", err)
	}
	return localToken{hex: hex.EncodeToString(b)}, nil
}

func (t localToken) equal(presented string) bool {
	return len(t.hex) > 0 && subtle.ConstantTimeCompare([]byte(t.hex), []byte(presented)) == 1
}

func (localToken) String() string   { return "[redacted]" }
func (localToken) GoString() string { return "[redacted]" }

// writeControl publishes the control file (securefile.WriteFile): a
// reader sees the old file or the new one, never a partial or
// over-permissive one, and if the mode cannot be applied nothing is
// published.
func writeControl(dir string, gid int, c api.Control) error {
	mode := fs.FileMode(0o600)
	if gid >= 0 {
		mode = 0o640
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := securefile.WriteFile(filepath.Join(dir, ControlFileName), b, securefile.WriteOptions{Mode: mode, UID: -1, GID: gid}); err != nil {
		return fmt.Errorf("local control file: %w", err)
	}
	return nil
}

// listenSocket listens on the Unix socket path in its private directory,
// replacing a stale socket (never any other kind of file).
func listenSocket(path string, gid int) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("local socket %s exists and is not a socket; remove it", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("another gateway is listening on the local socket %s", path)
		}
		os.Remove(path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("local socket: %w", err)
	}
	l.SetUnlinkOnClose(true)
	mode := fs.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("local socket: chown to the socket group: %w", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("local socket: %w", err)
	}
	return l, nil
}
