// Package securefile is airlock's one implementation of the rules for
// files that hold secrets or that other users must not change: private
// keys, the CA and checkpoint signing keys, passphrase and secret files,
// the state databases, the local token's control file, authorized_keys
// and known_hosts files, and the directories that hold them.
//
// The rules: a secret is a regular file owned by the current user (or
// root) that nobody else may read or write; a file airlock writes is
// replaced atomically (a temporary file in the same directory, given its
// mode and owner first, checked, synced, renamed, the directory synced),
// and is never published if its mode did not stick; a directory others
// may write to is refused, never repaired, since what is already in it
// cannot be trusted. Every refusal is an *Error naming the path, what is
// wrong and the command that fixes it.
//
// It knows nothing of what the files are for. Every room that keeps files
// (auditchain, approvals, deploy, the gateway) calls it rather than
// checking modes itself.
package securefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
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
	// ReadableByOthers: a secret that group or other may read (or has any
	// other permission on).
	ReadableByOthers
	// WrongOwner: owned by someone other than the intended owner or root.
	WrongOwner
	// NotRegular: a symbolic link, device, directory or other non-regular
	// file where a regular file belongs.
	NotRegular
	// NotDirectory: a file (or a symbolic link) where a directory belongs.
	NotDirectory
	// WrongMode: a directory airlock keeps whose mode is not the one it
	// must have.
	WrongMode
	// ModeNotApplied: the file system did not keep the mode airlock set,
	// so the file was not published.
	ModeNotApplied
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
	case WrongMode:
		return "not of the mode it must have"
	case ModeNotApplied:
		return "given a mode the file system did not keep"
	}
	return fmt.Sprintf("Problem(%d)", uint8(p))
}

// Error refuses a file or directory whose type, owner or mode would let
// someone other than its owner (or root) change what airlock writes or
// read what it keeps secret. Nothing was read or written when it is
// returned.
type Error struct {
	Path    string
	Problem Problem
	// Mode and UID are what was found; WantUID is the intended owner and
	// WantMode, for WrongMode and ModeNotApplied, the mode it must have.
	Mode     fs.FileMode
	UID      int
	WantUID  int
	WantMode fs.FileMode
	// Secret marks a file others must not read either.
	Secret bool
	// File, for a refused directory, is the file airlock was to use in
	// it, when known: the fix may be to move that file.
	File string
}

func (e *Error) Error() string {
	what := e.Path
	if e.File != "" && e.File != e.Path {
		what = "the directory " + e.Path + " (holding " + e.File + ")"
	}
	mode := e.Mode.Perm()
	if e.Mode&fs.ModeSticky != 0 {
		mode |= 0o1000 // as ls and chmod show it: 1777 for /tmp
	}
	return fmt.Sprintf("%s is %s (mode %04o, owner %s); refusing to use it; fix: %s",
		what, e.Problem, mode, UserName(e.UID), e.Fix())
}

// Fix is the command (or the change) that repairs the problem.
func (e *Error) Fix() string {
	switch e.Problem {
	case WritableByOthers, ReadableByOthers:
		if e.Mode.IsDir() && e.Mode&fs.ModeSticky != 0 {
			return e.stickyFix()
		}
		if e.Secret {
			return "chmod 600 " + e.Path
		}
		return "chmod go-w " + e.Path
	case WrongOwner:
		return fmt.Sprintf("chown %s %s", AccountName(e.WantUID), e.Path)
	case NotRegular:
		return "replace " + e.Path + " with a regular file"
	case NotDirectory:
		return "rm " + e.Path
	case WrongMode:
		return fmt.Sprintf("chmod %o %s", e.WantMode.Perm(), e.Path)
	case ModeNotApplied:
		return "keep " + e.Path + " on a file system that keeps Unix permissions"
	}
	return "check " + e.Path
}

// stickyFix is the fix for a file kept directly in a sticky directory
// others may write (/tmp is 1777 by design, and must stay so): the
// directory is right as it is; the file is in the wrong place.
func (e *Error) stickyFix() string {
	file := e.File
	if file == "" {
		file = "the file"
	}
	return fmt.Sprintf("move %s out of %s, into a directory that only root or its owner can write, under directories others cannot write either (the owner's home directory, say), and leave %s as it is: "+
		"it is sticky and writable by everyone by design, so anyone may create files in it, and another user could have put a file there first under the name airlock uses",
		file, e.Path, e.Path)
}

