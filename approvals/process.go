package approvals

import (
	"context"
	"fmt"
	"path"
)

// Peer is a local caller as the kernel reports it for the gateway's Unix
// socket (SO_PEERCRED): process id, effective uid and gid at connect time.
type Peer struct {
	PID int
	UID int
	GID int
}

// ProcessID names one process over time. The kernel reuses pids; the start
// time (clock ticks after boot, /proc/PID/stat field 22) tells a new process
// at an old pid apart, so a run anchored on one can never pass to the other.
type ProcessID struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

func (id ProcessID) String() string { return fmt.Sprintf("%d@%d", id.PID, id.StartTime) }

// ProcStat is the cheap part of a process: what the chain walk needs.
type ProcStat struct {
	ID   ProcessID `json:"id"`
	PPID int       `json:"ppid"`
	// UID is the effective uid (what SO_PEERCRED reports).
	UID int `json:"uid"`
	// Comm is the kernel's short name (/proc/PID/comm, up to 15 bytes; the
	// process can change it).
	Comm string `json:"comm"`
	// Exe is the executable's path, empty when the gateway may not read it
	// (another user's process without CAP_SYS_PTRACE).
	Exe string `json:"exe,omitempty"`
}

// name is what the wrapper rule matches: the executable's base name when
// known, else the comm.
func (p ProcStat) name() string {
	if p.Exe != "" {
		return path.Base(p.Exe)
	}
	return p.Comm
}

// Process is what a reviewer sees of an anchor process.
type Process struct {
	ProcStat
	GID  int    `json:"gid"`
	User string `json:"user"`
	// ExeSHA256 is the hex SHA-256 of the running executable's file (read
	// through /proc/PID/exe, so a replaced path does not fool it).
	ExeSHA256 string   `json:"exe_sha256,omitempty"`
	Argv      []string `json:"argv"`
	Cwd       string   `json:"cwd,omitempty"`
	// Chain is the parent chain from the anchor's parent up to pid 1.
	Chain []ProcStat `json:"chain,omitempty"`
	// Warnings name the weak evidence about it (Warn…), as read when the
	// run was created.
	Warnings []string `json:"warnings,omitempty"`
}

// Inspector reads processes. The store uses it to identify local callers
// and to learn when an anchor exits; ProcFS is the real one, tests inject
// fakes for pid reuse and deaths on demand.
type Inspector interface {
	// Stat reads one process. A process that does not exist, or is a
	// zombie, is an error wrapping ErrNoProcess.
	Stat(pid int) (ProcStat, error)
	// Describe reads what a reviewer sees of id (without Chain). If pid is
	// now another process (other start time) it fails with ErrNoProcess.
	Describe(id ProcessID) (Process, error)
	// Wait blocks until the process id has exited (or its pid belongs to a
	// newer process) and returns nil, or returns ctx.Err() once ctx is done.
	Wait(ctx context.Context, id ProcessID) error
}

// DefaultTransparent is the default set of executable names that never
// anchor a run: shells and wrappers an agent runs tools through, so that a
// fresh shell per tool call is still one run.
var DefaultTransparent = []string{
	"sh", "bash", "dash", "zsh", "fish", "env", "timeout", "nice", "nohup", "setsid", "stdbuf", "xargs",
	"time", "ionice", "chrt", "flock", "taskset",
}

// maxChain bounds the parent walk (pid_max is 2^22, real chains are short).
const maxChain = 1024

// chain returns the caller's process and its ancestors up to pid 1.
// Every parent must have started no later than its child: a parent pid
// reused by a newer process breaks the chain instead of lending its place.
func chain(insp Inspector, peer Peer) ([]ProcStat, error) {
	c, _, err := chainUntil(insp, peer, nil)
	return c, err
}

// chainUntil is chain, stopping early once enough (given the chain read
// so far) says so; done reports whether it reached the top.
func chainUntil(insp Inspector, peer Peer, enough func([]ProcStat) bool) (c []ProcStat, done bool, err error) {
	self, err := insp.Stat(peer.PID)
	if err != nil {
		return nil, false, err
	}
	if self.UID != peer.UID {
		return nil, false, ErrPeerMismatch
	}
	return chainFrom(insp, []ProcStat{self}, enough)
}

// chainFrom goes on up from the last process of c, as chainUntil.
func chainFrom(insp Inspector, c []ProcStat, enough func([]ProcStat) bool) ([]ProcStat, bool, error) {
	for cur := c[len(c)-1]; cur.PPID > 0; {
		if enough != nil && enough(c) {
			return c, false, nil
		}
		if len(c) == maxChain {
			return nil, false, fmt.Errorf("local caller process: chain longer than %d: %w", maxChain, ErrNoProcess)
		}
		p, err := insp.Stat(cur.PPID)
		if err != nil {
			return nil, false, fmt.Errorf("local caller process: parent of pid %d: %w", cur.ID.PID, err)
		}
		if p.ID.StartTime > cur.ID.StartTime {
			return nil, false, fmt.Errorf("local caller process: parent pid %d was reused: %w", p.ID.PID, ErrNoProcess)
		}
		c = append(c, p)
		cur = p
	}
	return c, true, nil
}

// own returns the part of chain c that runs as the caller: the caller and
// its ancestors up to, not including, the first process of another
// (effective) uid. su, sudo, setuid wrappers, session managers and daemons
// end the walk there: a run, and so its requester, never belongs to a
// process of another user than the caller the kernel reported.
func own(c []ProcStat) []ProcStat {
	for i := 1; i < len(c); i++ {
		if c[i].UID != c[0].UID {
			return c[:i]
		}
	}
	return c
}

// heuristicAnchor returns the index in c (the caller's own chain, see own)
// of its anchor: the nearest strict ancestor of the caller that is not
// transparent and is not pid 1 (init would make every process on the host
// one run); failing that, the topmost process of c below pid 1 — a walk
// that ends at another user's process or at init (a service, a cron job, a
// container, a detached script) anchors there instead of being refused,
// the caller itself if it is the only one. A caller that is pid 1 itself
// (an agent that is its container's init, with the gateway in that
// container) anchors its own run: it is the agent. ErrNoAnchor never
// happens for a non-empty chain.
func heuristicAnchor(c []ProcStat, transparent map[string]bool) (int, error) {
	if len(c) > 0 && c[0].ID.PID == 1 {
		return 0, nil
	}
	top := -1
	for i := range c {
		if c[i].ID.PID == 1 {
			break
		}
		if i > 0 && !transparent[c[i].name()] {
			return i, nil
		}
		top = i
	}
	if top < 0 {
		return 0, ErrNoAnchor
	}
	return top, nil
}

// admits reports whether anchor is the caller (c[0]) or one of its
// ancestors, pid and start time both.
func admits(c []ProcStat, anchor ProcessID) bool {
	for _, p := range c {
		if p.ID == anchor {
			return true
		}
	}
	return false
}
