package deploy

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func line(t testing.TB, seed byte, target, account string) string {
	t.Helper()
	l, err := AuthorizedKeysLine(fixedKey(t, seed), LineOptions{Target: target, Account: account, Command: "/usr/local/bin/airlock-action"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// keysDir returns a fresh directory with mode 0700, like ~/.ssh.
func keysDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(sshtest.SafeDir(t), "ssh")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// others is an authorized_keys file full of lines that are not ours, in
// every shape a hand-edited file has.
const others = "# managed by hand\n" +
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop\n" +
	"\n" +
	"   \t  \n" +
	"from=\"10.0.0.0/8\"   ssh-ed25519   AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl   spaced  out\n" +
	"# airlock:box/deploy (a comment line that merely mentions our comment)\n" +
	"this line is garbage airlock:box/deploy\n" +
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl airlock:box/deploy-old\n" +
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl windows\r\n"

func TestInstallLine(t *testing.T) {
	t.Parallel()
	a1, a2 := line(t, 1, "box", "deploy"), line(t, 2, "box", "deploy")
	b1 := line(t, 3, "box", "ops")
	tests := []struct {
		name       string
		before     string // "" with noFile: no file at all
		noFile     bool
		line       string
		remove     bool
		want       string
		wantChange Change
	}{
		{"create", "", true, a1, false, a1 + "\n", Added},
		{"append, others untouched", others, false, a1, false, others + a1 + "\n", Added},
		{"append to a file without a final newline", "# x", false, a1, false, "# x\n" + a1 + "\n", Added},
		{"idempotent", others + a1 + "\n", false, a1, false, others + a1 + "\n", Unchanged},
		{"replace in place", "# top\n" + a1 + "\n" + others, false, a2, false, "# top\n" + a2 + "\n" + others, Replaced},
		{"replace keeps a missing final newline", others + a1, false, a2, false, others + a2, Replaced},
		{"replace keeps CRLF", "# a\r\n" + a1 + "\r\n", false, a2, false, "# a\r\n" + a2 + "\r\n", Replaced},
		{"duplicates collapse to the first", a1 + "\n# mid\n" + a1 + "\n", false, a2, false, a2 + "\n# mid\n", Replaced},
		{"another account's line is not ours", b1 + "\n", false, a1, false, b1 + "\n" + a1 + "\n", Added},
		{"remove", others + a1 + "\n" + b1 + "\n", false, a1, true, others + b1 + "\n", Removed},
		{"remove by comment alone", a1 + "\n" + b1 + "\n", false, "airlock:box/deploy", true, b1 + "\n", Removed},
		{"remove what is absent", others, false, a1, true, others, Unchanged},
		{"remove without a file", "", true, a1, true, "", Unchanged},
		{"remove the only line", a1 + "\n", false, a1, true, "", Removed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(keysDir(t), "authorized_keys")
			if !tt.noFile {
				writeFile(t, file, tt.before, 0o600)
			}
			var (
				got Change
				err error
			)
			if tt.remove {
				got, err = RemoveLine(file, tt.line)
			} else {
				got, err = InstallLine(file, tt.line)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantChange {
				t.Errorf("change = %v, want %v", got, tt.wantChange)
			}
			if tt.noFile && tt.remove {
				if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("removing from a missing file created it: %v", err)
				}
				return
			}
			if diff := cmp.Diff(tt.want, readFile(t, file)); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			want := fs.FileMode(0o600)
			if tt.noFile && os.Geteuid() == 0 {
				want = 0o644 // a new file in a directory of root's
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != want {
				t.Errorf("mode after install: %v, %v; want %v", fi.Mode(), err, want)
			}
			assertNoTempFiles(t, filepath.Dir(file))
		})
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".airlock-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestInstallLineUnchangedDoesNotRewrite(t *testing.T) {
	t.Parallel()
	file := filepath.Join(keysDir(t), "authorized_keys")
	l := line(t, 1, "box", "deploy")
	if _, err := InstallLine(file, l); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(file, old, old)
	before, _ := os.Stat(file)
	if c, err := InstallLine(file, l); err != nil || c != Unchanged {
		t.Fatalf("second install: %v, %v", c, err)
	}
	after, _ := os.Stat(file)
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("an unchanged install rewrote the file")
	}
}

func TestInstallLineKeepsModeAndOwner(t *testing.T) {
	t.Parallel()
	dir := keysDir(t)
	file := filepath.Join(dir, "authorized_keys")
	writeFile(t, file, "# x\n", 0o640)
	uid, gid := os.Geteuid(), os.Getegid()
	if os.Geteuid() == 0 {
		uid, gid = testUserIDs(t)
		for _, p := range []string{dir, file} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := InstallLine(file, line(t, 1, "box", "deploy")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	gotUID, gotGID := securefile.Owner(fi)
	if fi.Mode().Perm() != 0o640 || gotUID != uid || gotGID != gid {
		t.Errorf("after install: mode %v owner %d:%d; want 0640 %d:%d", fi.Mode().Perm(), gotUID, gotGID, uid, gid)
	}
}

func TestInstallLineNewFileBelongsToTheDirectoryOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the directory to another user")
	}
	dir := keysDir(t)
	uid, gid := testUserIDs(t)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "authorized_keys")
	if _, err := InstallLine(file, line(t, 1, "box", "deploy")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if u, g := securefile.Owner(fi); u != uid || g != gid || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file: owner %d:%d mode %v; want %d:%d 0600", u, g, fi.Mode().Perm(), uid, gid)
	}
}

// A new authorized_keys file in a directory of root's (an AuthorizedKeysFile
// outside the home directories, as sshtest's is) must be readable by the
// account: sshd reads it as the account. With mode 0600 the login failed.
func TestInstallLineNewFileInRootsDirectoryLetsSSHDIn(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directory must be root's")
	}
	s := sshtest.NewSSHD(t, sshtest.Options{})
	s.LogOnFailure(t)
	if err := os.Remove(s.AuthorizedKeysFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := InstallLine(s.AuthorizedKeysFile(), line(t, 7, "box", s.User)); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(s, signer, "")
	if err != nil {
		t.Fatalf("login with the installed line: %v", err)
	}
	c.Close()
}

// A missing ~/.ssh is created for the account, as ssh-copy-id does.
func TestInstallLineCreatesTheKeysDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the home directory to another user")
	}
	home := filepath.Join(sshtest.SafeDir(t), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid := testUserIDs(t)
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, ".ssh", "authorized_keys")
	if _, err := InstallLine(file, line(t, 1, "box", "deploy")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{{filepath.Dir(file), 0o700}, {file, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if u, g := securefile.Owner(fi); u != uid || g != gid || fi.Mode().Perm() != c.mode {
			t.Errorf("%s: owner %d:%d mode %v; want %d:%d %v", c.path, u, g, fi.Mode().Perm(), uid, gid, c.mode)
		}
	}
	// Removing from a file whose directory is missing creates nothing.
	gone := filepath.Join(home, "other", "authorized_keys")
	if c, err := RemoveLine(gone, "airlock:box/deploy"); err == nil && c != Unchanged {
		t.Errorf("RemoveLine on a missing directory: %v", c)
	}
	if _, err := os.Stat(filepath.Dir(gone)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RemoveLine created %s", filepath.Dir(gone))
	}
	// A missing home is not created: it is the account's to have.
	if _, err := InstallLine(filepath.Join(home, "nobody", ".ssh", "authorized_keys"), line(t, 1, "box", "deploy")); err == nil || !strings.Contains(err.Error(), "home directory") {
		t.Errorf("install under a missing home: %v, want an error about the home directory", err)
	}
}

// testUserIDs returns the uid and gid of sshtest's login account.
func testUserIDs(t *testing.T) (int, int) {
	t.Helper()
	name, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

func TestInstallLineRefusesUnsafeFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir, file string)
		wantPath string // "dir" or "file"
		want     securefile.Problem
		root     bool // needs root
	}{
		{"file writable by others", func(t *testing.T, dir, file string) { writeFile(t, file, "", 0o606) }, "file", securefile.WritableByOthers, false},
		{"file writable by group", func(t *testing.T, dir, file string) { writeFile(t, file, "", 0o620) }, "file", securefile.WritableByOthers, false},
		{"directory writable by others", func(t *testing.T, dir, file string) { os.Chmod(dir, 0o777) }, "dir", securefile.WritableByOthers, false},
		{"sticky directory writable by others", func(t *testing.T, dir, file string) { os.Chmod(dir, 0o777|fs.ModeSticky) }, "dir", securefile.WritableByOthers, false},
		{"directory writable by group", func(t *testing.T, dir, file string) { os.Chmod(dir, 0o770) }, "dir", securefile.WritableByOthers, false},
		{"parent writable by others", func(t *testing.T, dir, file string) { os.Chmod(filepath.Dir(dir), 0o777) }, "parent", securefile.WritableByOthers, false},
		{"symbolic link", func(t *testing.T, dir, file string) {
			target := filepath.Join(dir, "real")
			writeFile(t, target, "", 0o600)
			os.Symlink(target, file)
		}, "file", securefile.NotRegular, false},
		{"directory in its place", func(t *testing.T, dir, file string) { os.Mkdir(file, 0o700) }, "file", securefile.NotRegular, false},
		{"file owned by someone else", func(t *testing.T, dir, file string) {
			writeFile(t, file, "", 0o600)
			uid, gid := testUserIDs(t)
			os.Chown(file, uid, gid)
		}, "file", securefile.WrongOwner, true},
		{"parent owned by someone else", func(t *testing.T, dir, file string) {
			uid, gid := testUserIDs(t)
			os.Chown(filepath.Dir(dir), uid, gid)
		}, "parent", securefile.WrongOwner, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root to give files to another user")
			}
			dir := keysDir(t)
			file := filepath.Join(dir, "authorized_keys")
			tt.setup(t, dir, file)
			var before string
			if b, err := os.ReadFile(file); err == nil {
				before = string(b)
			}
			_, err := InstallLine(file, line(t, 1, "box", "deploy"))
			var ue *securefile.Error
			if !errors.As(err, &ue) {
				t.Fatalf("InstallLine: got %v, want *securefile.Error", err)
			}
			wantPath := map[string]string{"dir": dir, "file": file, "parent": filepath.Dir(dir)}[tt.wantPath]
			if ue.Problem != tt.want || ue.Path != wantPath {
				t.Errorf("got %v on %s, want %v on %s", ue.Problem, ue.Path, tt.want, wantPath)
			}
			if b, _ := os.ReadFile(file); string(b) != before {
				t.Errorf("refused install changed the file: %q", b)
			}
			if _, err := RemoveLine(file, "airlock:box/deploy"); !errors.As(err, &ue) {
				t.Errorf("RemoveLine: got %v, want *securefile.Error", err)
			}
			assertNoTempFiles(t, dir)
		})
	}
}

