package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
	"golang.org/x/sys/unix"
)

// ProcFS is the Inspector for Linux: it reads /proc and waits on pidfds
// (pidfd_open(2), Linux 5.3+), falling back to polling /proc where pidfds
// are unavailable.
//
// The gateway must be able to read /proc/PID/exe and /proc/PID/cwd of its
// callers: run it as the agents' user, or grant CAP_SYS_PTRACE. Without
// that, Exe, ExeSHA256 and Cwd are empty and the wrapper rule falls back to
// the process's comm, which the process controls.
type ProcFS struct {
	// Root is the proc mount; empty means "/proc".
	Root string
	// PollInterval is how often Wait checks a process when it cannot use
	// a pidfd; zero means 250ms.
	PollInterval time.Duration
	// NoPidfd makes Wait poll even where pidfds work (to test the fallback).
	NoPidfd bool
}

func (p *ProcFS) root() string {
	if p == nil || p.Root == "" {
		return "/proc"
	}
	return p.Root
}

func (p *ProcFS) file(pid int, name string) string {
	return p.root() + "/" + strconv.Itoa(pid) + "/" + name
}

// Stat reads /proc/PID/stat and /proc/PID/status, and the exe link.
func (p *ProcFS) Stat(pid int) (ProcStat, error) {
	var buf [procBuf]byte
	st, err := p.stat(pid, buf[:])
	if err != nil {
		return ProcStat{}, err
	}
	// The Uid line is near the start of status: the part that fits the
	// buffer holds it (a long Groups line further down may be cut).
	status, err := readProc(p.file(pid, "status"), buf[:], false)
	if err != nil {
		return ProcStat{}, procErr(pid, err)
	}
	uid, _, err := parseStatusIDs(status, "Uid:")
	if err != nil {
		return ProcStat{}, err
	}
	st.UID = uid
	st.Exe, _ = os.Readlink(p.file(pid, "exe")) // EACCES for other users without CAP_SYS_PTRACE
	return st.ProcStat, nil
}

// ID reads only /proc/PID/stat: which process pid is now, for checking
// that a known one still runs.
func (p *ProcFS) ID(pid int) (ProcessID, error) {
	var buf [procBuf]byte
	st, err := p.stat(pid, buf[:])
	return st.ID, err
}

// stat reads and parses /proc/PID/stat; an exited process (a zombie) is
// ErrNoProcess.
func (p *ProcFS) stat(pid int, buf []byte) (statLine, error) {
	if pid <= 0 {
		return statLine{}, fmt.Errorf("local caller process %d: %w", pid, ErrNoProcess)
	}
	b, err := readProc(p.file(pid, "stat"), buf, true)
	if err != nil {
		return statLine{}, procErr(pid, err)
	}
	st, err := parseStat(b)
	if err != nil {
		return statLine{}, err
	}
	if st.ID.PID != pid {
		return statLine{}, fmt.Errorf("local caller process: /proc/%d/stat names pid %d", pid, st.ID.PID)
	}
	if st.zombie {
		return statLine{}, fmt.Errorf("local caller process: pid %d has exited: %w", pid, ErrNoProcess)
	}
	return st, nil
}

// procBuf holds a whole /proc/PID/stat (52 numbers and a comm of at most
// 64 escaped bytes) and the start of /proc/PID/status.
const procBuf = 4096

// readProc reads a /proc file into buf with one open, one read and one
// close: the walk up a caller's parents reads a few of these per request,
// and os.ReadFile would add a stat, a second read and a poller
// registration each time. whole: a file that fills buf is an error rather
// than cut.
func readProc(name string, buf []byte, whole bool) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if whole && n == len(buf) {
			return nil, fmt.Errorf("local caller process: %s is longer than %d bytes", name, len(buf))
		}
		return buf[:n], nil
	}
}

