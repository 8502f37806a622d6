package engine

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/gateway/config"
)

// The spool's budgets (the configuration's transfer block): the bytes of
// every file together, the bytes of one requester's files, and the free
// space left on the disk that holds the spool and the state directory,
// where the audit log lives. A file is checked before it is taken (its
// declared size) and at every write while it streams; a file cut off is
// removed. Budgets follow the run's requester, an identity (a local
// user, an agent), never a run: a requester with many runs holds no more.

// spoolFullError is a file the spool's budgets have no room for: which
// budget (its configuration name), its limit, what the spool holds
// against it, what the file needs more.
type spoolFullError struct {
	budget    string
	requester string
	limit     int64
	held      int64
	need      int64
}

func (e *spoolFullError) Error() string {
	switch e.budget {
	case "transfer.min_free":
		return fmt.Sprintf("the gateway's disk has %s free, and this file (%s more) would leave less than the %s it keeps free for its audit log (%s): "+
			"no transfer file is taken until the operator frees space; retry later", sizeText(e.held), sizeText(e.need), sizeText(e.limit), e.budget)
	case "transfer.spool_max_per_requester":
		return fmt.Sprintf("requester %q holds %s in the gateway's transfer spool, and this file (%s more) would take it over its cap of %s (%s): "+
			"put the uploads it holds, fetch its got files, or end its idle runs (their files go with them), then retry",
			e.requester, sizeText(e.held), sizeText(e.need), sizeText(e.limit), e.budget)
	}
	return fmt.Sprintf("the gateway's transfer spool holds %s, and this file (%s more) would take it over its cap of %s (%s): "+
		"retry once other transfers are done, or ask the operator to raise the cap", sizeText(e.held), sizeText(e.need), sizeText(e.limit), e.budget)
}

// reserveLocked books n more bytes for f against the budgets b, with s.mu
// held; nothing is booked when a budget has no room.
func (s *spool) reserveLocked(f *spoolFile, n int64, b config.Transfer) error {
	var total, mine int64
	for _, g := range s.files {
		total += g.held
		if sameRequester(g.requester, f.requester) {
			mine += g.held
		}
	}
	switch {
	case mine+n > b.SpoolMaxPerRequester:
		return &spoolFullError{budget: "transfer.spool_max_per_requester", requester: f.requester, limit: b.SpoolMaxPerRequester, held: mine, need: n}
	case total+n > b.SpoolMax:
		return &spoolFullError{budget: "transfer.spool_max", limit: b.SpoolMax, held: total, need: n}
	}
	f.held += n
	return nil
}

// reserve is reserveLocked, taking s.mu.
func (s *spool) reserve(f *spoolFile, n int64, b config.Transfer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserveLocked(f, n, b)
}

// roomFor says whether requester may start one more file of n bytes (0:
// its size is not known yet): a budget's error when not.
func (s *spool) roomFor(requester string, n int64, b config.Transfer) error {
	if err := s.floor(n, b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A trial file, never kept: it books nothing.
	return s.reserveLocked(&spoolFile{requester: requester}, max(n, 1), b)
}

// floor checks that writing n more bytes leaves at least b.MinFree free
// on the file systems of the spool and of the state directory (the audit
// log's). A file system that cannot be asked fails closed.
func (s *spool) floor(n int64, b config.Transfer) error {
	if b.MinFree == 0 {
		return nil
	}
	for _, dir := range []string{s.dir, filepath.Dir(s.dir)} {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("free space of the transfer spool's disk: %w", err)
		}
		// Bavail: what an unprivileged writer may still use.
		free := int64(st.Bavail) * int64(st.Bsize)
		if free-n < b.MinFree {
			return &spoolFullError{budget: "transfer.min_free", limit: b.MinFree, held: free, need: n}
		}
	}
	return nil
}

// budgetWriter writes a spool file, booking each write against the
// budgets first and checking the free-space floor: a write with no room
// fails, and the file is then removed.
type budgetWriter struct {
	s       *spool
	f       *spoolFile
	b       config.Transfer
	w       io.Writer
	written int64
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	n := int64(len(p))
	if more := w.written + n - w.f.held; more > 0 {
		if err := w.s.reserve(w.f, more, w.b); err != nil {
			return 0, err
		}
	}
	if err := w.s.floor(n, w.b); err != nil {
		return 0, err
	}
	k, err := w.w.Write(p)
	w.written += int64(k)
	return k, err
}

// dropRun removes every file of run: its authority ended, and what it
// left on the gateway's disk goes with it.
func (s *spool) dropRun(run approvals.RunID) {
	s.mu.Lock()
	var ids []string
	for id, f := range s.files {
		if f.run == run {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.remove(id)
	}
}

// discard removes run's upload id unless a put has taken it (that put
// removes it when it ends).
func (s *spool) discard(run approvals.RunID, id string) {
	s.mu.Lock()
	f, ok := s.files[id]
	mine := ok && f.run == run && !f.used && f.stop != nil && !strings.HasSuffix(id, getSuffix)
	s.mu.Unlock()
	if mine {
		s.remove(id)
	}
}

// dropUpload removes the upload a put named, whatever became of the put:
// delivered, failed, refused, denied or expired, an upload serves one
// request and is not held for nothing.
func (l *lifecycle) dropUpload() {
	switch {
	case l.upload != nil:
		l.e.spool.remove(l.upload.id)
	case l.req.Put != nil && l.run.ID != "":
		l.e.spool.discard(l.run.ID, l.req.Put.Upload)
	}
}

// sameRequester says whether a and b name one requester, as the
// approvals store compares them for its pending caps.
func sameRequester(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// sizeText writes n bytes for people: "512 B", "3.5 MiB".
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s", v, u)
}