// A file kept directly in a sticky directory everyone may write (as /tmp
// is, by design) is refused with the advice to move the file, naming it,
// never to chmod the directory.
func TestInstallLineInAStickyDirectorySaysMoveTheFile(t *testing.T) {
	t.Parallel()
	dir := keysDir(t)
	if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "authorized_keys")
	_, err := InstallLine(file, line(t, 1, "box", "deploy"))
	var se *securefile.Error
	if !errors.As(err, &se) || se.Problem != securefile.WritableByOthers {
		t.Fatalf("InstallLine: got %v, want a refusal of %s", err, dir)
	}
	msg := err.Error()
	for _, want := range []string{"move " + file + " out of " + dir + ", into a directory that only root or its owner can write", "leave " + dir + " as it is", "sticky"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "chmod") {
		t.Errorf("message %q advises a chmod of a sticky directory", msg)
	}
}

func TestInstallLineRefusesLines(t *testing.T) {
	t.Parallel()
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fixedKey(t, 1))))
	tests := []struct {
		name string
		line string
		want error
	}{
		{"not a key", "hello world", ErrInvalidLine},
		{"two lines", line(t, 1, "box", "deploy") + "\n" + line(t, 2, "box", "ops"), ErrInvalidLine},
		{"no comment", "restrict " + key, ErrNotAirlockLine},
		{"someone else's comment", "restrict " + key + " alice@laptop", ErrNotAirlockLine},
		{"malformed airlock comment", "restrict " + key + " airlock:box", ErrNotAirlockLine},
		{"not restricted", `command="/usr/local/bin/airlock-action" ` + key + " airlock:box/deploy", ErrNotRestricted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(keysDir(t), "authorized_keys")
			if _, err := InstallLine(file, tt.line); !errors.Is(err, tt.want) {
				t.Errorf("InstallLine: got %v, want %v", err, tt.want)
			}
			if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused line created the file")
			}
		})
	}
}

