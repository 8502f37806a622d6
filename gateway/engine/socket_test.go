package engine

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/config"
)

// socket_group's members must be able to pass every directory above the
// ones the gateway manages, or config check says which one and how to fix
// it.
func TestSocketReachable(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skip("no name for this process's group")
	}
	base, err := os.MkdirTemp("", "airlock-reach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(base, "srv")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{StateDir: filepath.Join(parent, "state"), Listen: config.Listen{SocketGroup: g.Name}}
	cfg.Listen.Socket = filepath.Join(cfg.StateDir, "run", "airlock.sock")
	if err := CheckSocketReachable(cfg); err == nil || !strings.Contains(err.Error(), parent) {
		t.Errorf("a 0700 directory above the state directory: %v", err)
	}
	for _, mode := range []os.FileMode{0o710, 0o701} {
		if err := os.Chmod(parent, mode); err != nil {
			t.Fatal(err)
		}
		if err := CheckSocketReachable(cfg); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	cfg.Listen.SocketGroup = ""
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckSocketReachable(cfg); err != nil {
		t.Errorf("without socket_group nothing needs reaching: %v", err)
	}
}
