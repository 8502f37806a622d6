// Package proctree reads Linux's process table from /proc: which process
// is whose child, in which process group, started when, and whether it
// still runs; and it reaps the ended children a subreaper inherits.
// airlock-action uses it to stop everything a verb started and to confirm
// that it ended, airlock run to end what an agent left behind; tests use
// it to see what a command left behind.
//
// A process is named by its pid and its start time (clock ticks after boot,
// /proc/PID/stat field 22), so a pid the kernel reuses for a new process is
// never taken for the old one.
package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Proc is one process as /proc/PID/stat describes it.
type Proc struct {
	PID, PPID, PGID int
	// State is the state letter: R, S, D, T, Z (zombie), X (dead)…
	State byte
	// StartTime is when the process started, in clock ticks after boot.
	StartTime uint64
	// Comm is the process's name (at most 15 bytes; the process sets it).
	Comm string
	// UID owns /proc/PID: the process's effective uid (for a process that
	// is not dumpable, root).
	UID int
}

// Exited reports whether p had ended when it was read (a zombie waits
// only to be reaped).
func (p Proc) Exited() bool { return p.State == 'Z' || p.State == 'X' || p.State == 'x' }

// String is "PID (COMM, uid UID)".
func (p Proc) String() string {
	return fmt.Sprintf("%d (%s, uid %d)", p.PID, strconv.QuoteToASCII(p.Comm), p.UID)
}

// ErrMalformed: a /proc/PID/stat line that cannot be parsed.
var ErrMalformed = errors.New("malformed /proc/PID/stat")

// ParseStat parses one /proc/PID/stat line (proc(5)). The comm field is in
// parentheses and may itself hold ')' and spaces, so the fields after it
// are found from the last ')'. UID is left -1.
func ParseStat(b []byte) (Proc, error) {
	p := Proc{UID: -1}
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return p, ErrMalformed
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return p, fmt.Errorf("%w: pid", ErrMalformed)
	}
	// fields[0] is field 3 (state); field N is fields[N-3].
	fields := strings.Fields(string(b[closing+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return p, fmt.Errorf("%w: %d fields", ErrMalformed, len(fields)+2)
	}
	ppid, err1 := strconv.Atoi(fields[1])
	pgid, err2 := strconv.Atoi(fields[2])
	start, err3 := strconv.ParseUint(fields[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || ppid < 0 {
		return p, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	p.PID, p.PPID, p.PGID, p.State, p.StartTime = pid, ppid, pgid, fields[0][0], start
	p.Comm = string(b[open+1 : closing])
	return p, nil
}

// Read reads one process. A process that does not exist (or that /proc
// does not show this caller) is an error matching os.ErrNotExist.
func Read(pid int) (Proc, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Proc{}, err
	}
	p, err := ParseStat(b)
	if err != nil {
		return Proc{}, err
	}
	if p.PID != pid {
		return Proc{}, fmt.Errorf("%w: /proc/%d/stat names pid %d", ErrMalformed, pid, p.PID)
	}
	if fi, err := os.Stat(dir); err == nil {
		p.UID = int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	return p, nil
}

// Gone reports whether err, from Read, says the process does not exist
// (any other error says nothing about it).
func Gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// Table reads every process /proc shows. Processes that end while it
// reads are left out; a process that cannot be read for another reason
// fails the whole read, so that nobody mistakes it for one that ended.
func Table() ([]Proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make([]Proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, err := Read(pid)
		switch {
		case err == nil:
			out = append(out, p)
		case !Gone(err):
			return nil, err
		}
	}
	return out, nil
}

// Descendants returns the processes of table under root (its children,
// theirs, and so on; not root itself), parents before their children.
func Descendants(table []Proc, root int) []Proc {
	children := make(map[int][]Proc)
	for _, p := range table {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Proc
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c.PID] {
				seen[c.PID] = true
				out = append(out, c)
				queue = append(queue, c.PID)
			}
		}
	}
	return out
}

// Group returns the processes of table in process group pgid.
func Group(table []Proc, pgid int) []Proc {
	var out []Proc
	for _, p := range table {
		if p.PGID == pgid {
			out = append(out, p)
		}
	}
	return out
}

// Running reports whether p still runs: a process with its pid and start
// time exists and has not exited. A process that cannot be read for
// another reason than its end counts as running: nobody can confirm it
// ended.
func Running(p Proc) bool {
	now, err := Read(p.PID)
	if err != nil {
		return !Gone(err)
	}
	return now.StartTime == p.StartTime && !now.Exited()
}

// Alive reports whether pid runs and is not a zombie.
func Alive(pid int) bool {
	p, err := Read(pid)
	return err == nil && !p.Exited()
}

// ReapOrphans collects the exit status of this process's children that
// have ended, except except's, which its own Wait collects: the orphans a
// child subreaper (PR_SET_CHILD_SUBREAPER) inherits, which nobody else
// waits for, so that they do not pile up as zombies.
func ReapOrphans(except int) {
	table, err := Table()
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, p := range table {
		if p.PPID == self && p.PID != except && p.Exited() {
			var ws syscall.WaitStatus
			syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil)
		}
	}
}
