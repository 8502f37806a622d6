package sshexec

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// PutFile is a file to write on the target (Put).
type PutFile struct {
	// Path is where the file goes: absolute and clean.
	Path string
	// Mode is the file's permission bits (at most 0777: setuid, setgid
	// and sticky are refused).
	Mode fs.FileMode
	// Overwrite allows replacing an existing file; without it an
	// existing file (or anything else at Path) makes the transfer fail
	// and nothing is changed.
	Overwrite bool
	// Data gives the bytes; exactly Size of them, whose SHA-256 is
	// SHA256, or nothing is published. It is read as the transfer goes
	// and must not block for long (a file, memory): the deadline cuts
	// the connection, not a read from Data.
	Data   io.Reader
	Size   int64
	SHA256 [32]byte
	// Exec sends the file through the target's forced command
	// (airlock-action's built-in put) instead of the SFTP subsystem: one
	// exec of "put PATH MODE SIZE SHA256 [overwrite]" with the bytes on
	// standard input; the forced command checks and publishes them.
	Exec bool
}

// GetFile is a file to read from the target (Get).
type GetFile struct {
	// Path is the file to read: absolute and clean, a regular file.
	Path string
	// MaxSize bounds what is read: a larger file is refused before a byte
	// of it is read, one that grows past it while read fails.
	MaxSize int64
	// Out receives the bytes as they arrive. A failed transfer may have
	// written part of the file to it: the caller publishes only after
	// success.
	Out io.Writer
	// Exec reads the file through the target's forced command
	// (airlock-action's built-in get: "get PATH", the bytes on standard
	// output) instead of the SFTP subsystem.
	Exec bool
}

// Transfer is what a file transfer did, in Result.Transfer.
type Transfer struct {
	// Direction is "put" or "get"; Path the remote path.
	Direction string
	Path      string
	// Bytes moved, and the SHA-256 of those bytes (of the whole file
	// when Complete).
	Bytes    int64
	SHA256   [32]byte
	Complete bool
	// Put only: Published says the file is at Path, Replaced that an
	// existing file was replaced. Leftover names a temporary file on the
	// target that could not be removed after a failure ("" when none
	// is left); it was never published.
	Published bool
	Replaced  bool
	Leftover  string
	// Exists (put only) says why nothing was published: a file is at
	// Path, and the put did not say Overwrite.
	Exists bool
	// LocalError (get only) says the transfer failed on this side: the
	// bytes could not be written to GetFile.Out.
	LocalError bool
}

// Errors of a transfer's arguments.
var (
	errBadPath = errors.New("the remote path must be absolute and clean (no \"..\", no trailing slash)")
	errBadMode = errors.New("the mode may only hold permission bits (0 to 0777): setuid, setgid and sticky are refused")
)

// checkRemotePath accepts an absolute, clean path that names a file.
func checkRemotePath(p string) error {
	if p == "" || !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsAny(p, "\x00\n") {
		return fmt.Errorf("%w: %q", errBadPath, p)
	}
	return nil
}

// Put writes one file on the target over the SFTP subsystem, on one fresh
// connection as Run makes it (host keys, jump hosts, no forwarding): to a
// temporary name in the destination directory first, which is published
// (renamed to Path) only once every byte arrived and the bytes sent had
// the size and SHA-256 of the PutFile. A failure before that leaves
// nothing at Path and removes the temporary file (Transfer.Leftover names
// it when that failed too).
//
// Outcomes are Run's. A transfer that ran is Exited: exit code 0 when the
// file was published, 1 when the target refused it (it exists, no such
// directory, permission) or the bytes did not match, with Detail saying
// why. SessionFailed means the account has no SFTP subsystem.
func Put(ctx context.Context, cfg *Config, f PutFile) (*Result, error) {
	if err := checkRemotePath(f.Path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if f.Mode&^fs.ModePerm != 0 {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, errBadMode)
	}
	if f.Size < 0 || f.Data == nil {
		return nil, fmt.Errorf("%w: no data to put", ErrInvalidConfig)
	}
	if f.Exec {
		return putExec(ctx, cfg, f)
	}
	t := &Transfer{Direction: "put", Path: f.Path}
	return start(ctx, cfg, "", func(a *action, ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, stopCut func() bool, cut *links) error {
		a.res.Transfer = t
		return a.sftp(ctx, dctx, wc, conn, chans, reqs, cut, func(c *sftp.Client) (string, error) { return put(c, f, t) })
	})
}

