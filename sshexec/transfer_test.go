package sshexec_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func putSpec(path string, data []byte, mode os.FileMode, overwrite bool) sshexec.PutFile {
	return sshexec.PutFile{Path: path, Mode: mode, Overwrite: overwrite, Data: bytes.NewReader(data), Size: int64(len(data)), SHA256: sha256.Sum256(data)}
}

// parts lists the temporary files a put may have left in dir.
func parts(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".airlock-*.part"))
	return m
}

// TestPutGetRoundTrip: text and binary files from 0 bytes up come back
// byte for byte, with the mode asked for and the digest of what moved.
func TestPutGetRoundTrip(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	ctx := context.Background()
	binary := make([]byte, 3<<20+17)
	rand.Read(binary)
	for _, c := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"empty", nil, 0o644},
		{"text", []byte("port: 8080\ndebug: false\n"), 0o640},
		{"binary", binary, 0o600},
		{"one byte", []byte{0}, 0o755},
	} {
		remote := filepath.Join(dir, c.name)
		res, err := sshexec.Put(ctx, configFor(s), putSpec(remote, c.data, c.mode, false))
		if err != nil || !res.Success() || !res.Transfer.Published || !res.Transfer.Complete || res.Transfer.Bytes != int64(len(c.data)) {
			t.Fatalf("put %s: %v %+v %+v", c.name, err, res, res.Transfer)
		}
		st, err := os.Stat(remote)
		if err != nil || st.Mode().Perm() != c.mode {
			t.Errorf("put %s: %v mode %v, want %v", c.name, err, st.Mode().Perm(), c.mode)
		}
		var got bytes.Buffer
		res, err = sshexec.Get(ctx, configFor(s), sshexec.GetFile{Path: remote, MaxSize: 8 << 20, Out: &got})
		if err != nil || !res.Success() || !bytes.Equal(got.Bytes(), c.data) || res.Transfer.SHA256 != sha256.Sum256(c.data) {
			t.Fatalf("get %s: %v %+v, %d bytes back", c.name, err, res, got.Len())
		}
	}
	if p := parts(t, dir); len(p) != 0 {
		t.Errorf("temporary files left: %v", p)
	}
}

// TestPutRefusals: an existing file is replaced only with overwrite, a
// payload that is not the approved one is never published, and bad
// arguments are refused before anything is dialed.
func TestPutRefusals(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	ctx := context.Background()
	remote := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(remote, []byte("old\n"), 0o666); err != nil {
		t.Fatal(err)
	}

	res, err := sshexec.Put(ctx, configFor(s), putSpec(remote, []byte("new\n"), 0o644, false))
	if err != nil || res.Outcome != sshexec.Exited || res.ExitCode != 1 || res.Transfer.Published || !res.Transfer.Exists || !strings.Contains(res.Detail, "exists") {
		t.Fatalf("put over an existing file without overwrite: %v %+v", err, res)
	}
	if b, _ := os.ReadFile(remote); string(b) != "old\n" {
		t.Fatalf("the file changed: %q", b)
	}
	res, err = sshexec.Put(ctx, configFor(s), putSpec(remote, []byte("new\n"), 0o644, true))
	if err != nil || !res.Success() || !res.Transfer.Replaced {
		t.Fatalf("put with overwrite: %v %+v", err, res)
	}
	if b, _ := os.ReadFile(remote); string(b) != "new\n" {
		t.Fatalf("the file was not replaced: %q", b)
	}

	// The bytes are not the approved ones: other bytes of the same size,
	// fewer, more.
	approved := []byte("approved payload\n")
	for name, sent := range map[string][]byte{
		"swapped": []byte("swapped! payload\n"),
		"short":   approved[:5],
		"long":    append(append([]byte(nil), approved...), "and more\n"...),
	} {
		target := filepath.Join(dir, "payload-"+name)
		spec := putSpec(target, approved, 0o644, false)
		spec.Data = bytes.NewReader(sent)
		res, err := sshexec.Put(ctx, configFor(s), spec)
		if err != nil || res.Outcome != sshexec.Exited || res.ExitCode != 1 || res.Transfer.Published || !strings.Contains(res.Detail, "nothing was published") {
			t.Errorf("%s: %v %+v", name, err, res)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the file exists: %v", name, err)
		}
	}

	// A link planted at the name is replaced (with overwrite), never
	// followed.
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(outside, link)
	if res, err := sshexec.Put(ctx, configFor(s), putSpec(link, []byte("x\n"), 0o644, false)); err != nil || res.Transfer.Published {
		t.Errorf("put over a link without overwrite: %v %+v", err, res)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
		t.Errorf("the link's target changed: %q", b)
	}

	// A link on the way: refused, whatever it points to.
	linkDir := filepath.Join(dir, "linkdir")
	os.Symlink(t.TempDir(), linkDir)
	if res, err := sshexec.Put(ctx, configFor(s), putSpec(filepath.Join(linkDir, "f"), []byte("x"), 0o644, true)); err != nil || res.Transfer.Published || !strings.Contains(res.Detail, "symbolic link") {
		t.Errorf("put through a link: %v %+v", err, res)
	}

	// No such directory, and a directory at the name.
	if res, err := sshexec.Put(ctx, configFor(s), putSpec(filepath.Join(dir, "nowhere", "f"), []byte("x"), 0o644, false)); err != nil || res.ExitCode != 1 || !strings.Contains(res.Detail, "no such") {
		t.Errorf("no such directory: %v %+v", err, res)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o777)
	if res, err := sshexec.Put(ctx, configFor(s), putSpec(filepath.Join(dir, "sub"), []byte("x"), 0o644, true)); err != nil || res.Transfer.Published {
		t.Errorf("a directory at the name: %v %+v", err, res)
	}
	// Without overwrite too, a directory is no file that overwrite would
	// replace: the detail says so, and Exists does not send the agent to
	// overwrite.
	if res, err := sshexec.Put(ctx, configFor(s), putSpec(filepath.Join(dir, "sub"), []byte("x"), 0o644, false)); err != nil || res.Transfer.Published ||
		res.Transfer.Exists || !strings.Contains(res.Detail, "not a regular file") {
		t.Errorf("a directory at the name, without overwrite: %v %+v %+v", err, res, res.Transfer)
	}

	for name, spec := range map[string]sshexec.PutFile{
		"relative":  putSpec("files/x", nil, 0o644, false),
		"traversal": putSpec(dir+"/../x", nil, 0o644, false),
		"setuid":    putSpec(dir+"/x", nil, 0o4755, false),
		"sticky":    putSpec(dir+"/x", nil, os.ModeSticky|0o755, false),
	} {
		if res, err := sshexec.Put(ctx, configFor(s), spec); !errors.Is(err, sshexec.ErrInvalidConfig) || res != nil {
			t.Errorf("%s: %v %+v", name, err, res)
		}
	}
	if p := parts(t, dir); len(p) != 0 {
		t.Errorf("temporary files left: %v", p)
	}

	// A transfer checks the host key as strictly as a command: another
	// key pinned, nothing is written.
	cfg := configFor(s)
	cfg.HostKeys = sshexec.HostKeys{Pinned: []ssh.PublicKey{sshtest.NewKey().PublicKey()}}
	strange := filepath.Join(dir, "strange")
	if res, err := sshexec.Put(ctx, cfg, putSpec(strange, []byte("x"), 0o644, false)); err == nil || res.Outcome != sshexec.HostKeyMismatch {
		t.Errorf("put with another host key pinned: %v %+v", err, res)
	}
	if _, err := os.Stat(strange); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a put to an unverified host wrote the file: %v", err)
	}
}

