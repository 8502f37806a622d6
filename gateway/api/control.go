package api

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// ControlFileName is the file next to the socket that carries the local
// token.
const ControlFileName = "control.json"

// Control is the content of the control file.
type Control struct {
	Socket string `json:"socket"`
	Token  string `json:"token"`
}

// maxControl bounds the control file: a path and a token.
const maxControl = 64 << 10

// systemUIDMax is the highest uid of a system account (Debian's
// SYS_UID_MAX, what `useradd --system` hands out): the documented
// installs run the gateway as such an account, and a user who logs in
// gets a uid above it.
const systemUIDMax = 999

// ReadControl reads the control file in the socket's directory, once both
// passed CheckControl: the token and every byte after it go only to a
// gateway that root, this user or a system account put there.
func ReadControl(socket string) (Control, error) {
	var c Control
	path, err := CheckControl(socket)
	if err != nil {
		return c, err
	}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxControl+1))
	if err != nil {
		return c, err
	}
	if len(b) > maxControl {
		return c, fmt.Errorf("control file %s: over %d bytes; it is not a gateway's", path, maxControl)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("control file %s: %w", path, err)
	}
	return c, nil
}

// ControlError says why a client refuses the gateway at a socket: its
// directory or control file is not what a gateway's user made. Nothing
// was sent there.
type ControlError struct {
	// Path is the file or directory refused (where a link led, when it
	// was one).
	Path string
	// UID and Mode are its owner and permission bits.
	UID  int
	Mode fs.FileMode
	// Problem says what is wrong with it; Fix what makes it right.
	Problem, Fix string
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("refusing the gateway's %s (owner %s, mode %04o): it %s, so what answers there may not be the airlock gateway; nothing was sent; fix: %s",
		e.Path, userName(e.UID), e.Mode.Perm(), e.Problem, e.Fix)
}

// userName is "name (uid N)", or "uid N" when the name is unknown.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// CheckControl checks the gateway at socket before anything is sent to
// it, and returns the control file's real path. The socket's directory
// and its control.json (links followed, each to where it leads) must be
// owned by the gateway's user — root, this user, or a system account
// (uid ≤ 999, as `useradd --system` makes): the control file by the
// directory's owner or root. Neither may be writable by group or others
// (socket_group may read), the control file not readable by others, and
// the directory's parent not writable by group or others unless it is
// sticky (as /tmp). Anything else is a *ControlError naming the file, its
// owner and mode, and the fix; a missing file is the os error.
func CheckControl(socket string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(socket))
	if err != nil {
		return "", err
	}
	dfi, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	duid := ownerOf(dfi)
	me := os.Geteuid()
	switch {
	case !dfi.IsDir():
		return "", &ControlError{Path: dir, UID: duid, Mode: dfi.Mode(), Problem: "is not a directory", Fix: "point $AIRLOCK_SOCKET (or --socket) at the socket in the gateway's directory"}
	case !trustedOwner(duid, me):
		return "", untrusted(dir, duid, dfi.Mode())
	case dfi.Mode().Perm()&0o022 != 0:
		return "", &ControlError{Path: dir, UID: duid, Mode: dfi.Mode(), Problem: "is writable by group or others", Fix: "chmod go-w " + dir + " (the gateway makes it 0700, or 0750 with listen.socket_group)"}
	}
	parent := filepath.Dir(dir)
	if pfi, err := os.Stat(parent); err == nil && pfi.Mode().Perm()&0o022 != 0 && pfi.Mode()&fs.ModeSticky == 0 {
		return "", &ControlError{Path: parent, UID: ownerOf(pfi), Mode: pfi.Mode(), Problem: "is writable by group or others (anyone there could replace the gateway's directory)", Fix: "chmod go-w " + parent + ", or put listen.socket in a directory only the gateway's user and root can change"}
	}
	path, err := filepath.EvalSymlinks(filepath.Join(dir, ControlFileName))
	if err != nil {
		return "", err
	}
	cfi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	cuid := ownerOf(cfi)
	switch {
	case !cfi.Mode().IsRegular():
		return "", &ControlError{Path: path, UID: cuid, Mode: cfi.Mode(), Problem: "is not a regular file", Fix: "remove it and restart the gateway"}
	case !trustedOwner(cuid, me):
		return "", untrusted(path, cuid, cfi.Mode())
	case cuid != duid && cuid != 0:
		return "", &ControlError{Path: path, UID: cuid, Mode: cfi.Mode(), Problem: "is owned by neither root nor " + userName(duid) + ", the owner of its directory (the gateway writes it as its own user)", Fix: "remove it and restart the gateway"}
	case cfi.Mode().Perm()&0o026 != 0:
		return "", &ControlError{Path: path, UID: cuid, Mode: cfi.Mode(), Problem: "is writable by group or others, or readable by others", Fix: "restart the gateway, which writes it 0600 (0640 with listen.socket_group)"}
	}
	return path, nil
}

// untrusted is the error of a file owned by a user who is not the
// gateway's.
func untrusted(path string, uid int, mode fs.FileMode) *ControlError {
	return &ControlError{Path: path, UID: uid, Mode: mode,
		Problem: "is owned by a user who is neither root, you, nor a system account (a gateway's user)",
		Fix:     "use the socket of the gateway an operator runs (see docs/operators.md: its user is made with useradd --system), or remove what is there"}
}

// trustedOwner reports whether uid may be the gateway's user for a
// caller running as me.
func trustedOwner(uid, me int) bool {
	return uid >= 0 && (uid == 0 || uid == me || uid <= systemUIDMax)
}

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// LocalClient is the client of the gateway at socket, as agents and the
// CLI reach it: its control file passed CheckControl before its token was
// read, and the client gives up on the gateway after $AIRLOCK_SILENCE
// (SilenceFromEnv) without a byte from it.
func LocalClient(socket string) (*Client, error) {
	silence, err := SilenceFromEnv()
	if err != nil {
		return nil, err
	}
	ctl, err := ReadControl(socket)
	if err != nil {
		return nil, err
	}
	return NewLocalClient(socket, ctl.Token).WithSilence(silence), nil
}
