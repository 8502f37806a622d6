package gateway

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
)

func TestWriteControl(t *testing.T) {
	d := filepath.Join(t.TempDir(), "run")
	if err := securefile.PrivateDir(d, -1); err != nil {
		t.Fatal(err)
	}
	c := api.Control{Socket: filepath.Join(d, "airlock.sock"), Token: "00112233445566778899aabbccddeeff"}
	if err := writeControl(d, -1, c); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(d, ControlFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("control file mode %04o, want 0600", fi.Mode().Perm())
	}
	got, err := api.ReadControl(c.Socket)
	if err != nil || got != c {
		t.Fatalf("ReadControl = %+v, %v", got, err)
	}
	// Replaced atomically: no temporary files are left behind.
	ents, _ := os.ReadDir(d)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the control file", len(ents))
	}
}

func TestLocalToken(t *testing.T) {
	a, err := newLocalToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newLocalToken()
	if len(a.hex) != 32 || a.hex == b.hex {
		t.Fatalf("tokens %d chars, equal %v: want 128 random bits", len(a.hex), a.hex == b.hex)
	}
	if !a.equal(a.hex) || a.equal(b.hex) || a.equal("") || a.equal(a.hex[:31]) || (localToken{}).equal("") {
		t.Error("token comparison is wrong")
	}
}

func TestListenSocket(t *testing.T) {
	d := filepath.Join(t.TempDir(), "run")
	if err := securefile.PrivateDir(d, -1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d, "airlock.sock")
	l, err := listenSocket(path, -1)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %04o, want 0600", fi.Mode().Perm())
	}
	if _, err := listenSocket(path, -1); err == nil {
		t.Error("a second listener on a live socket was allowed")
	}
	// The socket's peer credentials are httpapi's (ConnContext), tested
	// there. A stale socket (its listener gone, the file left) is
	// replaced; a regular file is never removed.
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := listenSocket(path, -1)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	other := filepath.Join(d, "file")
	os.WriteFile(other, []byte("keep"), 0o600)
	if _, err := listenSocket(other, -1); err == nil {
		t.Error("listenSocket replaced a regular file")
	}
	if b, _ := os.ReadFile(other); string(b) != "keep" {
		t.Error("the regular file was changed")
	}
}

func TestSocketGroupModes(t *testing.T) {
	gid := os.Getegid()
	d := filepath.Join(t.TempDir(), "run")
	if err := securefile.PrivateDir(d, gid); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d, "airlock.sock")
	l, err := listenSocket(path, gid)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := writeControl(d, gid, api.Control{Socket: path, Token: "t"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{d: 0o750, path: 0o660, filepath.Join(d, ControlFileName): 0o640} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || int(fi.Sys().(*syscall.Stat_t).Gid) != gid {
			t.Errorf("%s: mode %04o gid %d, want %04o gid %d", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
}
