// Command airlock-ssh is the agent's drop-in for `ssh host command`: it asks
// the local airlock gateway to run one command on a configured target and
// prints the result as ssh would. It holds no keys, keeps no session and
// never runs ssh.
//
//	airlock-ssh [flags] [account@]target [flags] [--] command [args...]
//
// Flags after the target are read as OpenSSH reads them there. Exit
// status: the remote command's exit status when it ran and reported one;
// 255 for every other outcome, with one line on stderr: "airlock-ssh:
// OUTCOME: DETAIL (action ID)"; --exit-codes=detailed gives every end a
// code of its own in 200–254 (exitcodes.go).
package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlockgw/airlock/deploy/buildinfo"

	"github.com/airlockgw/airlock/sshexec/outcome"

	"github.com/airlockgw/airlock/gateway/api"
)

func main() {
	ctx, stop := interrupted(repeatWindow)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// outcomeWait bounds how long airlock-ssh, stopped by a signal, waits for
// the gateway to record the cancelled action's outcome: the gateway waits
// up to sshexec.DefaultKillGrace (killGrace) for a started command to
// report its end.
const outcomeWait = killGrace + 2*time.Second

// killGrace is sshexec.DefaultKillGrace (a test holds them equal: this
// program, started once per action, does not link the SSH client).
const killGrace = 2 * time.Second

// fail prints a message and returns endNotRun: nothing ran.
func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "airlock-ssh: "+format+"\n", args...)
	return endNotRun
}

// failUnknown prints a message and returns endUnknown: what became of
// the action is not known.
func failUnknown(stderr io.Writer, format string, args ...any) int {
	fail(stderr, format, args...)
	return endUnknown
}

// run is airlock-ssh with args, returning its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parse(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage+exitCodeTable())
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintf(stdout, "airlock-ssh %s\n", buildinfo.Read())
		return 0
	}
	env, envErr := exitCodesFromEnv()
	if !o.codesSet {
		o.codes = env
		if err == nil {
			err = envErr
		}
	}
	if err != nil {
		return o.codes.status(fail(stderr, "%v", err))
	}
	return o.codes.status(act(ctx, o, stdin, stdout, stderr))
}

