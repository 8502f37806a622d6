package forcedcmd

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveWith is "walk" in a binary built to take the fallback path even
// where openat2 exists (go build -ldflags "-X
// github.com/airlockgw/airlock/deploy/forcedcmd.resolveWith=walk"): a
// test seam, never set in a release build.
var resolveWith string

// Errors of a path resolved beneath a transfer's root.
var (
	errLinkOnTheWay   = errors.New("a symbolic link is on the way (a transfer never follows a link beneath put_under or get_under)")
	errNotDirOnTheWay = errors.New("a part of the path is not a directory")
)

// rootOf picks, of the roots (put_under or get_under), the longest one
// path is strictly beneath; ok is false when path is beneath none
// (MatchTransfer refuses such a path first).
func rootOf(path string, roots []string) (root string, ok bool) {
	for _, r := range roots {
		if strings.HasPrefix(path, r+"/") && len(r) > len(root) {
			root, ok = r, true
		}
	}
	return root, ok
}

// openRoot opens a transfer root as a directory descriptor. The root is
// the operator's: opened by its name as the policy spells it (a link in
// it is the operator's to make); everything beneath it is opened from
// this descriptor (openBeneath).
func openRoot(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening %s: %w", root, err)
	}
	return fd, nil
}

// openBeneath opens rel, a clean relative path with no ".." (as
// MatchTransfer checked it), beneath the directory descriptor root,
// never following a symbolic link in any of its components and never
// leaving root: the check and the use are one step, so a directory
// swapped for a link meanwhile is refused, not followed. It uses
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) (Linux 5.6), or where the
// kernel has no openat2 (ENOSYS), a walk that opens one component at a
// time with O_NOFOLLOW (O_DIRECTORY for each directory).
func openBeneath(root int, rel string, flags int) (int, error) {
	for _, el := range strings.Split(rel, "/") {
		if el == "" || el == "." || el == ".." {
			return -1, fmt.Errorf("%q is not a clean relative path", rel)
		}
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if resolveWith != "walk" {
		how := &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		for range 64 {
			fd, err := unix.Openat2(root, rel, how)
			switch {
			case err == nil:
				return fd, nil
			case errors.Is(err, unix.EAGAIN):
				// A rename raced the lookup; the kernel asks for a retry.
				continue
			case !errors.Is(err, unix.ENOSYS):
				return -1, beneathErr(err, root, rel)
			}
			return walkBeneath(root, rel, flags)
		}
		return -1, errors.New("the path kept changing while it was opened")
	}
	return walkBeneath(root, rel, flags)
}

// walkBeneath is openBeneath without openat2: each directory on the way
// is opened from the one before with O_NOFOLLOW|O_DIRECTORY, so a link
// in its place fails (ELOOP or ENOTDIR) instead of being followed.
func walkBeneath(root int, rel string, flags int) (int, error) {
	els := strings.Split(rel, "/")
	dir := root
	defer func() {
		if dir != root {
			unix.Close(dir)
		}
	}()
	for _, el := range els[:len(els)-1] {
		next, err := unix.Openat(dir, el, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, beneathErr(err, dir, el)
		}
		if dir != root {
			unix.Close(dir)
		}
		dir = next
	}
	fd, err := unix.Openat(dir, els[len(els)-1], flags, 0)
	if err != nil {
		return -1, beneathErr(err, dir, els[len(els)-1])
	}
	return fd, nil
}

// beneathErr says what a refused resolution of rel beneath dir met: a
// link (ELOOP, EXDEV for a path that would leave the root, or ENOTDIR
// where a link to a directory stands, which O_DIRECTORY|O_NOFOLLOW
// reports so), a file where a directory should be, or the error itself.
func beneathErr(err error, dir int, rel string) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return errLinkOnTheWay
	case errors.Is(err, unix.ENOTDIR):
		// Only the message depends on this look, never the refusal.
		p := ""
		for _, el := range strings.Split(rel, "/") {
			p += el
			var st unix.Stat_t
			if unix.Fstatat(dir, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return errLinkOnTheWay
			}
			p += "/"
		}
		return errNotDirOnTheWay
	}
	return err
}

// errOutside: a transfer path beneath none of its roots (MatchTransfer
// refuses it before; kept so that no path reaches the file system
// unconfined).
var errOutside = errors.New("not beneath put_under or get_under")
