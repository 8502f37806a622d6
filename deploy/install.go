package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockgw/airlock/deploy/securefile"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// Change is what an install or removal did to a file. The set is closed.
type Change uint8

// The changes.
const (
	// Unchanged: the file already said what was asked (the line was
	// there, or there was nothing to remove); it was not rewritten.
	Unchanged Change = iota + 1
	// Added: the line was appended (the file was created if missing).
	Added
	// Replaced: a line with the same airlock comment was replaced.
	Replaced
	// Removed: the line(s) with the airlock comment were removed.
	Removed
)

func (c Change) String() string {
	switch c {
	case Unchanged:
		return "unchanged"
	case Added:
		return "added"
	case Replaced:
		return "replaced"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("Change(%d)", uint8(c))
}

// The reasons a line is refused by the installer.
var (
	ErrInvalidLine    = errors.New("not a valid authorized_keys line (give the line airlock deploy authorized-keys printed, quoted)")
	ErrNotAirlockLine = errors.New("the line has no airlock:TARGET/ACCOUNT comment (give the line airlock deploy authorized-keys printed)")
	ErrNotRestricted  = errors.New(`the line lacks the "restrict" option (give the line airlock deploy authorized-keys printed)`)
)

// InstallLine puts line into the authorized_keys file: it replaces the line
// (or lines) carrying the same "airlock:TARGET/ACCOUNT" comment, or appends
// it, and leaves every other line byte for byte as it was, including
// comments, blank lines, odd whitespace and lines it cannot parse. The
// line must parse, carry an airlock comment and have the "restrict"
// option (as AuthorizedKeysLine writes it).
//
// The file is rewritten atomically (see package doc) and keeps its mode
// and owner; a new file gets the directory's owner and mode 0600, or 0644
// in a directory of root's (sshd reads the file as the account). A missing
// directory (~/.ssh) is created for the owner of its parent. The
// directory and its parents must be owned by root or the directory's owner
// and not writable by others (sticky parents such as /tmp excepted), and
// the file, if present, a regular file owned by that owner or root and not
// writable by group or others; anything else is a *securefile.Error and
// nothing is written. Concurrent airlock installers take turns on a lock
// of the directory; an edit by someone else between our read and our
// rename is detected and reported as ErrChanged.
func InstallLine(file, line string) (Change, error) {
	comment, err := ParseAirlockLine(line)
	if err != nil {
		return 0, err
	}
	_, _, options, _, _ := ssh.ParseAuthorizedKey([]byte(line))
	restricted := false
	for _, o := range options {
		restricted = restricted || strings.EqualFold(o, "restrict")
	}
	if !restricted {
		return 0, ErrNotRestricted
	}
	return rewrite(file, comment, line)
}

// RemoveLine removes from the authorized_keys file every line carrying the
// airlock comment of line, which is either such a line or the bare comment
// "airlock:TARGET/ACCOUNT". Everything else is as for InstallLine; a
// missing file or line is Unchanged.
func RemoveLine(file, line string) (Change, error) {
	comment, err := airlockComment(line)
	if err != nil {
		if comment, err = ParseAirlockLine(line); err != nil {
			return 0, err
		}
	}
	return rewrite(file, comment, "")
}

// rewrite replaces the lines whose comment is comment with line, or
// removes them when line is "".
func rewrite(file, comment, line string) (Change, error) {
	if line != "" {
		if err := ensureKeysDir(filepath.Dir(file)); err != nil {
			return 0, err
		}
		if err := strictModes(file); err != nil {
			return 0, err
		}
	}
	// sshd reads authorized_keys as the account. In a directory of the
	// account's own (~/.ssh) the account owns a new file and only it reads
	// it; in one of root's (AuthorizedKeysFile /etc/ssh/authorized_keys/%u)
	// root owns it and the account must be able to read it. Public keys are
	// not secrets; nobody else may write either.
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(filepath.Dir(file)); err == nil {
		if uid, _ := securefile.Owner(fi); uid == 0 {
			mode = 0o644
		}
	}
	return updateFile(file, mode, func(old []byte, exists bool) ([]byte, Change, error) {
		if !exists && line == "" {
			return nil, Unchanged, nil
		}
		data, change := edit(old, comment, line)
		return data, change, nil
	})
}

// edit returns old with the lines carrying comment replaced by line (at
// the first one's place) or removed (line == ""), or line appended when
// none carries it. Lines are split on "\n" only and put back with exactly
// the bytes they had.
func edit(old []byte, comment, line string) ([]byte, Change) {
	var lines [][]byte
	if len(old) > 0 {
		lines = bytes.Split(old, []byte("\n"))
	}
	// A final "\n" leaves an empty last element: the file ends in a
	// newline, which we keep.
	endsInNewline := len(lines) > 0 && len(lines[len(lines)-1]) == 0
	if endsInNewline {
		lines = lines[:len(lines)-1]
	}
	var (
		out   [][]byte
		found bool
		same  = true
	)
	for _, l := range lines {
		if !carries(l, comment) {
			out = append(out, l)
			continue
		}
		if line == "" || found {
			same = false
			continue // removed, or a duplicate of the line we already placed
		}
		found = true
		repl := []byte(line)
		if bytes.HasSuffix(l, []byte("\r")) {
			repl = append(repl, '\r') // keep a CRLF file's line ending
		}
		same = same && bytes.Equal(l, repl)
		out = append(out, repl)
	}
	change := Replaced
	switch {
	case line == "" && same:
		return old, Unchanged
	case line == "":
		change = Removed
	case !found:
		out = append(out, []byte(line))
		change = Added
		endsInNewline = true
	case same:
		return old, Unchanged
	}
	if len(out) > 0 && len(out[len(out)-1]) == 0 {
		// A blank line is now last: terminate it, or it would read as
		// the file's final newline rather than a line.
		endsInNewline = true
	}
	data := bytes.Join(out, []byte("\n"))
	if endsInNewline && len(out) > 0 {
		data = append(data, '\n')
	}
	return data, change
}

// carries reports whether an authorized_keys line is one of ours with this
// comment. Lines that do not parse are never ours.
func carries(l []byte, comment string) bool {
	if !bytes.Contains(l, []byte(comment)) {
		return false
	}
	_, c, _, _, err := ssh.ParseAuthorizedKey(l)
	return err == nil && strings.TrimSpace(c) == comment
}

// ErrStrictModes: sshd's StrictModes (on by default) would refuse the
// authorized_keys file where it is, so a line there would never log
// anyone in.
var ErrStrictModes = errors.New("sshd (StrictModes, on by default) would refuse this authorized_keys file: every directory above it, sticky or not, must be writable by nobody but root or the account")

// strictModes refuses what sshd's StrictModes refuses: every directory
// from the file's up to the account's home directory (or to / for a file
// outside it) must be owned by root or the account and writable by
// neither group nor others — sticky or not (/tmp is refused) — and the
// file, if there, likewise. The account is the directory's owner (the
// file's, when root owns the directory but not the file).
func strictModes(file string) error {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return err
	}
	di, err := os.Stat(dir)
	if err != nil {
		return err
	}
	account, _ := securefile.Owner(di)
	refuse := func(kind, path string, fi fs.FileInfo, problem securefile.Problem) error {
		u, _ := securefile.Owner(fi)
		return fmt.Errorf("%w (bad ownership or modes for %s %s): %w", ErrStrictModes, kind, path,
			&securefile.Error{Path: path, Problem: problem, Mode: fi.Mode(), UID: u, WantUID: account, File: file})
	}
	if fi, err := os.Stat(file); err == nil {
		u, _ := securefile.Owner(fi)
		if u != 0 {
			account = u
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return refuse("file", file, fi, securefile.WritableByOthers)
		}
	}
	home := ""
	if u, err := user.LookupId(strconv.Itoa(account)); err == nil && u.HomeDir != "" && u.HomeDir != "/" {
		home = filepath.Clean(u.HomeDir)
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		switch u, _ := securefile.Owner(fi); {
		case u != 0 && u != account:
			return refuse("directory", d, fi, securefile.WrongOwner)
		case fi.Mode().Perm()&0o022 != 0:
			return refuse("directory", d, fi, securefile.WritableByOthers)
		}
		if d == home || d == filepath.Dir(d) {
			return nil
		}
	}
}

// ensureKeysDir creates a missing authorized_keys directory (~/.ssh, as
// ssh-copy-id does) owned by the owner of its parent, mode 0700 when that
// is an account and 0755 when it is root, after checking the parent as
// every directory on the way is checked. An existing directory is left to
// updateFile's checks.
func ensureKeysDir(dir string) error {
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	parent := filepath.Dir(dir)
	uid, gid, err := securefile.CheckDirs(parent, -1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist: is the account's home directory there? (create the account first)", parent)
		}
		return err
	}
	mode := fs.FileMode(0o700)
	if uid == 0 {
		mode = 0o755
	}
	if err := os.Mkdir(dir, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile: the checks of what is there judge it
		}
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// Set mode and owner through a descriptor of the directory just made,
	// never through its name: the parent's owner could swap that name for
	// a link between the mkdir and the chmod.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if err := f.Chmod(mode); err != nil { // umask may have cut it
		return err
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("give %s to the owner of %s: %w", dir, parent, err)
	}
	return nil
}