// Get reads one file from the target over the SFTP subsystem, on one
// fresh connection as Run makes it, into GetFile.Out. Outcomes as Put's:
// Exited 0 when the whole file was read, 1 when the target refused it (no
// such file, not a regular file, permission) or it is larger than
// MaxSize.
func Get(ctx context.Context, cfg *Config, g GetFile) (*Result, error) {
	if err := checkRemotePath(g.Path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if g.Out == nil || g.MaxSize < 0 {
		return nil, fmt.Errorf("%w: nowhere to write the file", ErrInvalidConfig)
	}
	if g.Exec {
		return getExec(ctx, cfg, g)
	}
	t := &Transfer{Direction: "get", Path: g.Path}
	return start(ctx, cfg, "", func(a *action, ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, stopCut func() bool, cut *links) error {
		a.res.Transfer = t
		return a.sftp(ctx, dctx, wc, conn, chans, reqs, cut, func(c *sftp.Client) (string, error) { return get(c, g, t) })
	})
}

// sftp opens the SFTP subsystem on the target's connection and runs do
// with a client on it. do returns "" for success, or why the target (or
// the data) refused the transfer, or an error when the connection
// failed under it.
func (a *action) sftp(ctx, dctx context.Context, wc *watchConn, conn ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request, cut *links, do func(*sftp.Client) (string, error)) error {
	res := a.res
	ch, chReqs, wg, done, err := a.openSession(ctx, dctx, wc, conn, chans, reqs, cut)
	defer done()
	if err != nil {
		return err
	}
	wg.Go(func() { ssh.DiscardRequests(chReqs) })
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"}))
	if err == nil && !ok {
		return a.end(SessionFailed, NotStarted, errors.New("the server refused the sftp subsystem (this account has none, or a forced command)"))
	}
	if err != nil {
		return a.notStarted(ctx, dctx, fmt.Errorf("sftp subsystem: %w", err))
	}
	cmdAt := time.Now()
	pprof.SetGoroutineLabels(cpuCommand)
	if a.cfg.Started != nil {
		a.cfg.Started()
	}
	c, err := sftp.NewClientPipe(ch, ch, sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true))
	if err != nil {
		res.Timings.Command = time.Since(cmdAt)
		return a.transferBroke(ctx, dctx, wc, fmt.Errorf("sftp: %w", err))
	}
	why, err := do(c)
	c.Close()
	res.Timings.Command = time.Since(cmdAt)
	if err != nil {
		return a.transferBroke(ctx, dctx, wc, err)
	}
	res.HasExitCode = true
	if why != "" {
		res.ExitCode = 1
		return a.end(Exited, 0, errors.New(why))
	}
	return a.end(Exited, 0, nil)
}

// transferBroke ends a transfer the connection failed under: the
// deadline, a cancel, or the transport.
func (a *action) transferBroke(ctx, dctx context.Context, wc *watchConn, err error) error {
	t := a.res.Transfer
	// A put is confirmed not published unless its rename was on the way.
	term := Confirmed
	if t.Direction == "put" && t.Published {
		term = Unconfirmed
	}
	what := "the file was not published"
	switch {
	case t.Direction == "get":
		what = fmt.Sprintf("the file was read in part (%d bytes)", t.Bytes)
	case term == Unconfirmed:
		what = "the file may have been published: its rename was under way"
	}
	if t.Leftover != "" {
		what += "; its temporary file " + t.Leftover + " may be left on the target"
	}
	if dctx.Err() != nil {
		o := stopped(ctx)
		return a.end(o, term, fmt.Errorf("%s during the transfer; %s", stopReason(o), what))
	}
	if te := wc.transportError(); te != nil {
		err = te
	}
	return a.end(ConnectionLost, term, fmt.Errorf("the connection broke during the transfer (%v); %s", err, what))
}

// refuseAll refuses every channel and request the server sends toward
// us: no forwarding of any kind.
func refuseAll(wg *sync.WaitGroup, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	wg.Go(func() {
		for nc := range chans {
			nc.Reject(ssh.Prohibited, "airlock opens no channels toward the client")
		}
	})
	wg.Go(func() { ssh.DiscardRequests(reqs) })
}