// act asks for the action o describes and reports it, returning how it
// ended (see endNotRun).
func act(ctx context.Context, o options, stdin io.Reader, stdout, stderr io.Writer) int {
	client, socket, err := localClient(o.socket)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if o.action != "" {
		return reportAction(ctx, client, socket, o, stdout, stderr)
	}
	req := api.ActionRequest{Target: o.target, Account: o.account, Command: o.command, Reason: o.reason, Secret: o.secret}
	var late *silentInput
	var getTo *localFile
	switch {
	case o.put:
		up, err := upload(ctx, client, o.local)
		if err != nil {
			return fail(stderr, "%v; nothing was sent", err)
		}
		req.Put = &api.PutRequest{Upload: up.ID, Path: o.remote, Mode: o.mode, Overwrite: o.overwrite}
	case o.get:
		if getTo, err = newLocalFile(o.local, o.overwrite); err != nil {
			return fail(stderr, "%v; nothing was asked", err)
		}
		defer getTo.discard()
		req.Get = &api.GetRequest{Path: o.remote}
	}
	if !o.noStdin && !o.put && !o.get {
		in, l, err := readStdin(stdin)
		if err != nil {
			return fail(stderr, "%v", err)
		}
		late = l
		switch {
		case len(in) > 0 && o.secret != "":
			return fail(stderr, "standard input has %d bytes, but with --secret the secret is the command's standard input; nothing was sent (pass -n to leave your input out)", len(in))
		case len(in) > 0:
			req.Stdin = base64.StdEncoding.EncodeToString(in)
		}
	}
	if o.timeout > 0 {
		req.TimeoutS = int((o.timeout + time.Second - 1) / time.Second)
	}
	waited := false
	lateBytes := 0
	var actionID string
	var delivered [2]int64 // stdout, stderr bytes written as they streamed
	due := newDeadline(ctx, o.timeout, client.Silence())
	defer due.stop()
	a, err := client.RunAction(due.ctx, req, api.Events{
		State: func(s api.StateEvent) {
			if s.ActionID != "" {
				actionID = s.ActionID
			}
			if s.State == api.StateConnecting || s.State == api.StateRunning {
				due.start()
			}
			if n, _ := late.arrived(); n > 0 && s.State == api.StateConnecting {
				// Input came while the action was asked for or approved:
				// the command is not run without it.
				lateBytes = n
				due.cancel(errLateInput)
			}
			if s.State == api.StateWaitingApproval && !waited {
				waited = true
				fmt.Fprint(stderr, waitingLine(s, time.Now()))
			}
		},
		Output: func(stream string, p []byte) {
			if o.json {
				return
			}
			if stream == "stderr" {
				delivered[1] += int64(len(p))
				stderr.Write(p)
			} else {
				delivered[0] += int64(len(p))
				stdout.Write(p)
			}
		},
	})
	if err != nil {
		if errors.Is(context.Cause(due.ctx), errLateInput) {
			stopped(client, actionID, fmt.Sprintf("%s when the action was requested, so none was sent; %d bytes arrived on it before the command started (they are left unread), so airlock-ssh cancelled the action rather than run the command without them (give the input before airlock-ssh starts, < FILE, or pass -n)", late.what(), lateBytes), stderr)
			return endInputNotSent
		}
		if due.passed() {
			return failUnknown(stderr, "the gateway stopped answering: action %s started, and no outcome came within its timeout, the %s kill grace and %s more; its outcome is unknown, and it may still be running; %s", actionID, killGrace, client.Silence(), askAgain(actionID))
		}
		return runFailed(ctx, err, client, socket, actionID, stderr)
	}
	code := report(o, a, delivered, true, stdout, stderr)
	if a.Transfer != nil {
		return finishTransfer(ctx, client, o, a, getTo, code, stderr)
	}
	switch n, open := late.arrived(); {
	case n > 0:
		fmt.Fprintf(stderr, "airlock-ssh: %s when the action was requested, so none was sent; %d bytes arrived on it later and were not sent (they are left unread) (action %s); give the input before airlock-ssh starts (a file: < FILE), or pass -n; exiting %d\n", late.what(), n, a.ID, o.codes.status(endInputNotSent))
		return endInputNotSent
	case open:
		// Nothing was lost yet, but input may still come: say what
		// happened to it.
		fmt.Fprintf(stderr, "airlock-ssh: %s, so none was sent (action %s); pass -n to say so and silence this note\n", late.what(), a.ID)
	}
	return code
}

// defaultTimeout is the action timeout without --timeout (the gateway's
// default; an account's max_timeout may make it shorter).
const defaultTimeout = 60 * time.Second

// deadline bounds the wait for an action that has started: the gateway
// ends it by its timeout and kill grace, and records it; airlock-ssh
// gives up when no outcome came a silence after that, even from a gateway
// that still sends heartbeats.
type deadline struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	after  time.Duration
	mu     sync.Mutex
	timer  *time.Timer
}

var (
	errDeadline  = errors.New("the action's outcome is overdue")
	errLateInput = errors.New("standard input arrived after the request")
)

func newDeadline(parent context.Context, timeout, silence time.Duration) *deadline {
	ctx, cancel := context.WithCancelCause(parent)
	return &deadline{ctx: ctx, cancel: cancel, after: cmp.Or(timeout, defaultTimeout) + killGrace + silence}
}

// start starts the clock, once: the action is connecting.
func (d *deadline) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer == nil {
		d.timer = time.AfterFunc(d.after, func() { d.cancel(errDeadline) })
	}
}

// passed reports whether the deadline ended the wait.
func (d *deadline) passed() bool { return errors.Is(context.Cause(d.ctx), errDeadline) }

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.cancel(nil)
}

// localClient reads the control file of the gateway at socket (the
// flag's; "": $AIRLOCK_SOCKET, else the standard path) and returns a
// client of it, and the socket. Its errors say what to do next.
func localClient(socket string) (*api.Client, string, error) {
	if socket == "" {
		var err error
		if socket, err = api.DefaultSocket(); err != nil {
			return nil, "", err
		}
	}
	c, err := api.LocalClient(socket)
	if err != nil {
		var ce *api.ControlError
		switch {
		case errors.As(err, &ce):
			return nil, "", err
		case errors.Is(err, os.ErrNotExist):
			return nil, "", fmt.Errorf("no gateway at %s: the airlock gateway is not running here; ask an operator to start it (airlock serve), or set $AIRLOCK_SOCKET or --socket if it listens elsewhere; nothing was run", socket)
		case errors.Is(err, os.ErrPermission):
			ctl := filepath.Join(filepath.Dir(socket), api.ControlFileName)
			if why := api.DenialCause(ctl); why != "" {
				return nil, "", fmt.Errorf("cannot read the gateway's control file %s: %s; an operator opens the way with listen.socket_group (see docs/operators.md), or adds this user to that group; nothing was run", ctl, why)
			}
			return nil, "", fmt.Errorf("cannot read the gateway's control file %s: permission denied; ask an operator to let this user use the gateway (listen.socket_group); nothing was run", ctl)
		}
		return nil, "", err
	}
	return c, socket, nil
}

