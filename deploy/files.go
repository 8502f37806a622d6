package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockgw/airlock/deploy/securefile"
)

// ErrChanged is returned when a file changed between our read and our
// rename; nothing was written, and running again is safe.
var ErrChanged = errors.New("the file changed while it was being rewritten; nothing was written: run this again")

// lockWait is how long an edit waits for another airlock process editing
// in the same directory.
const lockWait = 10 * time.Second

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

// forFile names file in a refusal of its directory, whose fix may be to
// move the file (out of a sticky directory such as /tmp).
func forFile(err error, file string) error {
	var se *securefile.Error
	if errors.As(err, &se) && se.Path == filepath.Dir(file) {
		se.File = file
	}
	return err
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
		return 0, err
	}
	dir := filepath.Dir(file)
	uid, gid, err := securefile.CheckDirs(dir, -1)
	if err != nil {
		return 0, forFile(err, file)
	}
	unlock, err := securefile.LockDir(dir, lockWait)
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
		return 0, err
	default:
		if err := securefile.CheckFile(file, before, uid); err != nil {
			return 0, err
		}
		if before.Size() > maxEditedFileBytes {
			return 0, fmt.Errorf("%s is larger than %d bytes: is it the right file?", file, maxEditedFileBytes)
		}
		mode = before.Mode().Perm()
		uid, gid = securefile.Owner(before)
		if old, err = os.ReadFile(file); err != nil {
			return 0, err
		}
	}
	data, change, err := edit(old, before != nil)
	if err != nil || change == Unchanged {
		return change, err
	}
	if err := securefile.WriteFile(file, data, securefile.WriteOptions{Mode: mode, UID: uid, GID: gid,
		Unchanged: func() error { return sameFile(file, before) }}); err != nil {
		return 0, err
	}
	return change, nil
}