// UserName names account uid for a message: "airlock (uid 999)", or
// "uid 999" when no account has that uid.
func UserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// AccountName is account uid as chown takes it: its name, or the number.
func AccountName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// Owner returns the owner and group of a file.
func Owner(fi fs.FileInfo) (uid, gid int) {
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// CheckSecret refuses a secret file that is not a regular file owned by
// wantUID (-1: the current user) or root, or that group or others may
// read or write. fi describes path (nil: it is read with os.Stat, which
// follows links to where the file really is).
func CheckSecret(path string, fi fs.FileInfo, wantUID int) error {
	return checkFile(path, fi, wantUID, true)
}

// CheckFile is CheckSecret for a file that others may read but must not
// change.
func CheckFile(path string, fi fs.FileInfo, wantUID int) error {
	return checkFile(path, fi, wantUID, false)
}

func checkFile(path string, fi fs.FileInfo, wantUID int, secret bool) error {
	if wantUID < 0 {
		wantUID = os.Geteuid()
	}
	if fi == nil {
		var err error
		if fi, err = os.Stat(path); err != nil {
			return err
		}
	}
	uid, _ := Owner(fi)
	e := &Error{Path: path, Mode: fi.Mode(), UID: uid, WantUID: wantUID, Secret: secret}
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

// ReadToken reads a secret file (ReadSecret) that holds one bearer token
// on one line, and returns the token without its surrounding space.
func ReadToken(path string, max int64) (string, error) { return ReadTokenFor(path, max, -1) }

// ReadTokenFor is ReadToken for a token file of account uid, as
// ReadSecretFor reads a secret (-1: the current user).
func ReadTokenFor(path string, max int64, uid int) (string, error) {
	b, err := ReadSecretFor(path, max, uid)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("%s is empty; fix: write the token into it, on one line", path)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("%s holds several lines; fix: write the token alone into it, on one line", path)
	}
	return tok, nil
}

// ReadSecret checks a secret file (CheckSecret, owned by the current
// user) and reads it, refusing one larger than max bytes.
func ReadSecret(path string, max int64) ([]byte, error) {
	return ReadSecretFor(path, max, -1)
}

// ReadSecretFor is ReadSecret for a secret of account uid (-1: the current
// user), read by whoever runs this — root checking the files of the
// service user the gateway runs as. Besides CheckSecret's rules with uid
// as the owner, a file root owns is refused when uid is another account:
// that account could not open it.
func ReadSecretFor(path string, max int64, uid int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, openError(path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := CheckSecret(path, fi, uid); err != nil {
		return nil, err
	}
	if owner, _ := Owner(fi); uid > 0 && owner != uid {
		return nil, &Error{Path: path, Problem: WrongOwner, Mode: fi.Mode(), UID: owner, WantUID: uid, Secret: true}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes, more than a secret of this kind can be; fix: check that the setting names the right file", path, max)
	}
	return b, nil
}

// explained is an error reworded for the person who must fix it; it
// still matches what it explains (errors.Is(err, fs.ErrPermission)).
type explained struct {
	text string
	err  error
}

func (e *explained) Error() string { return e.text }
func (e *explained) Unwrap() error { return e.err }

// openError says why path could not be opened and what to do: for a
// permission refused, who runs this, who owns the file, and whom to run
// as instead.
func openError(path string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	me := UserName(os.Geteuid())
	fi, serr := os.Stat(path)
	if serr != nil {
		return &explained{fmt.Sprintf("%s cannot be read by %s, who runs this: a directory on its path does not let that user in; fix: run this as the user the file is for (sudo -u USER …), or as root", path, me), err}
	}
	owner, _ := Owner(fi)
	return &explained{fmt.Sprintf("%s cannot be read by %s, who runs this: it belongs to %s with mode %04o; fix: run this as the user the file is for (sudo -u %s …, or as root), or, if it is for %s, give it to that user: chown %s %s",
		path, me, UserName(owner), fi.Mode().Perm(), AccountName(owner), me, AccountName(os.Geteuid()), path), err}
}

// CheckDirs checks dir and every directory above it: each must be a
// directory owned by root or wantUID (-1: by root or dir's own owner) and
// not writable by group or others, unless sticky (in a sticky directory
// nobody else may rename or remove what we own); dir itself must not be
// writable by others even when sticky. It returns dir's owner and group.
func CheckDirs(dir string, wantUID int) (uid, gid int, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return 0, 0, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, err
	}
	uid, gid = Owner(fi)
	if wantUID < 0 {
		wantUID = uid
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return 0, 0, err
		}
		u, _ := Owner(fi)
		switch {
		case !fi.IsDir():
			return 0, 0, &Error{Path: d, Problem: NotDirectory, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		case u != 0 && u != wantUID:
			return 0, 0, &Error{Path: d, Problem: WrongOwner, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		case fi.Mode().Perm()&0o022 != 0 && (d == dir || fi.Mode()&fs.ModeSticky == 0):
			return 0, 0, &Error{Path: d, Problem: WritableByOthers, Mode: fi.Mode(), UID: u, WantUID: wantUID}
		}
		if d == filepath.Dir(d) {
			return uid, gid, nil
		}
	}
}

// CheckUnchangeable refuses a file that the account uid could change or
// put another in the place of: the file, or any directory above it or
// above the file a link names, owned by uid (unless uid is root), or
// writable by group or others — a sticky directory excepted, where nobody
// may rename what another owns, but never the file itself. A missing file
// is the stat's error, unwrapped, for the caller to report as missing.
//
// The directories are those of the path as given, made absolute, and of
// where it really leads; a path whose cleaned form names another file
// than the path itself (".." after a link: the kernel follows the link
// first) is refused, since its directories would not be the file's.
func CheckUnchangeable(path string, uid int) error {
	fi, err := os.Stat(path) // the file that opening path opens
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if cfi, err := os.Stat(abs); err != nil || !os.SameFile(fi, cfi) {
		return fmt.Errorf("%s leads elsewhere than %s (a link followed by \"..\"); fix: give the file's real path", path, abs)
	}
	if err := unchangeable(abs, fi, uid, false); err != nil {
		return err
	}
	dirs := []string{filepath.Dir(abs)}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	if real, err = filepath.Abs(real); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		for d := dir; ; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				return err
			}
			if err := unchangeable(d, fi, uid, true); err != nil {
				return err
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return nil
}

// unchangeable is CheckUnchangeable's rule for one place.
func unchangeable(path string, fi fs.FileInfo, uid int, dir bool) error {
	owner, _ := Owner(fi)
	e := &Error{Path: path, Mode: fi.Mode(), UID: owner, WantUID: 0}
	switch {
	case uid != 0 && owner == uid:
		e.Problem = WrongOwner
	case fi.Mode().Perm()&0o022 != 0 && (!dir || fi.Mode()&fs.ModeSticky == 0):
		e.Problem = WritableByOthers
	default:
		return nil
	}
	return e
}

// CheckDir checks one directory (not its parents): a directory, owned by
// the current user or root, that nobody else may write to.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	me := os.Geteuid()
	uid, _ := Owner(fi)
	switch {
	case !fi.IsDir():
		return &Error{Path: dir, Problem: NotDirectory, Mode: fi.Mode(), UID: uid, WantUID: me}
	case uid != me && uid != 0:
		return &Error{Path: dir, Problem: WrongOwner, Mode: fi.Mode(), UID: uid, WantUID: me}
	case fi.Mode().Perm()&0o022 != 0:
		return &Error{Path: dir, Problem: WritableByOthers, Mode: fi.Mode(), UID: uid, WantUID: me}
	}
	return nil
}

// PrivateDir creates dir if missing (mode 0700, or 0750 with group gid ≥
// 0 owning it) and otherwise checks it: a real directory (not a link),
// owned by the current user. A directory someone else could write to is
// refused, not repaired: files already in it cannot be trusted. One that
// only others could read or enter (systemd's RuntimeDirectoryMode, an old
// group setting) is given the mode and group asked for: nothing in it can
// have come from anyone else.
func PrivateDir(dir string, gid int) error {
	want := fs.FileMode(0o700)
	if gid >= 0 {
		want = 0o750
	}
	return privateDir(dir, gid, want)
}

// PassageDir is PrivateDir for a directory group gid must pass through
// but not read: mode 0710, group gid (the state directory, when the
// socket its group uses is inside it).
func PassageDir(dir string, gid int) error {
	return privateDir(dir, gid, 0o710)
}

func privateDir(dir string, gid int, want fs.FileMode) error {
	if err := checkPrivateDir(dir, gid, want, true); err != nil {
		return err
	}
	return checkPrivateDir(dir, gid, want, false)
}

// checkPrivateDir is PrivateDir's check; with repair it first creates the
// directory or sets its mode and group where that is safe.
func checkPrivateDir(dir string, gid int, want fs.FileMode, repair bool) error {
	if repair {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(dir, want); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	uid, g := Owner(fi)
	me := os.Geteuid()
	e := &Error{Path: dir, Mode: fi.Mode(), UID: uid, WantUID: me, WantMode: want}
	switch {
	case !fi.IsDir():
		e.Problem = NotDirectory
	case uid != me:
		e.Problem = WrongOwner
	case fi.Mode().Perm()&0o022 != 0:
		e.Problem = WritableByOthers
	case repair:
		// Ours and written by nobody else: set what was asked for (umask
		// may also have cut a new directory's mode).
		return repairDir(dir, want, gid)
	case fi.Mode().Perm() != want:
		e.Problem = WrongMode
	case gid >= 0 && g != gid:
		return fmt.Errorf("%s is not owned by group %d; fix: chgrp %d %s", dir, gid, gid, dir)
	default:
		return nil
	}
	return e
}

// repairDir gives dir mode want and, with gid ≥ 0, group gid, through a
// descriptor opened without following links, after checking again through
// that descriptor that it is still ours and written by nobody else.
func repairDir(dir string, want fs.FileMode, gid int) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	uid, g := Owner(fi)
	if uid != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s changed while it was checked (someone else is changing it); refusing to use it; fix: find who changes it, then run this again", dir)
	}
	if gid >= 0 && g != gid {
		if err := f.Chown(-1, gid); err != nil {
			return fmt.Errorf("chown %s to group %d: %w", dir, gid, err)
		}
	}
	if fi.Mode().Perm() != want {
		if err := f.Chmod(want); err != nil {
			return err
		}
	}
	return nil
}

