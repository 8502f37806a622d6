package oracle

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// entry is what the oracle compares of one file: not its access time,
// and not a directory's modification time (a file made and removed again
// changes it; a directory's entries are compared by their own paths).
type entry struct {
	mode     fs.FileMode
	uid, gid uint32
	size     int64
	mtime    time.Time
	sum      [sha256.Size]byte
	target   string
}

func (e entry) String() string {
	s := fmt.Sprintf("%v %d:%d", e.mode, e.uid, e.gid)
	switch {
	case e.mode&fs.ModeSymlink != 0:
		s += " -> " + e.target
	case e.mode.IsRegular():
		s += fmt.Sprintf(" %d bytes %x… %s", e.size, e.sum[:4], e.mtime.UTC().Format(time.RFC3339Nano))
	}
	return s
}

// snapshot is every file the account could have changed, by path.
type snapshot map[string]entry

// snapshot records the account's home, and what it owns in the scratch
// roots (with everything under it).
func (a *account) snapshot() (snapshot, error) {
	s := snapshot{}
	if err := s.walk(a.home); err != nil {
		return nil, err
	}
	for _, root := range scratchRoots {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(root, e.Name())
			if owner(p) != a.uid {
				continue
			}
			if err := s.walk(p); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// walk adds root and everything under it. Files that vanish while it
// walks (a process of the line still running) are skipped: the next
// look, after the processes are gone, sees the result.
func (s snapshot) walk(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			if os.IsPermission(err) {
				return nil
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		e := entry{mode: fi.Mode(), size: fi.Size()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.uid, e.gid = st.Uid, st.Gid
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.target, _ = os.Readlink(p)
			e.size = 0
		case fi.Mode().IsRegular():
			e.mtime = fi.ModTime()
			e.sum = hashFile(p)
		case fi.IsDir():
			e.size = 0
		}
		s[p] = e
		return nil
	})
}

// hashFile is the SHA-256 of a regular file's content (zero when it
// cannot be read).
func hashFile(p string) [sha256.Size]byte {
	var sum [sha256.Size]byte
	f, err := os.Open(p)
	if err != nil {
		return sum
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum
	}
	copy(sum[:], h.Sum(nil))
	return sum
}

// diff lists what changed from s to after, one line each, sorted: a
// marker of the payload first.
func (s snapshot) diff(after snapshot) []string {
	var out []string
	for p, e := range after {
		b, ok := s[p]
		switch {
		case !ok && isMarker(p):
			out = append(out, "MARKER "+p+": the payload program ran")
		case !ok:
			out = append(out, "created "+p+" ("+e.String()+")")
		case b != e:
			out = append(out, "changed "+p+": "+b.String()+" => "+e.String())
		}
	}
	for p, e := range s {
		if _, ok := after[p]; !ok {
			out = append(out, "removed "+p+" ("+e.String()+")")
		}
	}
	sort.Slice(out, func(i, j int) bool {
		mi, mj := strings.HasPrefix(out[i], "MARKER"), strings.HasPrefix(out[j], "MARKER")
		if mi != mj {
			return mi
		}
		return out[i] < out[j]
	})
	return out
}

// isMarker reports whether p is a file the payload program leaves.
func isMarker(p string) bool {
	return strings.HasPrefix(filepath.Base(p), "ran-") &&
		(filepath.Base(filepath.Dir(p)) == ".markers" || strings.HasSuffix(filepath.Dir(p), "-markers"))
}

// leftRunning waits a little for the account's processes to end after a
// line, then lists those still running.
func (a *account) leftRunning() []string {
	testkit.Poll(2*time.Second, func() bool { return len(a.processes()) == 0 })
	var out []string
	for _, p := range a.processes() {
		out = append(out, fmt.Sprintf("left running: %s", p))
	}
	return out
}
