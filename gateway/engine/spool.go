package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// The spool holds the files of transfers on the gateway's disk: an
// upload waiting for its put, a got file waiting for its agent. Each
// belongs to one run and lives at most spoolTTL; none survives a
// restart (the directory is emptied at start).
const (
	spoolDir = "spool"
	spoolTTL = time.Hour
	// maxSpoolPerRun bounds the files one run holds at once.
	maxSpoolPerRun = 4
)

// spool is the gateway's transfer files.
type spool struct {
	dir   string
	mu    sync.Mutex
	files map[string]*spoolFile
	// clock is the engine's: it stamps and expires the files.
	clock approvals.Clock
}

// spoolFile is one file of the spool.
type spoolFile struct {
	id  string
	run approvals.RunID
	// requester is the run's, whose budget the file counts against;
	// held the bytes it books (what it holds, or will while it fills).
	requester string
	held      int64
	path      string
	size      int64
	sum       [32]byte
	expires   time.Time
	// used: an upload taken by a put (it is removed when the put ends).
	used bool
	// stop cancels the file's expiry; nil while it fills.
	stop func() bool
}

// openSpool empties and returns the spool under stateDir.
func openSpool(stateDir string, clock approvals.Clock) (*spool, error) {
	dir := filepath.Join(stateDir, spoolDir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("emptying the transfer spool: %w", err)
	}
	if err := securefile.PrivateDir(dir, -1); err != nil {
		return nil, err
	}
	return &spool{dir: dir, files: map[string]*spoolFile{}, clock: clock}, nil
}

// Errors of the spool, each a refusal the agent can act on.
var (
	errSpoolFull   = errors.New("this run holds as many transfer files as it may; use or let them expire first")
	errNoUpload    = errors.New("no such upload for this run (it expired, was used, or belongs to another run)")
	errTooLarge    = errors.New("the file is over the size limit")
	errUploadShort = errors.New("the upload ended before its declared length")
	errRunGone     = errors.New("the run ended while its file was kept, and the file went with it")
)