// Describe reads what a reviewer sees of id.
func (p *ProcFS) Describe(id ProcessID) (Process, error) {
	st, err := p.Stat(id.PID)
	if err != nil {
		return Process{}, err
	}
	if st.ID != id {
		return Process{}, fmt.Errorf("local caller process: pid %d is another process: %w", id.PID, ErrNoProcess)
	}
	pr := Process{ProcStat: st}
	status, err := os.ReadFile(p.file(id.PID, "status"))
	if err != nil {
		return Process{}, procErr(id.PID, err)
	}
	if pr.GID, _, err = parseStatusIDs(status, "Gid:"); err != nil {
		return Process{}, err
	}
	cmdline, err := os.ReadFile(p.file(id.PID, "cmdline"))
	if err != nil {
		return Process{}, procErr(id.PID, err)
	}
	pr.Argv = parseCmdline(cmdline)
	pr.Cwd, _ = os.Readlink(p.file(id.PID, "cwd"))
	pr.ExeSHA256, _ = hashFile(p.file(id.PID, "exe"))
	pr.User = strconv.Itoa(st.UID)
	if u, err := user.LookupId(pr.User); err == nil {
		pr.User = u.Username
	}
	pr.Warnings = anchorWarnings(pr, os.Stat)
	// Everything above was read by pid; make sure it was still id's pid.
	if again, err := p.Stat(id.PID); err != nil || again.ID != id {
		return Process{}, fmt.Errorf("local caller process: pid %d exited while read: %w", id.PID, ErrNoProcess)
	}
	return pr, nil
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func procErr(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("local caller process %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("local caller process: read /proc/%d: %w", pid, err)
}

// Wait returns nil once id has exited.
func (p *ProcFS) Wait(ctx context.Context, id ProcessID) error {
	if !p.NoPidfd {
		err := p.waitPidfd(ctx, id)
		if !errors.Is(err, errNoPidfd) {
			return err
		}
	}
	return p.waitPoll(ctx, id)
}

var errNoPidfd = errors.New("local caller process: pidfd unavailable")

// waitPidfd waits for the pidfd to become readable, which it does when the
// process exits, through the runtime's poller: no thread is parked in a
// system call and cancelling ctx wakes the wait.
func (p *ProcFS) waitPidfd(ctx context.Context, id ProcessID) error {
	fd, err := unix.PidfdOpen(id.PID, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil // already gone
		}
		return errNoPidfd
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	// The pid may have been reused before pidfd_open: the fd then refers
	// to the newcomer, and our process is gone.
	if st, err := p.Stat(id.PID); err != nil || st.ID != id {
		return nil
	}
	// Only a descriptor the runtime poller accepted takes deadlines.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return errNoPidfd
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return errNoPidfd
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return fmt.Errorf("local caller process: wait for pid %d: %w", id.PID, err)
	}
}

func (p *ProcFS) waitPoll(ctx context.Context, id ProcessID) error {
	every := p.PollInterval
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := p.Stat(id.PID)
		if errors.Is(err, ErrNoProcess) || err == nil && st.ID != id {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

type statLine struct {
	ProcStat
	zombie bool
}

// parseStat parses /proc/PID/stat (proc(5)) with proctree.ParseStat.
func parseStat(b []byte) (statLine, error) {
	p, err := proctree.ParseStat(b)
	if err != nil {
		return statLine{}, fmt.Errorf("local caller process: %w", err)
	}
	var st statLine
	st.ID = ProcessID{PID: p.PID, StartTime: p.StartTime}
	st.PPID = p.PPID
	st.Comm = p.Comm
	st.zombie = p.Exited()
	return st, nil
}

// parseStatusIDs returns the effective and real ids from the "Uid:" or
// "Gid:" line of /proc/PID/status.
func parseStatusIDs(b []byte, key string) (effective, realID int, err error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		r, err1 := strconv.Atoi(f[0])
		e, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || r < 0 || e < 0 {
			break
		}
		return e, r, nil
	}
	return 0, 0, fmt.Errorf("local caller process: /proc status has no valid %s line", key)
}

// parseCmdline splits /proc/PID/cmdline on NUL bytes.
func parseCmdline(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(string(b), "\x00")
}