// TestInstallLineConcurrent runs installers for different accounts at once
// while a reader keeps reading the file: every install must survive (the
// directory lock serialises read-modify-write) and every read must see a
// whole file (rename is atomic), never a partial one.
func TestInstallLineConcurrent(t *testing.T) {
	t.Parallel()
	file := filepath.Join(keysDir(t), "authorized_keys")
	writeFile(t, file, others, 0o600)
	const n = 12
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	readErrs := make(chan error, 1)
	go func() {
		defer close(readErrs)
		for {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(file)
			if err != nil || !strings.HasPrefix(string(b), others) || !strings.HasSuffix(string(b), "\n") {
				readErrs <- fmt.Errorf("reader saw %q, %v", b, err)
				return
			}
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := InstallLine(file, line(t, byte(i+1), "box", fmt.Sprintf("acct%d", i))); err != nil {
				t.Errorf("install %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-readErrs; err != nil {
		t.Error(err)
	}
	got := readFile(t, file)
	for i := range n {
		if !strings.Contains(got, fmt.Sprintf(" airlock:box/acct%d\n", i)) {
			t.Errorf("line of acct%d lost", i)
		}
	}
}

func TestSameFileSeesAConcurrentEdit(t *testing.T) {
	t.Parallel()
	file := filepath.Join(keysDir(t), "f")
	writeFile(t, file, "a\n", 0o600)
	before, _ := os.Lstat(file)
	writeFile(t, file+".new", "b\n", 0o600)
	os.Rename(file+".new", file) // an editor saving the file
	if err := sameFile(file, before); !errors.Is(err, ErrChanged) {
		t.Errorf("sameFile after a replace: %v, want ErrChanged", err)
	}
	if err := sameFile(file+".absent", nil); err != nil {
		t.Errorf("sameFile of a still absent file: %v", err)
	}
	if err := sameFile(file, nil); !errors.Is(err, ErrChanged) {
		t.Errorf("sameFile of a file that appeared: %v, want ErrChanged", err)
	}
}

// deploy install refuses exactly what a real sshd with StrictModes yes
// refuses: one sshd reads authorized_keys from several places, the key is
// installed in one place at a time, and a login works there iff deploy
// accepted the place.
func TestInstallRefusesWhatStrictModesRefuses(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sshd checks the path as it does for a real account")
	}
	base := sshtest.SafeDir(t)
	cases := []struct {
		name  string
		setup func(dir string) // dir holds the file; made 0755 first
		ok    bool
	}{
		{"a directory of root's", func(string) {}, true},
		{"a group-writable directory", func(d string) { os.Chmod(d, 0o775) }, false},
		{"a sticky world-writable parent, like /tmp", func(d string) { os.Chmod(filepath.Dir(d), 0o777|fs.ModeSticky) }, false},
		{"a world-writable parent", func(d string) { os.Chmod(filepath.Dir(d), 0o777) }, false},
	}
	var files []string
	for i := range cases {
		dir := filepath.Join(base, fmt.Sprintf("case%d", i), "keys")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(dir), 0o755)
		files = append(files, filepath.Join(dir, "authorized_keys"))
	}
	s := sshtest.NewSSHD(t, sshtest.Options{StrictModes: true, AuthorizedKeysFiles: files})
	keyLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.ClientSigner.PublicKey())))
	line := "restrict " + keyLine + " airlock:box/" + s.User
	for i, c := range cases {
		dir := filepath.Dir(files[i])
		c.setup(dir)
		_, err := InstallLine(files[i], line)
		if c.ok != (err == nil) {
			t.Errorf("%s: deploy install: %v", c.name, err)
		}
		if !c.ok {
			if !errors.Is(err, ErrStrictModes) {
				t.Errorf("%s: the refusal does not say it is sshd's StrictModes: %v", c.name, err)
			}
			// Put it there anyway, as a careless hand would.
			writeFile(t, files[i], line+"\n", 0o644)
		}
		lerr := login(s)
		if c.ok != (lerr == nil) {
			t.Errorf("%s: sshd with StrictModes: login %v; deploy and sshd disagree", c.name, lerr)
		}
		os.Remove(files[i])
	}
}

// login authenticates to s with its client key, and hangs up.
func login(s *sshtest.SSHD) error {
	c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(s.ClientSigner)},
		HostKeyCallback: ssh.FixedHostKey(s.CurrentHostKey()), Timeout: time.Minute})
	if err != nil {
		return err
	}
	return c.Close()
}