// runFailed reports an action request that returned no action object:
// refused by the gateway, the gateway out of reach, stopped by a signal,
// or the connection broken midway (actionID, when the gateway had named
// the action).
func runFailed(ctx context.Context, err error, c *api.Client, socket, actionID string, stderr io.Writer) int {
	var apiErr *api.Error
	var opErr *net.OpError
	var silent *api.SilenceError
	switch {
	case errors.As(err, &silent) && (silent.ActionID != "" || actionID != ""):
		id := cmp.Or(silent.ActionID, actionID)
		return failUnknown(stderr, "the gateway stopped answering: nothing came from it for %s during action %s; its outcome is unknown, and it may have run; %s", silent.After, id, askAgain(id))
	case errors.As(err, &silent):
		return failUnknown(stderr, "the gateway at %s stopped answering: nothing came from it for %s, before it named an action; if it had taken the request, the action is cancelled when the gateway sees this end; ask an operator to look at the gateway (airlock serve)", socket, silent.After)
	case errors.As(err, &apiErr) && apiErr.Err.Code == api.CodeUnauthorized:
		return fail(stderr, "the gateway refused the local token from %s: the token may have been rotated; run again, or ask an operator", socket)
	case errors.As(err, &apiErr):
		return fail(stderr, "%s: %s", apiErr.Err.Code, apiErr.Err.Message)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fail(stderr, "cannot reach the gateway at %s (%v): the airlock gateway is not running; ask an operator to start it (airlock serve); nothing was run", socket, opErr.Err)
	case ctx.Err() != nil:
		return stoppedBySignal(c, actionID, stderr)
	case actionID != "":
		return failUnknown(stderr, "the connection to the gateway broke during action %s (%v): its outcome is unknown, and it may have run; %s", actionID, err, askAgain(actionID))
	}
	return failUnknown(stderr, "%v", err)
}

// askAgain says how to learn what became of action id when the gateway
// did not tell.
func askAgain(id string) string {
	return fmt.Sprintf("`airlock-ssh --action %s` shows the recorded result once the gateway answers again, or through another gateway replica on this host (--socket)", id)
}