// add makes a new file of run, of requester, filled by fill (which
// writes to w), at most max bytes, within the budgets b: size, when it is
// known (else -1), is booked before a byte is written, and every write is
// checked against the budgets; a file that fails is removed.
func (s *spool) add(run approvals.RunID, requester, id string, max, size int64, b config.Transfer, fill func(w io.Writer) error) (*spoolFile, error) {
	known := size
	if known < 0 {
		known = 0
	}
	if err := s.floor(known, b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.countLocked(run) >= maxSpoolPerRun {
		s.mu.Unlock()
		return nil, errSpoolFull
	}
	if _, dup := s.files[id]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("spool file %s exists already (a leftover of an earlier run: remove it)", id)
	}
	f := &spoolFile{id: id, run: run, requester: requester, path: filepath.Join(s.dir, id), expires: s.clock.Now().Add(spoolTTL)}
	if size > 0 {
		if err := s.reserveLocked(f, size, b); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.files[id] = f // holds its place while it fills
	s.mu.Unlock()

	err := func() error {
		out, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		h := sha256.New()
		bw := &budgetWriter{s: s, f: f, b: b, w: out}
		lw := &sshexec.LimitWriter{W: io.MultiWriter(bw, h), Left: max, Err: errTooLarge}
		err = fill(lw)
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		f.size = max - lw.Left
		copy(f.sum[:], h.Sum(nil))
		return err
	}()
	if err != nil {
		s.remove(id)
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[id] != f {
		// Its run ended while it filled, and took it along.
		return nil, errRunGone
	}
	f.held = f.size // what was booked and not written is free again
	f.stop = s.clock.AfterFunc(spoolTTL, func() { s.remove(id) })
	return f, nil
}

// take gives run's upload id to one put: no other can take it.
func (s *spool) take(run approvals.RunID, id string) (*spoolFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	if !ok || f.run != run || f.used || f.stop == nil || strings.HasSuffix(id, getSuffix) {
		return nil, errNoUpload
	}
	f.used = true
	return f, nil
}

// count is how many files run holds.
func (s *spool) count(run approvals.RunID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countLocked(run)
}

// countLocked is count with s.mu held.
func (s *spool) countLocked(run approvals.RunID) int {
	n := 0
	for _, f := range s.files {
		if f.run == run {
			n++
		}
	}
	return n
}

// lookup returns run's file id.
func (s *spool) lookup(run approvals.RunID, id string) (*spoolFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	if !ok || f.run != run || f.stop == nil {
		return nil, false
	}
	return f, true
}

// remove deletes file id.
func (s *spool) remove(id string) {
	s.mu.Lock()
	f, ok := s.files[id]
	delete(s.files, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	if f.stop != nil {
		f.stop()
	}
	os.Remove(f.path)
}

// getSuffix marks the spool file of a get (named by its action).
const getSuffix = ".get"

// newUploadID returns a fresh upload id.
func newUploadID() string {
	var b [12]byte
	rand.Read(b[:])
	return "upl_" + hex.EncodeToString(b[:])
}

// maxTransfer is the largest max_transfer of any account: no upload can be
// put anywhere past it.
func (l *loaded) maxTransfer() int64 {
	var m int64
	for _, t := range l.cfg.Targets {
		for _, a := range t.Accounts {
			m = max(m, a.MaxTransfer)
		}
	}
	return m
}

// Upload keeps the bytes of body (declared length size, -1 for unknown)
// for a put of the caller's run: they are hashed as they arrive and kept
// in the spool until a put takes them or spoolTTL passes.
func (e *Actions) Upload(ctx context.Context, c Caller, body io.Reader, size int64) (api.Upload, error) {
	limit := e.conf().maxTransfer()
	switch {
	case limit == 0:
		return api.Upload{}, refuse(ErrInvalid, "no account of this gateway takes file transfers (max_transfer is 0 everywhere)")
	case size > limit:
		return api.Upload{}, refuse(ErrTooLarge, fmt.Sprintf("the file is %d bytes, over the largest max_transfer of %d bytes", size, limit))
	}
	run, err := e.resolveRun(ctx, c)
	if err != nil {
		return api.Upload{}, refuse(ErrForbidden, "the calling process has no run that may act: "+err.Error())
	}
	f, err := e.spool.add(run.ID, run.Requester, newUploadID(), limit, size, e.conf().cfg.Transfer, func(w io.Writer) error {
		n, err := io.Copy(w, body)
		if err == nil && size >= 0 && n != size {
			return errUploadShort
		}
		return err
	})
	switch {
	case errors.Is(err, errTooLarge):
		return api.Upload{}, refuse(ErrTooLarge, fmt.Sprintf("the file is over the largest max_transfer of %d bytes", limit))
	case errors.Is(err, errSpoolFull):
		return api.Upload{}, refuse(ErrTooMany, err.Error())
	case errors.As(err, new(*spoolFullError)):
		e.log.Warn("an upload was refused: the transfer spool has no room", "run", run.ID, "requester", run.Requester, "error", err)
		return api.Upload{}, refuse(ErrNoSpace, err.Error())
	case errors.Is(err, errUploadShort):
		return api.Upload{}, refuse(ErrInvalid, err.Error())
	case errors.Is(err, errRunGone):
		return api.Upload{}, refuse(ErrRunEnded, err.Error())
	case err != nil:
		e.log.Error("transfer spool", "error", err)
		return api.Upload{}, refuse(ErrUnavailable, "the upload could not be kept on the gateway's disk: "+err.Error())
	}
	return api.Upload{ID: f.id, Size: f.size, SHA256: hex.EncodeToString(f.sum[:]), ExpiresAt: f.expires.UTC()}, nil
}

// File opens the got file of action id for its own run's agent, with its
// size and SHA-256 (hex). The caller closes it.
func (e *Actions) File(ctx context.Context, c Caller, id string) (*os.File, int64, string, error) {
	run, err := e.findRun(ctx, c)
	if err != nil {
		return nil, 0, "", refuse(ErrNotFound, "no such file")
	}
	f, ok := e.spool.lookup(run.ID, id+getSuffix)
	if !ok {
		return nil, 0, "", refuse(ErrNotFound, "no file for this action: it was not a successful get of this run, it was fetched already, or it expired")
	}
	r, err := os.Open(f.path)
	if err != nil {
		return nil, 0, "", refuse(ErrNotFound, "the file is gone: "+err.Error())
	}
	return r, f.size, hex.EncodeToString(f.sum[:]), nil
}

// FileDelivered forgets the got file of action id once its agent has all
// of it.
func (e *Actions) FileDelivered(c Caller, id string) {
	run, err := e.findRun(context.Background(), c)
	if err != nil {
		return
	}
	if _, ok := e.spool.lookup(run.ID, id+getSuffix); ok {
		e.spool.remove(id + getSuffix)
	}
}