// statusErr reports whether err is the server's answer (an SFTP status)
// rather than a broken connection, and says it in a few words.
func statusErr(err error) (string, bool) {
	var se *sftp.StatusError
	switch {
	case errors.As(err, &se):
		switch se.FxCode() {
		case sftp.ErrSSHFxNoSuchFile:
			return "no such file or directory", true
		case sftp.ErrSSHFxPermissionDenied:
			return "permission denied", true
		case sftp.ErrSSHFxFailure:
			return "the server refused it (" + strings.TrimSpace(se.Error()) + ")", true
		case sftp.ErrSSHFxOpUnsupported:
			return "the server does not support it", true
		}
		return strings.TrimSpace(se.Error()), true
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory", true
	case errors.Is(err, fs.ErrPermission):
		return "permission denied", true
	case errors.Is(err, fs.ErrExist):
		return "it exists", true
	}
	return "", false
}

// noLinksOnTheWay refuses a path whose directories include a symbolic
// link (checked with lstat, component by component): a transfer goes
// where its path says, never where a link planted on the way points.
// why is "" when the path is clear.
func noLinksOnTheWay(c *sftp.Client, p string) (string, error) {
	dir := "/"
	for _, el := range strings.Split(strings.TrimPrefix(path.Dir(p), "/"), "/") {
		if el == "" {
			continue
		}
		dir = path.Join(dir, el)
		st, err := c.Lstat(dir)
		if err != nil {
			if why, ok := statusErr(err); ok {
				return "cannot check " + dir + ": " + why, nil
			}
			return "", err
		}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			return dir + " is a symbolic link; a transfer never follows a link on its way", nil
		case !st.IsDir():
			return dir + " is not a directory", nil
		}
	}
	return "", nil
}

// put writes f through c (see Put).
func put(c *sftp.Client, f PutFile, t *Transfer) (string, error) {
	if why, err := noLinksOnTheWay(c, f.Path); why != "" || err != nil {
		return why, err
	}
	dir := path.Dir(f.Path)
	if st, err := c.Lstat(f.Path); err == nil {
		switch {
		case !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0:
			return f.Path + " exists and is not a regular file; only a file is replaced", nil
		case !f.Overwrite:
			t.Exists = true
			return f.Path + " exists; it is replaced only when the transfer says overwrite", nil
		}
	} else if why, ok := statusErr(err); !ok {
		return "", err
	} else if !errors.Is(err, fs.ErrNotExist) && !strings.HasPrefix(why, "no such") {
		return "cannot check " + f.Path + ": " + why, nil
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	tmp := path.Join(dir, ".airlock-"+hex.EncodeToString(nonce[:])+".part")
	w, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		if why, ok := statusErr(err); ok {
			return "cannot create a file in " + dir + ": " + why, nil
		}
		return "", err
	}
	t.Leftover = tmp
	fail := func(why string, err error) (string, error) {
		w.Close()
		if rmErr := c.Remove(tmp); rmErr == nil {
			t.Leftover = ""
		}
		return why, err
	}
	// Nobody else reads it while it fills.
	if err := w.Chmod(0o600); err != nil {
		if why, ok := statusErr(err); ok {
			return fail("cannot set the mode of the temporary file: "+why, nil)
		}
		return fail("", err)
	}
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(f.Data, f.Size+1), h)
	// Several writes in flight, as sftp and scp keep them: one at a
	// time waits a round trip per 32 KiB. A failure leaves gaps in the
	// temporary file, which is then removed.
	n, err := w.ReadFromWithConcurrency(src, 0)
	t.Bytes = n
	if err != nil {
		if why, ok := statusErr(err); ok {
			return fail("writing "+tmp+": "+why, nil)
		}
		return fail("", err)
	}
	copy(t.SHA256[:], h.Sum(nil))
	switch {
	case n != f.Size:
		return fail(fmt.Sprintf("the data was %d bytes, not the %d approved; nothing was published", n, f.Size), nil)
	case t.SHA256 != f.SHA256:
		return fail("the data's SHA-256 is not the one approved; nothing was published", nil)
	}
	t.Complete = true
	// fsync@openssh.com where the server has it: the bytes are on its
	// disk before the name points at them.
	if err := w.Sync(); err != nil {
		if _, ok := statusErr(err); !ok {
			return fail("", err)
		}
	}
	if err := w.Close(); err != nil {
		if why, ok := statusErr(err); ok {
			return fail("closing "+tmp+": "+why, nil)
		}
		return fail("", err)
	}
	st, err := c.Lstat(tmp)
	if err != nil || st.Size() != f.Size {
		if err == nil {
			return fail(fmt.Sprintf("the target holds %d bytes of the %d sent; nothing was published", st.Size(), f.Size), nil)
		}
		if why, ok := statusErr(err); ok {
			return fail("checking "+tmp+": "+why, nil)
		}
		return fail("", err)
	}
	if err := c.Chmod(tmp, f.Mode); err != nil {
		if why, ok := statusErr(err); ok {
			return fail(fmt.Sprintf("cannot set mode %04o: %s", f.Mode, why), nil)
		}
		return fail("", err)
	}
	// Publish. Without overwrite, a hard link: it fails if anything took
	// the name meanwhile, and never replaces it. With it, posix-rename
	// replaces the name at once (a link there is replaced, not followed).
	t.Published = true // from here a broken connection leaves it unknown
	if f.Overwrite {
		err = c.PosixRename(tmp, f.Path)
		if err == nil {
			t.Leftover, t.Replaced = "", true
		}
	} else if err = c.Link(tmp, f.Path); err == nil {
		if rmErr := c.Remove(tmp); rmErr == nil {
			t.Leftover = ""
		}
	}
	if err != nil {
		t.Published = false
		if why, ok := statusErr(err); ok {
			if !f.Overwrite {
				why = f.Path + " could not be created (it may have appeared meanwhile): " + why
			}
			return fail(why+"; nothing was published", nil)
		}
		t.Published = true // the request may have been carried out
		return "", err
	}
	return "", nil
}

