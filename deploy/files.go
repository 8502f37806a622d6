package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Problem is why a file or directory is refused. The set is closed.
type Problem uint8

// The problems.
const (
	// WritableByOthers: group or other may write it (or, for a directory
	// that is not sticky, replace what is in it).
	WritableByOthers Problem = iota + 1
	// ReadableByOthers: a secret (a private key) that group or other may
	// read.
	ReadableByOthers
	// WrongOwner: owned by someone other than the intended owner or root.
	WrongOwner
	// NotRegular: a symbolic link, device, directory or other non-regular
	// file where a regular file belongs.
	NotRegular
	// NotDirectory: a file where a directory belongs.
	NotDirectory
)

func (p Problem) String() string {
	switch p {
	case WritableByOthers:
		return "writable by group or others"
	case ReadableByOthers:
		return "readable by group or others"
	case WrongOwner:
		return "owned by someone else"
	case NotRegular:
		return "not a regular file"
	case NotDirectory:
		return "not a directory"
	}
	return fmt.Sprintf("Problem(%d)", uint8(p))
}

// UnsafeError refuses a file or directory whose type, owner or mode would
// let someone other than its owner (or root) change what airlock writes or
// read what it keeps secret. Nothing is written when it is returned.
type UnsafeError struct {
	Path    string
	Problem Problem
	// Mode and UID are what was found; WantUID is the intended owner.
	Mode    fs.FileMode
	UID     int
	WantUID int
}

func (e *UnsafeError) Error() string {
	switch e.Problem {
	case WrongOwner:
		return fmt.Sprintf("deploy: %s is owned by uid %d, not by uid %d or root; refusing to write it", e.Path, e.UID, e.WantUID)
	case WritableByOthers, ReadableByOthers:
		return fmt.Sprintf("deploy: %s has mode %s, %s; refusing to use it (chmod go-rwx it after checking its content)", e.Path, e.Mode.Perm(), e.Problem)
	}
	return fmt.Sprintf("deploy: %s is %s", e.Path, e.Problem)
}

// ErrBusy is returned when another airlock process holds the directory's
// lock for longer than lockWait.
var ErrBusy = errors.New("deploy: another airlock process is writing in this directory")

// ErrChanged is returned when a file changed between our read and our
// rename; nothing was written, and running again is safe.
var ErrChanged = errors.New("deploy: file changed while it was being rewritten")

const lockWait = 10 * time.Second

