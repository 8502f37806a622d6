package gateway

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/gateway/api"
)

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	t.Run("created 0700", func(t *testing.T) {
		d := filepath.Join(base, "new", "run")
		if err := privateDir(d, -1); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("mode %04o, want 0700", fi.Mode().Perm())
		}
	})
	t.Run("created 0750 with a group", func(t *testing.T) {
		d := filepath.Join(base, "grp")
		if err := privateDir(d, os.Getegid()); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o750 {
			t.Errorf("mode %04o, want 0750", fi.Mode().Perm())
		}
	})
	// Readable or enterable by others but written by nobody else: set to
	// what the configuration asks for (systemd's RuntimeDirectoryMode may
	// differ from it).
	for _, tt := range []struct {
		name string
		mode fs.FileMode
		gid  int
		want fs.FileMode
	}{
		{"world-readable", 0o755, -1, 0o700},
		{"group-readable without a socket group", 0o750, -1, 0o700},
		{"owner-only with a socket group", 0o700, os.Getegid(), 0o750},
		{"too tight", 0o500, -1, 0o700},
	} {
		t.Run("repairs "+tt.name, func(t *testing.T) {
			d := filepath.Join(base, "repair "+tt.name)
			os.Mkdir(d, 0o700)
			os.Chmod(d, tt.mode)
			if err := privateDir(d, tt.gid); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(d); fi.Mode().Perm() != tt.want {
				t.Errorf("mode %04o, want %04o", fi.Mode().Perm(), tt.want)
			}
		})
	}
	refuse := []struct {
		name  string
		setup func(d string)
	}{
		{"world-writable", func(d string) { os.Mkdir(d, 0o700); os.Chmod(d, 0o777) }},
		{"group-writable", func(d string) { os.Mkdir(d, 0o700); os.Chmod(d, 0o770) }},
		{"a symlink to a private dir", func(d string) {
			real := d + "-real"
			os.Mkdir(real, 0o700)
			os.Symlink(real, d)
		}},
		{"a file", func(d string) { os.WriteFile(d, nil, 0o600) }},
	}
	if os.Geteuid() == 0 {
		refuse = append(refuse, struct {
			name  string
			setup func(d string)
		}{"owned by another user", func(d string) { os.Mkdir(d, 0o700); os.Chown(d, 12345, 12345) }})
	}
	for _, tt := range refuse {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			d := filepath.Join(base, tt.name)
			tt.setup(d)
			var ude *UnsafeDirError
			if err := privateDir(d, -1); !errors.As(err, &ude) {
				t.Fatalf("err = %v, want *UnsafeDirError", err)
			}
		})
	}
}

func TestWriteControl(t *testing.T) {
	d := filepath.Join(t.TempDir(), "run")
	if err := privateDir(d, -1); err != nil {
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

// On a file system that does not keep the mode it is given (this one
// makes every file 0644), the token is not published, the previous control
// file stays as it was, and no temporary file is left.
func TestWriteControlRefusesAModeThatDidNotStick(t *testing.T) {
	d := filepath.Join(t.TempDir(), "run")
	if err := privateDir(d, -1); err != nil {
		t.Fatal(err)
	}
	old := api.Control{Socket: filepath.Join(d, "airlock.sock"), Token: "00112233445566778899aabbccddeeff"}
	if err := writeControl(d, -1, old); err != nil {
		t.Fatal(err)
	}
	loose := func(f *os.File, _ fs.FileMode) error { return f.Chmod(0o644) }
	next := api.Control{Socket: old.Socket, Token: "ffeeddccbbaa99887766554433221100"}
	err := writeControlWith(d, -1, next, loose)
	if err == nil || !strings.Contains(err.Error(), "could not be applied") || strings.Contains(err.Error(), next.Token) {
		t.Fatalf("err = %v, want the mode refused (without the token)", err)
	}
	if got, err := api.ReadControl(old.Socket); err != nil || got != old {
		t.Errorf("control file after the refusal = %+v, %v; want the previous one", got, err)
	}
	if ents, _ := os.ReadDir(d); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the previous control file", len(ents))
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

func TestListenSocketAndPeerCred(t *testing.T) {
	d := filepath.Join(t.TempDir(), "run")
	if err := privateDir(d, -1); err != nil {
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
	got := make(chan PeerCred, 1)
	srv := &http.Server{
		ConnContext: withPeerCred,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pc, _ := peerCredFrom(r.Context())
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
	pc := <-got
	if pc.PID != int32(os.Getpid()) || pc.UID != uint32(os.Getuid()) {
		t.Errorf("peer cred %+v, want this process (pid %d uid %d)", pc, os.Getpid(), os.Getuid())
	}
	srv.Close()

	// A stale socket is replaced; a regular file is never removed.
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
	if err := privateDir(d, gid); err != nil {
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
