package engine

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/sshexec"
)

// What the gateway keeps of an output stream, as it is passed on (a
// delivered secret's value already hidden, so nothing kept ever holds
// it): its first sshexec.DefaultOutputLimit bytes in memory (stored in
// the output store with the outcome), the bytes after them up to the
// account's max_output in a spill file on the gateway's disk (output
// "full" only: the only policy under which an agent pages through a
// stream), and its last tailKeep bytes. A spill file is written as the
// command writes, so memory stays bounded whatever the output; it is
// owner-only, in an owner-only directory, never takes the disk below
// transfer.min_free, and is removed spillRetention after its action
// ended (or, for one left by a gateway that stopped, after its last
// write).
const (
	spillDirName = "outputs"
	// spillRetention is how long a spill file is kept.
	spillRetention = 24 * time.Hour
)

// spillDir is the directory of the spill files and their expiry.
type spillDir struct {
	dir   string
	clock approvals.Clock
	mu    sync.Mutex
	// timers cancel the pending removals; nil once closed.
	timers map[string]func() bool
}

// openSpillDir opens the spill directory under stateDir (creating it
// owner-only), removes the files older than spillRetention and schedules
// the removal of the others.
func openSpillDir(stateDir string, clock approvals.Clock) (*spillDir, error) {
	dir := filepath.Join(stateDir, spillDirName)
	if err := securefile.PrivateDir(dir, -1); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the output spill directory: %w", err)
	}
	d := &spillDir{dir: dir, clock: clock, timers: map[string]func() bool{}}
	now := clock.Now()
	for _, en := range ents {
		if info, err := en.Info(); err == nil {
			d.expire(en.Name(), spillRetention-now.Sub(info.ModTime()))
		}
	}
	return d, nil
}

// spillName is the file of one stream of an action.
func spillName(actionID string, s sshexec.Stream) string { return actionID + "." + s.String() }

// path is where file name is.
func (d *spillDir) path(name string) string { return filepath.Join(d.dir, name) }

// expire removes file name once after has passed (at once when it has).
func (d *spillDir) expire(name string, after time.Duration) {
	if after <= 0 {
		os.Remove(d.path(name))
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timers == nil {
		return // closed: the next start sweeps it
	}
	if stop := d.timers[name]; stop != nil {
		stop()
	}
	d.timers[name] = d.clock.AfterFunc(after, func() {
		d.mu.Lock()
		delete(d.timers, name)
		d.mu.Unlock()
		os.Remove(d.path(name))
	})
}

// close cancels the pending removals (the next start schedules them
// again from the files' times).
func (d *spillDir) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, stop := range d.timers {
		stop()
	}
	d.timers = nil
}

// spillFacts is what action.finished records of a stream over the
// in-memory cap under output "full" (fields stdout_spill_…): the spill
// file's SHA-256 and size (its first byte is the stream's byte at the
// stored head's size), the bytes after it that were not kept before the
// stored end, the max_output the action ran under, and why the spill
// stopped short of the stream's end (api.DroppedMaxOutput, DroppedDisk).
type spillFacts struct {
	SHA256    [32]byte `audit:"sha256"`
	Bytes     int64    `audit:"bytes"`
	Dropped   int64    `audit:"dropped"`
	MaxOutput int64    `audit:"max_output"`
	Why       string   `audit:"why,omitempty"`
}

// keptStream keeps one output stream of a running action (see above).
// Only the stream's drain writes to it, and Run returns only once the
// drains are done: it needs no lock.
type keptStream struct {
	sshexec.Capture
	// keep is how much of the stream's start is kept: max_output under
	// output "full" (full), else the in-memory cap (nothing spills, and
	// nothing is told dropped: the agent reads only the end, if that).
	keep int64
	full bool
	dir  *spillDir
	name string
	// room checks the disk floor before n more bytes are written.
	room func(n int64) error
	f    *os.File
	sum  hash.Hash
	// spilled counts the bytes in the spill file; why is set when
	// spilling stopped before keep (err says what failed).
	spilled int64
	why     string
	err     error
}

// write keeps p, the next bytes of the stream as passed on.
func (k *keptStream) write(p []byte) {
	off := k.Total()
	k.Capture.Write(p)
	lo, hi := max(off, k.Limit), min(off+int64(len(p)), k.keep)
	if hi > lo && k.why == "" {
		k.spill(p[lo-off : hi-off])
	}
}