// get reads g through c (see Get).
func get(c *sftp.Client, g GetFile, t *Transfer) (string, error) {
	if why, err := noLinksOnTheWay(c, g.Path); why != "" || err != nil {
		return why, err
	}
	if st, err := c.Lstat(g.Path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return g.Path + " is a symbolic link; a transfer never follows one", nil
	}
	r, err := c.Open(g.Path)
	if err != nil {
		if why, ok := statusErr(err); ok {
			return "cannot open " + g.Path + ": " + why, nil
		}
		return "", err
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		if why, ok := statusErr(err); ok {
			return "cannot read " + g.Path + ": " + why, nil
		}
		return "", err
	}
	switch {
	case !st.Mode().IsRegular():
		return g.Path + " is not a regular file", nil
	case st.Size() > g.MaxSize:
		return fmt.Sprintf("%s is %d bytes, over the limit of %d", g.Path, st.Size(), g.MaxSize), nil
	}
	h := sha256.New()
	out := &localWriter{w: g.Out}
	cw := &countWriter{w: io.MultiWriter(out, h)}
	_, err = r.WriteTo(&LimitWriter{W: cw, Left: g.MaxSize})
	t.Bytes = cw.n
	copy(t.SHA256[:], h.Sum(nil))
	switch {
	case errors.Is(err, errOverLimit):
		return fmt.Sprintf("%s grew past the limit of %d bytes while it was read", g.Path, g.MaxSize), nil
	case out.err != nil:
		// Our side failed (a full disk), not the target.
		t.LocalError = true
		return "the local copy could not be written: " + out.err.Error(), nil
	case err != nil:
		if why, ok := statusErr(err); ok {
			return "reading " + g.Path + ": " + why, nil
		}
		return "", err
	}
	t.Complete = true
	return "", nil
}

// localWriter remembers the error of GetFile.Out, to tell it from the
// connection's.
type localWriter struct {
	w   io.Writer
	err error
}

func (l *localWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil && l.err == nil {
		l.err = err
	}
	return n, err
}

// errOverLimit: a file grew past GetFile.MaxSize while it was read.
var errOverLimit = errors.New("over the size limit")

// LimitWriter passes writes on to W while they fit in Left bytes, and
// refuses a write that does not, whole, with Err (or an over-the-limit
// error): a transferred file's bound, on the target's side and in the
// gateway's spool alike. Left is what remains.
type LimitWriter struct {
	W    io.Writer
	Left int64
	Err  error
}