// report prints what the action's object adds to what streamed — the
// output of a tail or none account, the JSON object, what was withheld or
// cut — and returns the exit status.
func report(o options, a *api.Action, delivered [2]int64, live bool, stdout, stderr io.Writer) int {
	// streamed: the output reached the agent as it came (live, full);
	// otherwise it is the object's.
	full := a.OutputPolicy == "" || a.OutputPolicy == "full"
	streamed := live && full
	switch {
	case o.json:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // commands hold > and &; show them as they are
		enc.Encode(a)
	case !streamed:
		// The policy's view of the output comes with the outcome.
		for _, s := range []struct {
			text, enc string
			w         io.Writer
		}{{a.Stdout, a.StdoutEncoding, stdout}, {a.Stderr, a.StderrEncoding, stderr}} {
			if b, err := api.DecodeBytes(s.text, s.enc); err == nil {
				s.w.Write(b)
			}
		}
	}

	// What the agent did not get. A policy's cut is the operator's choice
	// and only noted; any other cut fails the call unless accepted.
	cut := false
	for i, s := range []struct {
		name      string
		held      string
		enc       string
		total     int64
		truncated bool
	}{{"stdout", a.Stdout, a.StdoutEncoding, a.StdoutBytes, a.StdoutTruncated}, {"stderr", a.Stderr, a.StderrEncoding, a.StderrBytes, a.StderrTruncated}} {
		got := int64(len(s.held))
		if b, err := api.DecodeBytes(s.held, s.enc); err == nil {
			got = int64(len(b))
		}
		switch {
		case !o.json && streamed:
			if delivered[i] < s.total {
				cut = true
				fmt.Fprintf(stderr, "airlock-ssh: %s truncated: delivered %d of %d bytes (action %s)\n", s.name, delivered[i], s.total, a.ID)
			}
		case !s.truncated:
		case full:
			cut = true
			fmt.Fprintf(stderr, "airlock-ssh: %s truncated: the action object holds %d of %d bytes, the gateway's output cap (action %s)\n", s.name, got, s.total, a.ID)
		case a.OutputPolicy == "none":
			fmt.Fprintf(stderr, "airlock-ssh: %s withheld by the account's output policy (none): %d bytes (action %s)\n", s.name, s.total, a.ID)
		default:
			fmt.Fprintf(stderr, "airlock-ssh: %s: the account's output policy (%s) returns the last %d of %d bytes (action %s)\n", s.name, a.OutputPolicy, got, s.total, a.ID)
		}
	}

	if a.Outcome == outcome.Exited && a.ExitCode != nil {
		if cut && !o.acceptCut {
			fmt.Fprintf(stderr, "airlock-ssh: the command exited %d, but its output did not reach you whole; exiting %d (--accept-truncation keeps the exit status)\n", *a.ExitCode, o.codes.status(endOutputCut))
			return endOutputCut
		}
		o.codes.noteInRange(*a.ExitCode, a.ID, stderr)
		return *a.ExitCode
	}
	detail := a.Detail
	if next := api.NextStep(a); next != "" {
		if detail != "" {
			detail += "; "
		}
		detail += next
	}
	fmt.Fprintf(stderr, "airlock-ssh: %s: %s (action %s)\n", a.Outcome, detail, a.ID)
	return outcomeEnd(a.Outcome)
}

// reportAction is --action: the recorded result of an earlier action, as
// the object holds it, waited for if it is still in flight.
func reportAction(ctx context.Context, c *api.Client, socket string, o options, stdout, stderr io.Writer) int {
	a, err := c.WaitAction(ctx, o.action, api.Events{})
	var apiErr *api.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &apiErr) && apiErr.Err.Code == api.CodeNotFound:
		return fail(stderr, "no action %s of this agent: %s", o.action, apiErr.Err.Message)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fail(stderr, "cannot reach the gateway at %s (%v): ask again once it is back, or through another gateway replica on this host (--socket)", socket, opErr.Err)
	case err != nil:
		return fail(stderr, "action %s: %v", o.action, err)
	case !a.Outcome.Valid() && a.Detail != "":
		return fail(stderr, "action %s has no outcome (%s): %s", o.action, a.State, a.Detail)
	case !a.Outcome.Valid() && a.Replica != "":
		return failUnknown(stderr, "action %s is still in flight (%s, on gateway replica %s); ask again later", o.action, a.State, a.Replica)
	case !a.Outcome.Valid():
		return failUnknown(stderr, "action %s is still in flight (%s); ask again later", o.action, a.State)
	}
	return report(o, a, [2]int64{}, false, stdout, stderr)
}

// stoppedBySignal says what became of the action after a signal stopped
// airlock-ssh (and so cancelled the action).
func stoppedBySignal(c *api.Client, id string, stderr io.Writer) int {
	if id == "" {
		return failUnknown(stderr, "stopped by a signal before the gateway named the action: if it had taken it, it is cancelled (a reviewer can look it up in the recent actions)")
	}
	return stopped(c, id, "stopped by a signal", stderr)
}