func ownerOf(fi fs.FileInfo) (uid, gid int) {
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// checkDir checks dir and every directory above it: each must be a
// directory owned by root or wantUID (-1: by root or dir's own owner) and
// not writable by group or others unless sticky (in a sticky directory
// nobody else may rename or remove what we own). It returns dir's owner.
func checkDir(dir string, wantUID int) (uid, gid int, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return 0, 0, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("deploy: %w", err)
	}
	uid, gid = ownerOf(fi)
	if wantUID < 0 {
		wantUID = uid
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return 0, 0, fmt.Errorf("deploy: %w", err)
		}
		u, _ := ownerOf(fi)
		switch {
		case !fi.IsDir():
			return 0, 0, &UnsafeError{Path: d, Problem: NotDirectory, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		case u != 0 && u != wantUID:
			return 0, 0, &UnsafeError{Path: d, Problem: WrongOwner, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		case fi.Mode().Perm()&0o022 != 0 && (d == dir || fi.Mode()&fs.ModeSticky == 0):
			return 0, 0, &UnsafeError{Path: d, Problem: WritableByOthers, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		}
		if d == filepath.Dir(d) {
			return uid, gid, nil
		}
	}
}

// checkFile checks an existing file: a regular file (not a link), owned by
// wantUID or root, not writable by group or others; when secret, not
// readable by them either.
func checkFile(path string, fi fs.FileInfo, wantUID int, secret bool) error {
	uid, _ := ownerOf(fi)
	e := &UnsafeError{Path: path, Mode: fi.Mode(), UID: uid, WantUID: wantUID}
	switch {
	case !fi.Mode().IsRegular():
		e.Problem = NotRegular
	case uid != 0 && uid != wantUID:
		e.Problem = WrongOwner
	case fi.Mode().Perm()&0o022 != 0:
		e.Problem = WritableByOthers
	case secret && fi.Mode().Perm()&0o077 != 0:
		e.Problem = ReadableByOthers
	default:
		return nil
	}
	return e
}

// lockDir takes an exclusive flock on dir, so that airlock processes
// rewriting files in it take turns. The lock is the directory itself: no
// lock file is left behind.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("deploy: lock %s: %w", dir, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s", ErrBusy, dir)
			}
			return nil, fmt.Errorf("deploy: lock %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeAtomic replaces path with data: it writes a temporary file in the
// same directory with the given mode and owner, syncs it, calls
// unchanged (which returns ErrChanged if the old file moved under us),
// renames it over path and syncs the directory. On any error the old file
// is left as it was and the temporary file is removed.
func writeAtomic(path string, data []byte, mode fs.FileMode, uid, gid int, unchanged func() error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".airlock-*")
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode.Perm()); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if st, err := tmp.Stat(); err == nil {
		if u, g := ownerOf(st); u != uid || g != gid {
			if err := tmp.Chown(uid, gid); err != nil {
				return fmt.Errorf("deploy: keep owner %d:%d of %s: %w", uid, gid, path, err)
			}
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if unchanged != nil {
		if err := unchanged(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("deploy: sync %s: %w", dir, err)
	}
	return nil
}

// sameFile reports whether the file at path is still the one described by
// before (same inode, size and modification time), or still absent when
// before is nil.
func sameFile(path string, before fs.FileInfo) error {
	now, err := os.Lstat(path)
	switch {
	case before == nil && errors.Is(err, fs.ErrNotExist):
		return nil
	case before == nil || err != nil:
		return fmt.Errorf("%w: %s", ErrChanged, path)
	case !os.SameFile(before, now) || before.Size() != now.Size() || !before.ModTime().Equal(now.ModTime()):
		return fmt.Errorf("%w: %s", ErrChanged, path)
	}
	return nil
}

// maxEditedFileBytes bounds a file updateFile reads.
const maxEditedFileBytes = 16 << 20

// updateFile is the read-modify-write of every file deploy edits in place
// (authorized_keys, known_hosts, the gateway config). It checks the
// directory (checkDir) and the file (checkFile, owned by the directory's
// owner or root), holds the directory's lock, reads the file, and lets
// edit compute the new content; unless edit reports Unchanged, the new
// content replaces the file atomically with the old mode and owner (a new
// file gets newMode and the directory's owner), provided nobody changed
// the file meanwhile.
func updateFile(file string, newMode fs.FileMode, edit func(old []byte, exists bool) ([]byte, Change, error)) (Change, error) {
	file, err := filepath.Abs(file)
	if err != nil {
		return 0, fmt.Errorf("deploy: %w", err)
	}
	dir := filepath.Dir(file)
	uid, gid, err := checkDir(dir, -1)
	if err != nil {
		return 0, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return 0, err
	}
	defer unlock()

	mode := newMode
	before, err := os.Lstat(file)
	var old []byte
	switch {
	case errors.Is(err, fs.ErrNotExist):
		before = nil
	case err != nil:
		return 0, fmt.Errorf("deploy: %w", err)
	default:
		if err := checkFile(file, before, uid, false); err != nil {
			return 0, err
		}
		if before.Size() > maxEditedFileBytes {
			return 0, fmt.Errorf("deploy: %s is larger than %d bytes", file, maxEditedFileBytes)
		}
		mode = before.Mode().Perm()
		uid, gid = ownerOf(before)
		if old, err = os.ReadFile(file); err != nil {
			return 0, fmt.Errorf("deploy: %w", err)
		}
	}
	data, change, err := edit(old, before != nil)
	if err != nil || change == Unchanged {
		return change, err
	}
	if err := writeAtomic(file, data, mode, uid, gid, func() error { return sameFile(file, before) }); err != nil {
		return 0, err
	}
	return change, nil
}