func (l *LimitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.Left {
		if l.Err != nil {
			return 0, l.Err
		}
		return 0, errOverLimit
	}
	n, err := l.W.Write(p)
	l.Left -= int64(n)
	return n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// quoteWord writes a word as airlock-action's tokenizer reads it back: in
// single quotes, a quote inside as '"'"'.
func quoteWord(w string) string { return "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'" }

// putExec is Put through a forced command (PutFile.Exec).
func putExec(ctx context.Context, cfg *Config, f PutFile) (*Result, error) {
	cmd := fmt.Sprintf("put %s %04o %d %x", quoteWord(f.Path), f.Mode, f.Size, f.SHA256)
	if f.Overwrite {
		cmd += " overwrite"
	}
	h := sha256.New()
	sent := &countWriter{w: h}
	c := *cfg
	// What is sent is hashed as it goes: one byte more than approved is
	// enough for the forced command to refuse it.
	c.StdinFrom, c.Stdin = io.TeeReader(io.LimitReader(f.Data, f.Size+1), sent), nil
	c.OutputLimit = 64 << 10
	res, err := Run(ctx, &c, cmd)
	if res == nil {
		return nil, err
	}
	t := &Transfer{Direction: "put", Path: f.Path, Bytes: sent.n}
	copy(t.SHA256[:], h.Sum(nil))
	t.Complete = t.Bytes == f.Size && t.SHA256 == f.SHA256
	res.Transfer = t
	switch {
	case res.Outcome == Exited && res.ExitCode == 0 && t.Complete:
		t.Published, t.Replaced = true, f.Overwrite
	case res.Outcome == Exited && res.ExitCode == 0:
		// The forced command said yes to bytes that are not the
		// approved ones: it is not airlock-action's put.
		res.ExitCode, res.Detail = 1, "the target's forced command accepted bytes that are not the approved ones; it does not check transfers: treat the file as unknown"
		t.Published = true
	case res.Outcome == Exited:
		res.Detail = forcedWhy(res)
		t.Exists = !f.Overwrite && strings.HasSuffix(res.Detail, forcedExists)
	case res.Outcome != Exited && res.Termination != NotStarted:
		t.Published = true // its end is unknown: it may have published
	}
	return res, err
}

// getExec is Get through a forced command (GetFile.Exec).
func getExec(ctx context.Context, cfg *Config, g GetFile) (*Result, error) {
	h := sha256.New()
	out := &localWriter{w: g.Out}
	lw := &LimitWriter{W: io.MultiWriter(out, h), Left: g.MaxSize}
	cw := &countWriter{w: lw}
	var over bool
	c := *cfg
	c.Stdin, c.StdinFrom = nil, nil
	c.OutputLimit, c.TailLimit = 64<<10, 0
	prev := cfg.Output
	c.Output = func(s Stream, p []byte) {
		if s == Stdout {
			if _, err := cw.Write(p); errors.Is(err, errOverLimit) {
				over = true
			}
			return
		}
		if prev != nil {
			prev(s, p)
		}
	}
	res, err := Run(ctx, &c, "get "+quoteWord(g.Path))
	if res == nil {
		return nil, err
	}
	t := &Transfer{Direction: "get", Path: g.Path, Bytes: cw.n}
	copy(t.SHA256[:], h.Sum(nil))
	res.Transfer = t
	res.Stdout, res.StdoutTail, res.StdoutTruncated = nil, nil, false
	switch {
	case res.Outcome != Exited:
	case over:
		res.ExitCode, res.Detail = 1, fmt.Sprintf("%s is over the limit of %d bytes", g.Path, g.MaxSize)
	case out.err != nil:
		t.LocalError = true
		res.ExitCode, res.Detail = 1, "the local copy could not be written: "+out.err.Error()
	case res.ExitCode == 0:
		t.Complete = true
	default:
		res.Detail = forcedWhy(res)
	}
	return res, err
}

// forcedExists ends airlock-action's refusal of a put over an existing
// file without overwrite (deploy/forcedcmd says it in these words).
const forcedExists = ": it exists; it is replaced only with overwrite"

// forcedWhy is a forced command's refusal, from its standard error.
func forcedWhy(res *Result) string {
	why := strings.TrimSpace(string(res.Stderr))
	if i := strings.LastIndexByte(why, '\n'); i >= 0 {
		why = why[i+1:]
	}
	if why == "" {
		return fmt.Sprintf("the target's forced command exited %d without a word", res.ExitCode)
	}
	return why
}