// stopped says why airlock-ssh cancelled action id, and what became of
// it: what the gateway recorded, asked for up to outcomeWait, or that it
// is not known yet. It never claims more than the record says.
func stopped(c *api.Client, id, why string, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), outcomeWait)
	defer cancel()
	for {
		if a, err := c.Action(ctx, id); err == nil && a.Outcome.Valid() {
			msg := fmt.Sprintf("%s: action %s ended %s", why, id, a.Outcome)
			if a.Termination.Valid() {
				msg += fmt.Sprintf(" (termination: %s)", a.Termination)
			}
			if a.Detail != "" {
				msg += ": " + a.Detail
			}
			fail(stderr, "%s", msg)
			if a.Outcome == outcome.Exited {
				return endOutputCut // it ended, but not all of it reached the agent
			}
			return outcomeEnd(a.Outcome)
		}
		select {
		case <-ctx.Done():
			return failUnknown(stderr, "%s: the gateway is cancelling action %s, and had not recorded its outcome after %s; "+
				"a command that had started may still be running (its outcome: GET /v1/actions/%s, or ask a reviewer)", why, id, outcomeWait, id)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// upload sends the local file for a put.
func upload(ctx context.Context, c *api.Client, name string) (*api.Upload, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	up, err := c.Upload(ctx, f, st.Size())
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return nil, fmt.Errorf("the gateway refused the file: %s", apiErr.Err.Message)
	}
	return up, err
}

// localFile is where a get's bytes go: a temporary file next to the
// destination, renamed to it only once every byte arrived and matched.
type localFile struct {
	dest      string
	tmp       *os.File
	overwrite bool
	// mode is what the published file gets: a new file 0644 less the
	// umask; a file replacing one (overwrite) that file's permission
	// bits, so that a replaced 0600 file stays 0600.
	mode fs.FileMode
}

// newLocalFile prepares a get into dest: an existing dest is refused
// unless overwrite (and is then replaced, never written through).
func newLocalFile(dest string, overwrite bool) (*localFile, error) {
	mode := 0o644 &^ fs.FileMode(umask())
	if st, err := os.Lstat(dest); err == nil {
		switch {
		case !overwrite:
			return nil, fmt.Errorf("%s exists; pass --overwrite to replace it", dest)
		case st.IsDir():
			return nil, fmt.Errorf("%s is a directory; name the file to write", dest)
		case st.Mode().IsRegular():
			mode = st.Mode().Perm()
		}
	}
	// CreateTemp makes it 0600: nobody else reads it while it fills.
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".airlock-*.part")
	if err != nil {
		return nil, err
	}
	return &localFile{dest: dest, tmp: tmp, overwrite: overwrite, mode: mode}, nil
}

// publish gives the temporary file its mode and its name: with overwrite
// by a rename (which replaces a file or a link there, never follows it),
// without by a hard link, which fails if something took the name
// meanwhile. A file replaced is looked at again just before: its mode
// now, if narrower than when the get began, is the one kept.
func (l *localFile) publish() error {
	if err := l.tmp.Sync(); err != nil {
		return err
	}
	mode := l.mode
	if st, err := os.Lstat(l.dest); err == nil && l.overwrite && st.Mode().IsRegular() {
		mode &= st.Mode().Perm()
	}
	if err := l.tmp.Chmod(mode); err != nil {
		return err
	}
	if err := l.tmp.Close(); err != nil {
		return err
	}
	var err error
	if l.overwrite {
		err = os.Rename(l.tmp.Name(), l.dest)
	} else if err = os.Link(l.tmp.Name(), l.dest); err == nil {
		os.Remove(l.tmp.Name())
	}
	if err == nil {
		l.tmp = nil
	}
	return err
}

// discard removes the temporary file unless it was published.
func (l *localFile) discard() {
	if l != nil && l.tmp != nil {
		l.tmp.Close()
		os.Remove(l.tmp.Name())
	}
}

// umask reads the process's umask.
func umask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}

// finishTransfer ends a put or get: after a successful get, the file is
// fetched, checked and published. code is report's exit status.
func finishTransfer(ctx context.Context, c *api.Client, o options, a *api.Action, to *localFile, code int, stderr io.Writer) int {
	t := a.Transfer
	if !a.Success() {
		if a.Outcome == outcome.Exited {
			// The target refused the transfer: report's status is its
			// exit code; say why.
			fmt.Fprintf(stderr, "airlock-ssh: %s %s: %s (action %s)\n", t.Direction, t.Path, a.Detail, a.ID)
		}
		if t.Leftover != "" {
			fmt.Fprintf(stderr, "airlock-ssh: a temporary file %s is left on the target (never published)\n", t.Leftover)
		}
		return max(code, 1)
	}
	if o.put {
		return code
	}
	if _, err := c.Fetch(ctx, a, to.tmp); err != nil {
		fail(stderr, "fetching the file of action %s: %v; %s was not written", a.ID, err, to.dest)
		return endFileNotWritten
	}
	if err := to.publish(); err != nil {
		fail(stderr, "writing %s: %v (the file of action %s was fetched whole and is gone from the gateway)", to.dest, err, a.ID)
		return endFileNotWritten
	}
	return code
}