// Create makes sure path exists, creating it empty with mode when it is
// missing; an existing file is left as it is.
func Create(path string, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return f.Close()
}

// CreatePrivate makes sure path exists (created empty, mode 0600, when
// missing) and is a secret file of the current user: databases that hold
// secrets are opened only after it.
func CreatePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return CheckSecret(path, fi, -1)
}

// WriteOptions say how WriteFile writes.
type WriteOptions struct {
	// Mode is the file's mode; it is applied before any byte is written
	// and checked: if the file system does not keep it, nothing is
	// published (*Error, ModeNotApplied).
	Mode fs.FileMode
	// UID and GID are the owner to give the file when they differ from
	// whoever creates it; -1 leaves that one as it is. The zero value
	// means root: set both.
	UID, GID int
	// Unchanged, when set, is called after the new content is durable and
	// before it replaces the old file: its error (for example, the old
	// file changed meanwhile) stops the write, the old file untouched.
	Unchanged func() error
	// NoReplace publishes with a hard link instead of a rename: the write
	// fails if path appeared meanwhile (a key is never replaced).
	NoReplace bool
}

// WriteFile replaces path with data atomically: a reader sees the old
// file or the new one, never a partial or over-permissive one. The
// temporary file in the same directory gets its mode and owner first, is
// checked, written, synced and renamed (or linked) over path, and the
// directory is synced. On any error the old file is as it was and the
// temporary file is gone.
func WriteFile(path string, data []byte, o WriteOptions) error {
	return writeFile(path, data, o, (*os.File).Chmod)
}