// TestGetRefusals: a file over the cap is refused before it is read;
// directories, devices and missing files are refused.
func TestGetRefusals(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t)
	dir := sshtest.WritableDir(t)
	ctx := context.Background()
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 4096), 0o644)
	os.Symlink(big, filepath.Join(dir, "to-big"))
	os.Symlink(dir, filepath.Join(dir, "via"))
	for _, c := range []struct {
		path string
		max  int64
		want string
	}{
		{big, 4095, "over the limit"},
		{dir, 1 << 20, "not a regular file"},
		{"/dev/zero", 1 << 20, "not a regular file"},
		{filepath.Join(dir, "missing"), 1 << 20, "no such file"},
		{filepath.Join(dir, "to-big"), 1 << 20, "symbolic link"},
		{filepath.Join(dir, "via", "big"), 1 << 20, "symbolic link"},
	} {
		var out bytes.Buffer
		res, err := sshexec.Get(ctx, configFor(s), sshexec.GetFile{Path: c.path, MaxSize: c.max, Out: &out})
		if err != nil || res.Outcome != sshexec.Exited || res.ExitCode != 1 || !strings.Contains(res.Detail, c.want) || out.Len() != 0 {
			t.Errorf("%s: %v %+v (%d bytes out), want %q", c.path, err, res, out.Len(), c.want)
		}
	}
	// The local side fails: said so, not blamed on the target.
	res, err := sshexec.Get(ctx, configFor(s), sshexec.GetFile{Path: big, MaxSize: 1 << 20, Out: failingWriter{}})
	if err != nil || res.Success() || !res.Transfer.LocalError || !strings.Contains(res.Detail, "local copy") {
		t.Errorf("local write failure: %v %+v", err, res)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestPutCutMidway: a transfer whose connection breaks halfway (the
// target's sshd kills the session) publishes nothing and says so, naming
// the temporary file it could not remove.
func TestPutCutMidway(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{}) // its sessions are killed
	dir := sshtest.WritableDir(t)
	data := make([]byte, 8<<20)
	rand.Read(data)
	remote := filepath.Join(dir, "cut")
	spec := putSpec(remote, data, 0o644, false)
	spec.Data = sshtest.CutReader(data, func() { s.KillSessions() })
	res, err := sshexec.Put(context.Background(), configFor(s), spec)
	if err == nil || res.Outcome != sshexec.ConnectionLost || res.Transfer.Published || res.Termination != sshexec.Confirmed || !strings.Contains(res.Detail, "not published") {
		t.Fatalf("cut put: %v %+v", err, res)
	}
	if _, err := os.Stat(remote); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cut transfer was published: %v", err)
	}
	left := parts(t, dir)
	if len(left) != 1 || res.Transfer.Leftover != left[0] || !strings.Contains(res.Detail, left[0]) {
		t.Errorf("temporary files %v, result names %q: %s", left, res.Transfer.Leftover, res.Detail)
	}
}
