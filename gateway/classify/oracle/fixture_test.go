package oracle

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
)

// scratchRoots are the world-writable directories the account can write
// outside its home: what it owns there is part of its effects, and is
// removed before every line.
var scratchRoots = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}

// homeMode is the mode of the home, the scratch tree's root.
const homeMode = 0o755

// fixtureTime is the modification time of every fixture file: fixed, so
// that a line that only touches a file shows.
var fixtureTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// payload is the program corpus lines run to show that they ran a
// program: it leaves a marker in the home and in the marker directory.
const payload = `#!/bin/sh
: > %[1]s/.markers/ran-$$
: > %[2]s/ran-$$
`

// fixtureFiles are the fixture's files by path, with their mode; a
// directory's path ends in "/". "-o" and "--output=x" catch a glob that
// expands to options (sort *); bin/head, bin/ls and bin/sort are the
// payload under a reader's name (PATH=bin head …); cmds.txt names the
// payload (sed e).
var fixtureFiles = []struct {
	path    string
	mode    os.FileMode
	content string
}{
	{"a.txt", 0o644, "alpha\nbeta\ngamma\n"},
	{"b.txt", 0o644, "3\n1\n2\n"},
	{"c.txt", 0o644, "x\n"},
	{"cmds.txt", 0o644, "bin/mark\n"},
	{"sub/", 0o755, ""},
	{"sub/f", 0o644, "f\n"},
	{"sub/g.txt", 0o644, "g\n"},
	{"outdir/", 0o755, ""},
	{"-o", 0o644, "dash o\n"},
	{"--output=x", 0o644, "output x\n"},
	{".markers/", 0o755, ""},
	{"bin/", 0o755, ""},
	{"bin/mark", 0o755, payload},
	{"bin/head", 0o755, payload},
	{"bin/ls", 0o755, payload},
	{"bin/sort", 0o755, payload},
}

// buildTemplate writes the account's fixture into dir (as root): the
// files, a symbolic link, and a git repository with one commit when git
// is installed.
func (a *account) buildTemplate(dir string) error {
	for _, f := range fixtureFiles {
		p := filepath.Join(dir, f.path)
		if strings.HasSuffix(f.path, "/") {
			if err := os.Mkdir(p, f.mode); err != nil {
				return err
			}
			continue
		}
		content := f.content
		if content == payload {
			content = fmt.Sprintf(payload, a.home, a.markers)
		}
		if err := os.WriteFile(p, []byte(content), f.mode); err != nil {
			return err
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		return err
	}
	if err := setTimes(dir); err != nil {
		return err
	}
	if _, err := exec.LookPath("git"); err == nil {
		return gitRepo(filepath.Join(dir, "repo"))
	}
	return nil
}

// gitRepo makes a repository with one commit whose index is fresh once
// copied: the files keep their times, and core.checkStat=minimal with
// core.trustctime=false makes git compare only times and sizes, not the
// inode numbers and change times a copy cannot keep. (Otherwise the first
// `git status` rewrites the index, as it does in any repository someone
// just copied.)
func gitRepo(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("readme\n"), 0o644); err != nil {
		return err
	}
	if err := setTimes(dir); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "--template=", "-b", "main"},
		{"config", "core.checkStat", "minimal"},
		{"config", "core.trustctime", "false"},
		{"add", "README"},
		{"-c", "user.name=oracle", "-c", "user.email=oracle@example.invalid", "commit", "-q", "-m", "one"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("oracle: git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// setTimes gives every file under dir the fixture's time.
func setTimes(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, fixtureTime, fixtureTime)
	})
}

// reset readies the account for a line: no process of its own left, the
// home emptied and filled from the template, nothing of its own in the
// scratch roots but an empty marker directory.
func (a *account) reset(template string) error {
	if err := a.killAll(); err != nil {
		return err
	}
	// A line may have taken the home's permissions away (chmod 0 ~).
	if err := os.Chmod(a.home, homeMode); err != nil {
		return err
	}
	if err := os.Lchown(a.home, a.uid, a.gid); err != nil {
		return err
	}
	if err := a.clear(); err != nil {
		return err
	}
	if err := copyTree(template, a.home, a.uid, a.gid); err != nil {
		return err
	}
	if err := os.Mkdir(a.markers, 0o755); err != nil {
		return err
	}
	return os.Lchown(a.markers, a.uid, a.gid)
}

// clear empties the home and removes what the account owns in the
// scratch roots.
func (a *account) clear() error {
	entries, err := os.ReadDir(a.home)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := removeAll(filepath.Join(a.home, e.Name())); err != nil {
			return err
		}
	}
	for _, root := range scratchRoots {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(root, e.Name())
			if owner(p) == a.uid {
				if err := removeAll(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeAll removes p, first giving back the write permission a line may
// have taken from a directory of its own (chmod 0 dir).
func removeAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// owner is the uid that owns p (not following a symbolic link), or -1.
func owner(p string) int {
	fi, err := os.Lstat(p)
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// copyTree copies the fixture template into dst, keeping modes and
// times, owned by uid:gid.
func copyTree(src, dst string, uid, gid int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		return copyEntry(p, filepath.Join(dst, rel), uid, gid)
	})
}

// copyEntry copies one file, directory (without its entries) or
// symbolic link from p to to, keeping its mode and time, owned by
// uid:gid.
func copyEntry(p, to string, uid, gid int) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, to); err != nil {
			return err
		}
		return os.Lchown(to, uid, gid)
	case fi.IsDir():
		if err := os.Mkdir(to, fi.Mode().Perm()); err != nil {
			return err
		}
	default:
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := os.Chmod(to, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Lchown(to, uid, gid); err != nil {
		return err
	}
	// A directory's time is set before its files are copied into it;
	// the snapshot ignores the times of directories anyway.
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// repair undoes what a line changed in the home, as the snapshots show
// it: removes what is not the fixture's, copies back what is missing.
// false when it cannot (the home itself, or the marker directory,
// changed): the caller resets instead. The caller checks the result.
func (a *account) repair(template string, pristine, now snapshot) bool {
	if now[a.home] != pristine[a.home] || now[a.markers] != pristine[a.markers] {
		return false
	}
	var gone []string
	for p, e := range now {
		if b, ok := pristine[p]; !ok || b != e {
			if err := removeAll(p); err != nil {
				return false
			}
		}
	}
	for p := range pristine {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			gone = append(gone, p)
		}
	}
	// Parents before their entries.
	sort.Strings(gone)
	for _, p := range gone {
		rel, err := filepath.Rel(a.home, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return false
		}
		if err := copyEntry(filepath.Join(template, rel), p, a.uid, a.gid); err != nil {
			return false
		}
	}
	return true
}

// processes lists the account's processes that have not ended, but for
// those that serve its connection. It reads /proc/PID/stat only for the
// account's processes (/proc/PID is owned by a process's effective uid):
// reading every process's would cost most of the oracle's time.
func (a *account) processes() []proctree.Proc {
	ents, _ := os.ReadDir("/proc")
	var out []proctree.Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || owner(filepath.Join("/proc", e.Name())) != a.uid || a.conn != nil && a.conn.own[pid] {
			continue
		}
		if p, err := proctree.Read(pid); err == nil && !p.Exited() {
			out = append(out, p)
		}
	}
	return out
}

// killAll kills every process of the account and waits (up to Patience)
// until they are gone.
func (a *account) killAll() error {
	return testkit.PollErr(testkit.Patience, func() error {
		ps := a.processes()
		for _, p := range ps {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		if len(ps) > 0 {
			return fmt.Errorf("oracle: %s's processes %v are still running", a.name, ps)
		}
		return nil
	})
}
