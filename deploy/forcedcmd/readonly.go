package forcedcmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/policy"
)

// Read-only enforcement. A request marked read-only (policy.ReadOnlyMark,
// which only the gateway holding the account's key sends) runs its verb
// with every mount read-only and no_new_privs:
//
//  1. Serve starts the supervisor (airlock-action --reap --read-only) in
//     a mount namespace of its own, and, when the account is not root, a
//     user namespace that maps the account's uid and gid to themselves
//     and nothing else (an unprivileged account may create one; a
//     multi-threaded Go program cannot unshare into one, so the new
//     process is cloned into it). The supervisor keeps CAP_SYS_ADMIN over
//     those namespaces across its exec as an ambient capability.
//  2. The supervisor makes every mount private, then read-only with
//     mount_setattr(2) (AT_RECURSIVE, MOUNT_ATTR_RDONLY: Linux 5.12),
//     checks in /proc/self/mountinfo that no mount is left writable, sets
//     no_new_privs and drops its ambient capabilities on the thread that
//     starts the program, and tells Serve "ok" on a pipe (descriptor 3)
//     before it starts the program.
//  3. If any step fails, the supervisor says why on that pipe instead and
//     starts nothing; Serve refuses the request (ExitRefused) with that
//     reason. Serve refuses too when the namespaces cannot be created, or
//     when the supervisor ends or stays silent without saying "ok".
//
// A write by the program then fails with EROFS ("Read-only file system").
// Inside a user namespace the program holds no capability (the thread
// that starts it has none, and under no_new_privs neither setuid bits nor
// file capabilities add any), so it cannot undo the read-only mounts, nor
// reach the writable mounts of a process outside the namespace through
// /proc/PID/root (the kernel lets only a process of the same user
// namespace, or one with CAP_SYS_PTRACE over it, follow that); files of
// other users show as owned by the overflow id (nobody). A root account's
// program stays root in its own mount namespace: the read-only mounts stop
// mistakes, not a root program set on writing. A verb with run_as is
// refused: sudo is setuid, which no_new_privs defeats.

// readOnlyFlag follows --reap to confine the verb (see above).
const readOnlyFlag = "--read-only"

// statusFD is the supervisor's descriptor of the pipe to Serve.
const statusFD = 3

// confinedOK is the supervisor's word that the program starts confined.
const confinedOK = "ok"

// confineWait bounds Serve's wait for the supervisor's word: the steps
// take milliseconds.
const confineWait = 10 * time.Second

// mountSetattr is mount_setattr(2). Tests make it fail in the
// supervisor, as a kernel older than 5.12 does (ENOSYS).
var mountSetattr = unix.MountSetattr

// confineError says why a verb could not be confined; nothing ran.
type confineError struct{ err error }

func (e *confineError) Error() string {
	return "read-only enforcement failed, so nothing ran: " + e.err.Error()
}

func (e *confineError) Unwrap() error { return e.err }

// startConfined starts cmd, the supervisor of a verb marked read-only, in
// namespaces of its own, and returns once it has confined itself. A
// *confineError means nothing ran (the supervisor has ended).
func startConfined(cmd *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return &confineError{err}
	}
	defer r.Close()
	attr := cmd.SysProcAttr
	attr.Cloneflags = syscall.CLONE_NEWNS
	if uid := os.Geteuid(); uid != 0 {
		gid := os.Getegid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// An exec by a user that is not root keeps only ambient
		// capabilities: the supervisor needs this one over its own
		// namespaces to remount them.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	cmd.ExtraFiles = []*os.File{w}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return &confineError{fmt.Errorf("cannot start the supervisor in a user and mount namespace of its own (are user namespaces allowed for this account?): %w", err)}
	}
	if err := awaitConfined(r); err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		return &confineError{err}
	}
	return nil
}

// awaitConfined reads the supervisor's word from r: nil for "ok", else
// the reason it gave, or that it gave none.
func awaitConfined(r *os.File) error {
	r.SetReadDeadline(time.Now().Add(confineWait))
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	switch msg := strings.TrimSpace(string(b)); {
	case msg == confinedOK:
		return nil
	case msg != "":
		return errors.New(msg)
	case err != nil:
		return fmt.Errorf("no word from the supervisor: %w", err)
	}
	return errors.New("the supervisor ended before it confined the verb")
}

// enterReadOnly is the supervisor's part: it confines what the calling
// goroutine starts from now on, and tells Serve on statusFD (told: Serve
// has the word, failure or not). The goroutine stays locked to its
// thread, which alone carries no_new_privs.
func enterReadOnly() (told bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(statusFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false, errors.New("--read-only is airlock-action's own: it reports on a pipe at descriptor 3")
	}
	unix.CloseOnExec(statusFD)
	status := os.NewFile(statusFD, "status")
	defer status.Close()
	err = confineSelf()
	word := confinedOK
	if err != nil {
		word = oneLine(err)
	}
	if _, werr := io.WriteString(status, word+"\n"); werr != nil {
		return false, errors.Join(err, fmt.Errorf("cannot tell airlock-action: %w", werr))
	}
	return true, err
}

// confineSelf makes every mount read-only and sets no_new_privs on this
// thread (see the steps above).
func confineSelf() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := mountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("making every mount read-only with mount_setattr (Linux 5.12 or later): %w", err)
	}
	if err := allReadOnly("/proc/self/mountinfo"); err != nil {
		return err
	}
	runtime.LockOSThread() // never unlocked: see enterReadOnly
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("dropping the ambient capabilities: %w", err)
	}
	if os.Geteuid() != 0 {
		// No capability at all on this thread: under no_new_privs a
		// program gets no more than its parent had, so not even
		// inheritable file capabilities give it one.
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var none [2]unix.CapUserData
		if err := unix.Capset(&hdr, &none[0]); err != nil {
			return fmt.Errorf("dropping the capabilities: %w", err)
		}
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return fmt.Errorf("no_new_privs is not set (%d, %v)", v, err)
	}
	return nil
}

// allReadOnly checks that every mount in mountinfo (proc(5)) is
// read-only.
func allReadOnly(mountinfo string) error {
	f, err := os.Open(mountinfo)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNT_POINT MOUNT_OPTIONS …
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			return fmt.Errorf("%s: unreadable line %q", mountinfo, sc.Text())
		}
		if !slices.Contains(strings.Split(fields[5], ","), "ro") {
			return fmt.Errorf("%s is still writable after mount_setattr", fields[4])
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s lists no mount", mountinfo)
	}
	return nil
}

// readOnlyRunAs is why a request marked read-only cannot run verb v,
// which has run_as.
func readOnlyRunAs(v *policy.Verb) error {
	return fmt.Errorf("verb %s runs as %s through sudo, which cannot run read-only-enforced (no_new_privs defeats sudo's setuid); the request was marked read-only, so it is refused: give the verb a class above read_only in the gateway's copy of the policy, or turn the account's enforce_read_only off", v.Name, v.RunAs)
}