// writeFile is WriteFile with the call that applies the mode (tests stand
// in for a file system that ignores it).
func writeFile(path string, data []byte, o WriteOptions, chmod func(*os.File, fs.FileMode) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".airlock-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		tmp.Close()
		if err != nil || o.NoReplace {
			os.Remove(tmp.Name())
		}
	}()
	if err := chmod(tmp, o.Mode.Perm()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if u, g := Owner(fi); (o.UID >= 0 && u != o.UID) || (o.GID >= 0 && g != o.GID) {
		if err := tmp.Chown(o.UID, o.GID); err != nil {
			return fmt.Errorf("give %s owner %d:%d: %w", path, o.UID, o.GID, err)
		}
		if fi, err = tmp.Stat(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if fi.Mode().Perm() != o.Mode.Perm() {
		uid, _ := Owner(fi)
		return &Error{Path: path, Problem: ModeNotApplied, Mode: fi.Mode(), UID: uid, WantUID: o.UID, WantMode: o.Mode}
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.Unchanged != nil {
		if err := o.Unchanged(); err != nil {
			return err
		}
	}
	if o.NoReplace {
		err = os.Link(tmp.Name(), path)
	} else {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries durable (after a create, rename or
// link in it).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// ErrBusy is returned when another process holds a directory's lock for
// longer than LockDir waits.
var ErrBusy = errors.New("another airlock process is writing in this directory (wait for it to finish, then run this again)")

// LockDir takes an exclusive flock on dir, waiting up to wait, so that
// processes rewriting files in it take turns. The lock is the directory
// itself: no lock file is left behind.
func LockDir(dir string, wait time.Duration) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	deadline := time.Now().Add(wait)
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
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