// spill appends p to the spill file, creating it first; a write the disk
// has no room for stops the spill (the stream is then dropped from there
// to its stored end, and the action says so).
func (k *keptStream) spill(p []byte) {
	err := k.room(int64(len(p)))
	if err == nil && k.f == nil {
		k.f, err = os.OpenFile(k.dir.path(k.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		k.sum = sha256.New()
	}
	if err == nil {
		var n int
		n, err = k.f.Write(p)
		k.sum.Write(p[:n])
		k.spilled += int64(n)
	}
	if err != nil {
		k.why, k.err = api.DroppedDisk, err
	}
}

// done makes the spill file durable and schedules its removal, and
// returns the stream's facts: nil when it spilled and dropped nothing.
func (k *keptStream) done() *spillFacts {
	if k.f != nil {
		err := k.f.Sync()
		if cerr := k.f.Close(); err == nil {
			err = cerr
		}
		k.f = nil
		if err != nil {
			// Not durable, not kept: its digest would not hold.
			os.Remove(k.dir.path(k.name))
			k.spilled, k.why, k.err = 0, api.DroppedDisk, err
		}
		k.dir.expire(k.name, spillRetention)
	}
	var dropped int64
	if tail := k.Tail(); tail != nil {
		dropped = max(0, k.Total()-int64(len(tail))-int64(len(k.Head()))-k.spilled)
	}
	if !k.full || k.spilled == 0 && dropped == 0 {
		return nil
	}
	f := &spillFacts{Bytes: k.spilled, Dropped: dropped, MaxOutput: k.keep, Why: k.why}
	if k.sum != nil && k.spilled > 0 {
		copy(f.SHA256[:], k.sum.Sum(nil))
	}
	if dropped > 0 && f.Why == "" {
		f.Why = api.DroppedMaxOutput
	}
	return f
}

// keptOutput is both streams of a running action.
type keptOutput struct{ stdout, stderr keptStream }

// stream returns the kept stream s.
func (k *keptOutput) stream(s sshexec.Stream) *keptStream {
	if s == sshexec.Stderr {
		return &k.stderr
	}
	return &k.stdout
}

// newKeptOutput keeps the output of the action id on account a, the
// spill files in dir, within the disk floor of the transfer block t.
func newKeptOutput(id string, a *config.Account, dir *spillDir, sp *spool, t config.Transfer) *keptOutput {
	keep, full := int64(sshexec.DefaultOutputLimit), a.Output == config.OutputFull
	if full {
		keep = max(keep, a.MaxOutput)
	}
	room := func(n int64) error { return sp.floor(n, t) }
	k := &keptOutput{}
	for _, s := range []sshexec.Stream{sshexec.Stdout, sshexec.Stderr} {
		*k.stream(s) = keptStream{Capture: sshexec.Capture{Limit: sshexec.DefaultOutputLimit, TailLimit: tailKeep},
			keep: keep, full: full, dir: dir, name: spillName(id, s), room: room}
	}
	return k
}

// execConfig is the one connection of the action: the target, its account
// signed in with signer, through the jump hosts via. The output is kept
// here, as it is passed on, not by sshexec (which keeps nothing).
func (l *lifecycle) execConfig(signer ssh.Signer, via []sshexec.Hop) *sshexec.Config {
	l.kept = newKeptOutput(l.a.id, l.account, l.e.spills, l.e.spool, l.conf.cfg.Transfer)
	cfg := &sshexec.Config{
		Addr:        l.target.Address,
		Name:        l.target.Name,
		User:        l.account.Name,
		Signers:     []ssh.Signer{signer},
		HostKeys:    hostKeysOf(l.target),
		Via:         via,
		Timeout:     l.remaining(),
		OutputLimit: -1,
		Stdin:       l.stdin,
	}
	var runningOnce sync.Once
	running := func() { runningOnce.Do(func() { l.a.setState(api.StateRunning, api.StateEvent{}) }) }
	cfg.Started = running
	cfg.Output = func(stream sshexec.Stream, p []byte) {
		running() // output can be read before the exec reply is
		if l.mask != nil {
			// Nothing of a secret's value goes on, not even live.
			p = l.mask.stream(stream).write(p)
		}
		l.kept.stream(stream).write(p)
		if l.account.Output == config.OutputFull && len(p) > 0 {
			l.a.output(stream, p)
		}
	}
	return cfg
}

// takeOutput passes on what the secret mask held back at the end of each
// stream, and puts what the gateway kept of the streams in r, in place of
// sshexec's (which kept nothing): the sizes are then those of the output
// as passed on. A get's stdout is its file, never kept as output.
func (l *lifecycle) takeOutput(r *sshexec.Result) {
	for _, s := range []struct {
		stream     sshexec.Stream
		head, tail *[]byte
		total      *int64
		cut        *bool
	}{
		{sshexec.Stdout, &r.Stdout, &r.StdoutTail, &r.StdoutBytes, &r.StdoutTruncated},
		{sshexec.Stderr, &r.Stderr, &r.StderrTail, &r.StderrBytes, &r.StderrTruncated},
	} {
		k := l.kept.stream(s.stream)
		if l.mask != nil {
			if rest := l.mask.stream(s.stream).flush(); len(rest) > 0 {
				k.write(rest)
				if l.account.Output == config.OutputFull {
					l.a.output(s.stream, rest)
				}
			}
		}
		if s.stream == sshexec.Stdout && r.Transfer != nil && r.Transfer.Direction == "get" {
			continue
		}
		*s.head, *s.tail, *s.total, *s.cut = k.Head(), k.Tail(), k.Total(), k.Truncated()
	}
}

// keptFacts closes the spill files and records what they hold, and what
// was dropped, in fin; the detail says what was dropped.
func (l *lifecycle) keptFacts(fin *actionFinished) {
	if l.kept == nil {
		return
	}
	fin.StdoutSpill, fin.StderrSpill = l.kept.stdout.done(), l.kept.stderr.done()
	for _, k := range []*keptStream{&l.kept.stdout, &l.kept.stderr} {
		if k.err != nil {
			l.e.log.Error("output spill: the rest of the stream is not kept", "action", l.a.id, "file", k.name, "error", k.err)
		}
	}
	if d := droppedView(fin.StdoutSpill, fin.StderrSpill); d != nil {
		l.res.detail += "; " + d.Text
	}
}

// droppedView is what the agent is told of the output that was not kept,
// from the facts of its streams; nil when every byte can be paged.
func droppedView(stdout, stderr *spillFacts) *api.OutputDropped {
	d := &api.OutputDropped{}
	var disk bool
	for _, s := range []struct {
		f *spillFacts
		n *int64
	}{{stdout, &d.StdoutBytes}, {stderr, &d.StderrBytes}} {
		if s.f == nil || s.f.Dropped == 0 {
			continue
		}
		*s.n, d.MaxOutput = s.f.Dropped, s.f.MaxOutput
		disk = disk || s.f.Why == api.DroppedDisk
	}
	if d.StdoutBytes == 0 && d.StderrBytes == 0 {
		return nil
	}
	what := droppedBytes(d)
	if disk {
		d.Why = api.DroppedDisk
		d.Text = fmt.Sprintf("%s not kept: the gateway's disk had no room for them (it keeps transfer.min_free free) or could not be written; "+
			"no page returns them: ask the operator to free disk space, or run the command again with its output sent to a file on the target", what)
		return d
	}
	d.Why = api.DroppedMaxOutput
	d.Text = fmt.Sprintf("%s not kept: past the first %s of a stream (the account's max_output) the gateway keeps only its last %s, and no page returns the bytes between; "+
		"raise the account's max_output in the gateway's configuration, or run the command again with less output (a filter, or a file on the target)",
		what, sizeText(d.MaxOutput), sizeText(tailKeep))
	return d
}

// streamDropped is droppedView of one stream, named "stdout" or "stderr".
func streamDropped(stream string, f *spillFacts) *api.OutputDropped {
	if stream == sshexec.Stderr.String() {
		return droppedView(nil, f)
	}
	return droppedView(f, nil)
}

// droppedBytes names the bytes dropped: "1234 bytes of stdout were".
func droppedBytes(d *api.OutputDropped) string {
	switch {
	case d.StdoutBytes > 0 && d.StderrBytes > 0:
		return fmt.Sprintf("%d bytes of stdout and %d of stderr were", d.StdoutBytes, d.StderrBytes)
	case d.StdoutBytes > 0:
		return fmt.Sprintf("%d bytes of stdout were", d.StdoutBytes)
	}
	return fmt.Sprintf("%d bytes of stderr were", d.StderrBytes)
}

// errSpillChanged: a spill file does not hold what action.finished
// recorded.
var errSpillChanged = errors.New("the spill file does not match the digest action.finished recorded")

// checkSpill checks that the spill file path holds the bytes facts f
// recorded: its size and SHA-256.
func checkSpill(path string, f *spillFacts) error {
	r, err := os.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return err
	}
	if n != f.Bytes || [32]byte(h.Sum(nil)) != f.SHA256 {
		return errSpillChanged
	}
	return nil
}

// readSpill reads n bytes at off of the spill file path.
func readSpill(path string, off, n int64) ([]byte, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, n)
	k, err := r.ReadAt(b, off)
	if int64(k) == n {
		return b, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errSpillChanged
	}
	return nil, err
}
