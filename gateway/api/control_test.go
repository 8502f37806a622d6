package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// fakeGateway lays out a socket directory with a control file and a
// listening socket, as install says, and returns the socket's path and
// its listener (which must see no connection when the client refuses).
type install struct {
	dirUID, ctlUID int
	gid            int // -1: leave
	dirMode        os.FileMode
	ctlMode        os.FileMode
}

func fakeGateway(t *testing.T, in install) (string, *net.UnixListener) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "airlock.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctl := filepath.Join(dir, ControlFileName)
	if err := os.WriteFile(ctl, fmt.Appendf(nil, `{"socket":%q,"token":"0123456789abcdef0123456789abcdef"}`, sock), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		uid  int
		mode os.FileMode
	}{{ctl, in.ctlUID, in.ctlMode}, {sock, in.dirUID, 0o600}, {dir, in.dirUID, in.dirMode}} {
		if err := os.Chown(f.path, f.uid, in.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return sock, l
}

// noConnection fails the test if anyone connected to l.
func noConnection(t *testing.T, l *net.UnixListener) {
	t.Helper()
	l.SetDeadline(time.Now())
	if c, err := l.Accept(); err == nil {
		c.Close()
		t.Error("the client connected to a gateway it refused")
	}
}

// TestControlOwnership: a client reads the token, and so sends anything,
// only to a gateway whose directory and control file root, the caller or
// a system account (the documented service user) made, and that no one
// else can change.
func TestControlOwnership(t *testing.T) {
	other, otherGID := testkit.LocalUser(t, "alk-api-other", false)
	svc, svcGID := testkit.LocalUser(t, "alk-api-svc", true)
	me := os.Geteuid()
	tests := []struct {
		name string
		in   install
		ok   bool
		bad  string // the path refused: "dir", "control", "parent"
	}{
		{"systemd service user", install{svc, svc, svcGID, 0o700, 0o600}, true, ""},
		{"systemd service user with socket_group", install{svc, svc, otherGID, 0o750, 0o640}, true, ""},
		{"own gateway", install{me, me, -1, 0o700, 0o600}, true, ""},
		{"control file of another system account than its directory's", install{0, svc, -1, 0o700, 0o600}, false, "control"},
		{"another user's directory and control file", install{other, other, -1, 0o700, 0o600}, false, "dir"},
		{"another user's control file", install{svc, other, -1, 0o700, 0o600}, false, "control"},
		{"root's control file in the service's directory", install{svc, 0, -1, 0o700, 0o600}, true, ""},
		{"directory writable by the group", install{svc, svc, otherGID, 0o770, 0o600}, false, "dir"},
		{"directory writable by others", install{svc, svc, -1, 0o707, 0o600}, false, "dir"},
		{"control file writable by the group", install{svc, svc, otherGID, 0o700, 0o660}, false, "control"},
		{"control file readable by others", install{svc, svc, -1, 0o700, 0o604}, false, "control"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, l := fakeGateway(t, tt.in)
			c, err := LocalClient(sock)
			var ce *ControlError
			switch {
			case tt.ok && err != nil:
				t.Fatalf("LocalClient: %v, want the documented install accepted", err)
			case tt.ok:
				if c == nil {
					t.Fatal("no client")
				}
				return
			case !errors.As(err, &ce):
				t.Fatalf("LocalClient: %v, want a *ControlError", err)
			}
			want := map[string]string{"dir": filepath.Dir(sock), "control": filepath.Join(filepath.Dir(sock), ControlFileName)}[tt.bad]
			if ce.Path != want {
				t.Errorf("refused %s, want %s", ce.Path, want)
			}
			noConnection(t, l)
		})
	}
}

// TestControlLinks: a link to a control file or a socket directory is
// followed and its target checked as the file itself would be.
func TestControlLinks(t *testing.T) {
	other, _ := testkit.LocalUser(t, "alk-api-other", false)
	me := os.Geteuid()
	good, _ := fakeGateway(t, install{me, me, -1, 0o700, 0o600})
	bad, l := fakeGateway(t, install{other, other, -1, 0o700, 0o600})

	// A directory of links to another user's gateway.
	linked := filepath.Join(t.TempDir(), "run")
	if err := os.Symlink(filepath.Dir(bad), linked); err != nil {
		t.Fatal(err)
	}
	var ce *ControlError
	if _, err := LocalClient(filepath.Join(linked, "airlock.sock")); !errors.As(err, &ce) || ce.Path != filepath.Dir(bad) {
		t.Errorf("socket directory linked to another user's: %v, want its target refused", err)
	}
	noConnection(t, l)

	// A control file linked to one another user wrote.
	ctl := filepath.Join(filepath.Dir(good), ControlFileName)
	os.Remove(ctl)
	if err := os.Symlink(filepath.Join(filepath.Dir(bad), ControlFileName), ctl); err != nil {
		t.Fatal(err)
	}
	// (the other user's directory must be passable for the link to be read)
	os.Chmod(filepath.Dir(bad), 0o755)
	if _, err := LocalClient(good); !errors.As(err, &ce) || ce.Path != filepath.Join(filepath.Dir(bad), ControlFileName) {
		t.Errorf("control file linked to another user's: %v, want its target refused", err)
	}

	// A link to a good directory is as good as the directory.
	ok := filepath.Join(t.TempDir(), "run")
	good2, _ := fakeGateway(t, install{me, me, -1, 0o700, 0o600})
	if err := os.Symlink(filepath.Dir(good2), ok); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalClient(filepath.Join(ok, "airlock.sock")); err != nil {
		t.Errorf("socket directory linked to a good one: %v", err)
	}
}

// TestControlParentWritable: a gateway directory in a directory others
// can write to could be swapped; a sticky one (/tmp) is fine.
func TestControlParentWritable(t *testing.T) {
	me := os.Geteuid()
	sock, l := fakeGateway(t, install{me, me, -1, 0o700, 0o600})
	parent := filepath.Dir(filepath.Dir(sock))
	os.Chmod(parent, 0o777)
	var ce *ControlError
	if _, err := LocalClient(sock); !errors.As(err, &ce) || ce.Path != parent {
		t.Errorf("parent 0777: %v, want the parent refused", err)
	}
	noConnection(t, l)
	os.Chmod(parent, os.ModeSticky|0o777)
	if _, err := LocalClient(sock); err != nil {
		t.Errorf("sticky parent: %v", err)
	}
}
