package securefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSecret(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		mode  fs.FileMode
		setup func(path string)
		want  Problem // 0: accepted
		fix   string
	}{
		{"owner only", 0o600, nil, 0, ""},
		{"owner read only", 0o400, nil, 0, ""},
		{"group-readable", 0o640, nil, ReadableByOthers, "chmod 600 "},
		{"world-readable", 0o604, nil, ReadableByOthers, "chmod 600 "},
		{"group-executable", 0o610, nil, ReadableByOthers, "chmod 600 "},
		{"world-writable", 0o602, nil, WritableByOthers, "chmod 600 "},
		{"group-writable", 0o620, nil, WritableByOthers, "chmod 600 "},
		{"a directory", 0o700, func(p string) { os.Remove(p); os.Mkdir(p, 0o700) }, NotRegular, "replace "},
	}
	if os.Geteuid() == 0 {
		tests = append(tests, struct {
			name  string
			mode  fs.FileMode
			setup func(path string)
			want  Problem
			fix   string
		}{"owned by another user", 0o600, func(p string) { os.Chown(p, 12345, 12345) }, WrongOwner, "chown root "})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tt.mode)
			if tt.setup != nil {
				tt.setup(p)
			}
			err := CheckSecret(p, nil, -1)
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("CheckSecret: %v", err)
				}
				if b, err := ReadSecret(p, 64); err != nil || string(b) != "secret" {
					t.Errorf("ReadSecret = %q, %v", b, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Problem != tt.want || !strings.HasPrefix(e.Fix(), tt.fix) || e.Path != p {
				t.Fatalf("CheckSecret: %v, want %v on %s with a fix %q…", err, tt.want, p, tt.fix)
			}
			if _, err := ReadSecret(p, 64); !errors.As(err, &e) {
				t.Errorf("ReadSecret read a file CheckSecret refuses: %v", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		if err := CheckSecret(filepath.Join(dir, "missing"), nil, -1); err == nil {
			t.Error("a missing file passed")
		}
	})
	t.Run("too large", func(t *testing.T) {
		p := filepath.Join(dir, "large")
		os.WriteFile(p, make([]byte, 65), 0o600)
		if _, err := ReadSecret(p, 64); err == nil {
			t.Error("ReadSecret read a file over its limit")
		}
	})
}

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	t.Run("created 0700", func(t *testing.T) {
		d := filepath.Join(base, "new", "run")
		if err := PrivateDir(d, -1); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o700 {
			t.Errorf("mode %04o, want 0700", fi.Mode().Perm())
		}
	})
	t.Run("created 0750 with a group", func(t *testing.T) {
		d := filepath.Join(base, "grp")
		if err := PrivateDir(d, os.Getegid()); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o750 {
			t.Errorf("mode %04o, want 0750", fi.Mode().Perm())
		}
	})
	// Readable or enterable by others but written by nobody else: set to
	// what is asked for (systemd's RuntimeDirectoryMode may differ).
	for _, tt := range []struct {
		name string
		mode fs.FileMode
		gid  int
		want fs.FileMode
	}{
		{"world-readable", 0o755, -1, 0o700},
		{"group-readable without a group", 0o750, -1, 0o700},
		{"owner-only with a group", 0o700, os.Getegid(), 0o750},
		{"too tight", 0o500, -1, 0o700},
	} {
		t.Run("repairs "+tt.name, func(t *testing.T) {
			d := filepath.Join(base, "repair "+tt.name)
			os.Mkdir(d, 0o700)
			os.Chmod(d, tt.mode)
			if err := PrivateDir(d, tt.gid); err != nil {
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
		want  Problem
	}{
		{"world-writable", func(d string) { os.Mkdir(d, 0o700); os.Chmod(d, 0o777) }, WritableByOthers},
		{"group-writable", func(d string) { os.Mkdir(d, 0o700); os.Chmod(d, 0o770) }, WritableByOthers},
		{"a symlink to a private dir", func(d string) {
			real := d + "-real"
			os.Mkdir(real, 0o700)
			os.Symlink(real, d)
		}, NotDirectory},
		{"a file", func(d string) { os.WriteFile(d, nil, 0o600) }, NotDirectory},
	}
	if os.Geteuid() == 0 {
		refuse = append(refuse, struct {
			name  string
			setup func(d string)
			want  Problem
		}{"owned by another user", func(d string) { os.Mkdir(d, 0o700); os.Chown(d, 12345, 12345) }, WrongOwner})
	}
	for _, tt := range refuse {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			d := filepath.Join(base, tt.name)
			tt.setup(d)
			var e *Error
			if err := PrivateDir(d, -1); !errors.As(err, &e) || e.Problem != tt.want {
				t.Fatalf("err = %v, want *Error %v", err, tt.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := WriteFile(file, []byte("one\n"), WriteOptions{Mode: 0o640, UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want 0640", fi.Mode().Perm())
	}
	if err := WriteFile(file, []byte("two\n"), WriteOptions{Mode: 0o600, UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "two\n" {
		t.Errorf("content %q after a replace", b)
	}
	if err := WriteFile(file, []byte("three\n"), WriteOptions{Mode: 0o600, UID: -1, GID: -1, NoReplace: true}); err == nil {
		t.Error("NoReplace replaced an existing file")
	}
	assertOnly(t, dir, "f")
}

// A failure before the rename leaves the old file as it was and no
// temporary file behind.
func TestWriteFileLeavesTheOldFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("old\n"), 0o600)
	changed := errors.New("changed meanwhile")
	err := WriteFile(file, []byte("new\n"), WriteOptions{Mode: 0o600, UID: -1, GID: -1, Unchanged: func() error { return changed }})
	if !errors.Is(err, changed) {
		t.Fatalf("got %v, want the Unchanged error", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "old\n" {
		t.Errorf("file = %q after a failed write, want the old content", b)
	}
	assertOnly(t, dir, "f")
}

// On a file system that does not keep the mode it is given (this one makes
// every file 0644), nothing is published: the previous file stays as it
// was, no temporary file is left, and the error names neither the data.
func TestWriteFileRefusesAModeThatDidNotStick(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "control.json")
	old := []byte(`{"token":"00112233445566778899aabbccddeeff"}`)
	if err := WriteFile(file, old, WriteOptions{Mode: 0o600, UID: -1, GID: -1}); err != nil {
		t.Fatal(err)
	}
	loose := func(f *os.File, _ fs.FileMode) error { return f.Chmod(0o644) }
	next := []byte(`{"token":"ffeeddccbbaa99887766554433221100"}`)
	err := writeFile(file, next, WriteOptions{Mode: 0o600, UID: -1, GID: -1}, loose)
	var e *Error
	if !errors.As(err, &e) || e.Problem != ModeNotApplied || strings.Contains(err.Error(), "ffeedd") {
		t.Fatalf("err = %v, want ModeNotApplied (without the data)", err)
	}
	if b, _ := os.ReadFile(file); string(b) != string(old) {
		t.Errorf("file after the refusal = %q; want the previous one", b)
	}
	assertOnly(t, dir, "control.json")
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir, 0); !errors.Is(err, ErrBusy) {
		t.Errorf("a second lock: %v, want ErrBusy", err)
	}
	unlock()
	unlock2, err := LockDir(dir, 0)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("directory holds %q, want %q", got, names)
	}
}

// TestReadToken: one token on one line, its surrounding space dropped;
// anything else, and a file others may read, is refused.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := ReadToken(write("ok", "  s3cret-token\n", 0o600), 1024); err != nil || tok != "s3cret-token" {
		t.Fatalf("ReadToken = %q, %v", tok, err)
	}
	for name, p := range map[string]string{
		"two lines":      write("two", "a\nb\n", 0o600),
		"empty":          write("empty", "\n", 0o600),
		"group-readable": write("loose", "s3cret-token\n", 0o640),
		"too large":      write("large", strings.Repeat("x", 2048), 0o600),
		"missing":        filepath.Join(dir, "none"),
	} {
		if tok, err := ReadToken(p, 1024); err == nil {
			t.Errorf("%s: accepted, token %q", name, tok)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
}

// ReadSecretFor checks a secret for the account that will use it, not for
// whoever reads it: root checking a service user's file accepts the
// user's own, and refuses one of root's that the user could not open,
// with the fix giving it to the user.
func TestReadSecretForAnotherAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read another account's file")
	}
	const account = 12345 // no such account: the fix gives the number
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := ReadSecretFor(p, 64, account); !errors.As(err, &e) || e.Problem != WrongOwner || e.Fix() != "chown 12345 "+p {
		t.Errorf("root's file for account %d: %v; want it refused with the fix chown 12345 %s", account, err, p)
	}
	if err := os.Chown(p, account, account); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadSecretFor(p, 64, account); err != nil || string(b) != "secret" {
		t.Errorf("the account's own file: %q, %v", b, err)
	}
	if _, err := ReadSecret(p, 64); !errors.As(err, &e) || e.Problem != WrongOwner {
		t.Errorf("ReadSecret, for root, of the account's file: %v; want it refused", err)
	}
}
