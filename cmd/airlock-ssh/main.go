// Command airlock-ssh is the agent's drop-in for `ssh host command`: it asks
// the local airlock gateway to run one command on a configured target and
// prints the result as ssh would. It holds no keys, keeps no session and
// never runs ssh.
//
//	airlock-ssh [flags] [account@]target [--] command [args...]
//
// Exit status: the remote command's exit status when it ran and reported
// one; 255 for every other outcome, with one line on stderr:
// "airlock-ssh: OUTCOME: DETAIL (action ID)".
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/airlockgw/airlock/deploy/buildinfo"

	"github.com/airlockgw/airlock/sshexec/outcome"
	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/gateway/api"
)

const usage = `usage: airlock-ssh [flags] [account@]target [--] command [args...]
       airlock-ssh [flags] --put LOCAL [account@]target:REMOTE
       airlock-ssh [flags] --get [account@]target:REMOTE LOCAL
       airlock-ssh [--json] [--accept-truncation] --action ID

Runs one command on a target configured in the airlock gateway, after the
approval the gateway's policy requires, over a fresh SSH connection the
gateway makes.

standard input: read whole before the request and sent to the command (the
reviewer sees its size, digest and, when short text, the text; the
account's max_stdin bounds it, 1 MiB by default). Nothing is sent when it
is a terminal, with -n, or when it is a pipe on which nothing arrives
within 1 s (an agent harness's open pipe; a note says so, -n silences it);
if input arrives after that, airlock-ssh says so and exits 255.

flags:
  -l ACCOUNT      remote account (default: the target's default account)
  -n              send no standard input (as ssh -n)
  --reason TEXT   what the action is for, shown to the reviewer as your own
                  claim (at most 500 characters)
  --secret NAME   the gateway writes its secret NAME to the command's standard
                  input (granted to the account in the gateway's configuration);
                  you never see the value, and where it appears in the output
                  it is replaced by [secret NAME]; your own standard input is
                  not sent (any that arrives is an error; -n to ignore it)
  --timeout DUR   action timeout, e.g. 30s or 5m (default 60s, or the account's
                  max_timeout if lower; longer than max_timeout is rejected)
  --put LOCAL [account@]target:REMOTE
                  copy the file LOCAL to REMOTE (an absolute path) on the
                  target: one action, approved with the file's size and
                  SHA-256; it lands under a temporary name and is renamed
                  to REMOTE only once all of it arrived, and never replaces
                  a file there without --overwrite
  --get [account@]target:REMOTE LOCAL
                  copy the file REMOTE from the target to LOCAL: written to a
                  temporary file next to LOCAL, checked against the SHA-256
                  the gateway recorded, then renamed; an existing LOCAL is
                  replaced only with --overwrite
  --mode MODE     --put: the file's mode in octal (default 0644)
  --overwrite     --put, --get: replace an existing file
  --action ID     print the recorded result of an earlier action of this agent
                  (its output as the object holds it, its exit status), waiting
                  for it if it is still in flight: after a broken connection
                  to the gateway, or a signal
  --json          print the action object as JSON instead of the output
  --accept-truncation
                  exit with the remote status even when the output was cut
                  (by the gateway's output cap or a broken stream); the cut
                  is still reported on stderr
  --socket PATH   gateway socket (default: $AIRLOCK_SOCKET, else the standard path)
  -T              accepted and ignored: no terminal is ever allocated
  --version       print the version (and the commit it was built from)

output: stdout and stderr stream as the command writes them. An account
whose output policy is "tail" or "none" returns its output at the end: the
last 64 KiB of each stream, or nothing; a line on stderr says what was
withheld. Whenever less than the whole output reached you (the gateway's
output cap, a stream cut), a line on stderr says so:
  airlock-ssh: stdout truncated: delivered N of M bytes (action ID)

exit status: the remote exit status; 255 when the command did not run to an
exit status, or when its output was cut (unless --accept-truncation); the
reason is printed on stderr.
`

// refused are ssh's flags that would open a hole, with the reason.
var refused = map[string]string{
	"-A": "agent forwarding is never offered: the gateway holds the credentials",
	"-L": "port forwarding is never offered: an action is one command",
	"-R": "port forwarding is never offered: an action is one command",
	"-D": "dynamic forwarding is never offered: an action is one command",
	"-X": "X11 forwarding is never offered",
	"-Y": "X11 forwarding is never offered",
	"-W": "stdio forwarding is never offered: an action is one command",
	"-J": "targets and their addresses come from the gateway's configuration; there are no jump hosts",
	"-M": "connections are never shared: every action uses a fresh connection",
	"-S": "connections are never shared: every action uses a fresh connection",
	"-o": "connection options are fixed by the gateway's configuration",
	"-F": "connection options are fixed by the gateway's configuration",
	"-i": "agents hold no keys: the gateway holds the credentials",
	"-p": "the target's address and port come from the gateway's configuration",
	"-t": "no terminal is ever allocated",
	"-N": "an action is one command; there is nothing to do without one",
	"-f": "an action is one command the gateway waits for; there is no background session",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// After the first signal, while airlock-ssh waits for the outcome,
	// a second one ends it at once.
	go func() { <-ctx.Done(); stop() }()
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

type options struct {
	account string
	timeout time.Duration
	json    bool
	// acceptCut keeps the remote exit status when output was cut.
	acceptCut bool
	noStdin   bool
	reason    string
	secret    string
	// action is an earlier action to report (--action).
	action string
	// put and get are a file transfer: local is the agent's file,
	// remote the target's path.
	put, get      bool
	local, remote string
	mode          string
	overwrite     bool
	socket        string
	target        string
	command       string
}

// fail prints a message and returns exit status 255.
func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "airlock-ssh: "+format+"\n", args...)
	return 255
}

func parse(args []string) (options, error) {
	var o options
	value := func(i *int, name string) (string, error) {
		a := args[*i]
		if v, ok := strings.CutPrefix(a, name+"="); ok && strings.HasPrefix(name, "--") {
			return v, nil
		}
		if len(a) > len(name) && !strings.HasPrefix(name, "--") {
			return a[len(name):], nil // -lroot
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		switch {
		case a == "-h" || a == "--help":
			return o, errHelp
		case a == "--version":
			return o, errVersion
		case a == "--json":
			o.json = true
		case a == "--accept-truncation":
			o.acceptCut = true
		case a == "-n":
			o.noStdin = true
		case a == "--action" || strings.HasPrefix(a, "--action="):
			v, err := value(&i, "--action")
			if err != nil {
				return o, err
			}
			o.action = v
		case a == "--reason" || strings.HasPrefix(a, "--reason="):
			v, err := value(&i, "--reason")
			if err != nil {
				return o, err
			}
			if n := utf8.RuneCountInString(v); n > api.MaxReason {
				return o, fmt.Errorf("--reason is %d characters, over the limit of %d", n, api.MaxReason)
			}
			o.reason = v
		case a == "--secret" || strings.HasPrefix(a, "--secret="):
			v, err := value(&i, "--secret")
			if err != nil {
				return o, err
			}
			if v == "" {
				return o, errors.New("--secret needs the name of a secret the gateway holds")
			}
			o.secret = v
		case a == "--put" || a == "--get":
			if i+2 >= len(args) {
				return o, fmt.Errorf("%s needs two paths: see airlock-ssh --help", a)
			}
			if o.put || o.get {
				return o, errors.New("one transfer per action: --put or --get, once")
			}
			src, dst := args[i+1], args[i+2]
			i += 2
			o.put, o.get = a == "--put", a == "--get"
			dest := dst
			o.local = src
			if o.get {
				dest, o.local = src, dst
			}
			target, remote, ok := strings.Cut(dest, ":")
			if !ok || remote == "" {
				return o, fmt.Errorf("%s: %q is not [account@]target:REMOTE", a, dest)
			}
			if o.local == "" {
				return o, fmt.Errorf("%s: the local path is empty", a)
			}
			o.target, o.remote = target, remote
		case a == "--mode" || strings.HasPrefix(a, "--mode="):
			v, err := value(&i, "--mode")
			if err != nil {
				return o, err
			}
			o.mode = v
		case a == "--overwrite":
			o.overwrite = true
		case a == "-T":
		case a == "-l" || strings.HasPrefix(a, "-l") && len(a) > 2 && !strings.HasPrefix(a, "--"):
			v, err := value(&i, "-l")
			if err != nil {
				return o, err
			}
			o.account = v
		case a == "--timeout" || strings.HasPrefix(a, "--timeout="):
			v, err := value(&i, "--timeout")
			if err != nil {
				return o, err
			}
			d, err := parseTimeout(v)
			if err != nil {
				return o, err
			}
			o.timeout = d
		case a == "--socket" || strings.HasPrefix(a, "--socket="):
			v, err := value(&i, "--socket")
			if err != nil {
				return o, err
			}
			o.socket = v
		default:
			flag := a
			if len(a) > 2 && a[1] != '-' {
				flag = a[:2] // -L8080:… or a cluster like -tt
			}
			if why, ok := refused[flag]; ok {
				return o, fmt.Errorf("%s is refused: %s", flag, why)
			}
			return o, fmt.Errorf("unknown flag %s (see airlock-ssh --help)", a)
		}
	}
	if o.action != "" {
		if i < len(args) || o.put || o.get {
			return o, errors.New("--action takes no target, command or transfer: it reports an action that was already requested")
		}
		return o, nil
	}
	if o.mode != "" && !o.put {
		return o, errors.New("--mode goes with --put")
	}
	if o.overwrite && !o.put && !o.get {
		return o, errors.New("--overwrite goes with --put or --get")
	}
	if o.put || o.get {
		if i < len(args) {
			return o, errors.New("a transfer takes no command")
		}
		if user, host, ok := strings.Cut(o.target, "@"); ok {
			if o.account != "" && o.account != user {
				return o, fmt.Errorf("account given twice: -l %s and %s@", o.account, user)
			}
			o.account, o.target = user, host
		}
		if o.target == "" {
			return o, errors.New("empty target")
		}
		if o.secret != "" {
			return o, errors.New("--secret goes with a command, not a transfer")
		}
		return o, nil
	}
	if i >= len(args) {
		return o, errors.New("no target given (see airlock-ssh --help)")
	}
	dest := args[i]
	i++
	if user, host, ok := strings.Cut(dest, "@"); ok {
		if o.account != "" && o.account != user {
			return o, fmt.Errorf("account given twice: -l %s and %s@", o.account, user)
		}
		o.account, dest = user, host
	}
	if dest == "" {
		return o, errors.New("empty target")
	}
	o.target = dest
	if i < len(args) && args[i] == "--" {
		i++
	}
	if i >= len(args) {
		return o, errors.New("no command given: airlock runs one command per action, never an interactive shell")
	}
	// As ssh does: the arguments are joined with single spaces.
	o.command = strings.Join(args[i:], " ")
	return o, nil
}

var (
	errHelp    = errors.New("help")
	errVersion = errors.New("version")
)

func parseTimeout(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("--timeout %q: give whole seconds (30) or a duration (30s, 5m), at least 1s", v)
	}
	return d, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parse(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintf(stdout, "airlock-ssh %s\n", buildinfo.Read())
		return 0
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	socket := o.socket
	if socket == "" {
		if socket, err = api.DefaultSocket(); err != nil {
			return fail(stderr, "%v", err)
		}
	}
	ctl, err := api.ReadControl(socket)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fail(stderr, "no gateway at %s: the airlock gateway is not running here; ask an operator to start it (airlock serve), or set $AIRLOCK_SOCKET or --socket if it listens elsewhere; nothing was run", socket)
		case errors.Is(err, os.ErrPermission):
			ctl := filepath.Join(filepath.Dir(socket), api.ControlFileName)
			if why := api.DenialCause(ctl); why != "" {
				return fail(stderr, "cannot read the gateway's control file %s: %s; an operator opens the way with listen.socket_group (see docs/operators.md), or adds this user to that group; nothing was run", ctl, why)
			}
			return fail(stderr, "cannot read the gateway's control file %s: permission denied; ask an operator to let this user use the gateway (listen.socket_group); nothing was run", ctl)
		}
		return fail(stderr, "%v", err)
	}
	client := api.NewLocalClient(socket, ctl.Token)
	if o.action != "" {
		return reportAction(ctx, client, o, stdout, stderr)
	}
	req := api.ActionRequest{Target: o.target, Account: o.account, Command: o.command, Reason: o.reason, Secret: o.secret}
	var late *lateInput
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
	var actionID string
	var delivered [2]int64 // stdout, stderr bytes written as they streamed
	a, err := client.RunAction(ctx, req, api.Events{
		State: func(s api.StateEvent) {
			if s.ActionID != "" {
				actionID = s.ActionID
			}
			if s.State == api.StateWaitingApproval && !waited {
				waited = true
				fmt.Fprintf(stderr, "airlock-ssh: waiting for a reviewer to approve this %s (approval %s)\n", s.Kind, s.ApprovalID)
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
		var apiErr *api.Error
		var opErr *net.OpError
		switch {
		case errors.As(err, &apiErr) && apiErr.Err.Code == api.CodeUnauthorized:
			return fail(stderr, "the gateway refused the local token from %s: the token may have been rotated; run again, or ask an operator", socket)
		case errors.As(err, &apiErr):
			return fail(stderr, "%s: %s", apiErr.Err.Code, apiErr.Err.Message)
		case errors.As(err, &opErr) && opErr.Op == "dial":
			return fail(stderr, "cannot reach the gateway at %s (%v): the airlock gateway is not running; ask an operator to start it (airlock serve); nothing was run", socket, opErr.Err)
		case ctx.Err() != nil:
			return stoppedBySignal(client, actionID, stderr)
		case actionID != "":
			return fail(stderr, "the connection to the gateway broke during action %s (%v): its outcome is unknown, and it may have run; `airlock-ssh --action %s` shows the recorded result", actionID, err, actionID)
		}
		return fail(stderr, "%v", err)
	}
	code := report(o, a, delivered, true, stdout, stderr)
	if a.Transfer != nil {
		return finishTransfer(ctx, client, o, a, getTo, code, stderr)
	}
	switch n, open := late.arrived(); {
	case n > 0:
		fmt.Fprintf(stderr, "airlock-ssh: standard input had nothing for %s, so none was sent; %d bytes came later and were not sent (action %s); send all input before, or pass -n\n", stdinGrace, n, a.ID)
		return 255
	case open:
		// Nothing was lost yet, but input may still come: say what
		// happened to it.
		fmt.Fprintf(stderr, "airlock-ssh: standard input is a pipe that stayed open with nothing on it, so none was sent (action %s); pass -n to say so and silence this note\n", a.ID)
	}
	return code
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
			fmt.Fprintf(stderr, "airlock-ssh: the command exited %d, but its output did not reach you whole; exiting 255 (--accept-truncation keeps the exit status)\n", *a.ExitCode)
			return 255
		}
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
	return 255
}

// reportAction is --action: the recorded result of an earlier action, as
// the object holds it, waited for if it is still in flight.
func reportAction(ctx context.Context, c *api.Client, o options, stdout, stderr io.Writer) int {
	a, err := c.WaitAction(ctx, o.action, api.Events{})
	switch {
	case err != nil:
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Err.Code == api.CodeNotFound {
			return fail(stderr, "no action %s of this agent: %s", o.action, apiErr.Err.Message)
		}
		return fail(stderr, "action %s: %v", o.action, err)
	case !a.Outcome.Valid():
		return fail(stderr, "action %s is still in flight (%s); ask again later", o.action, a.State)
	}
	return report(o, a, [2]int64{}, false, stdout, stderr)
}

// stoppedBySignal says what became of the action after a signal stopped
// airlock-ssh (and so cancelled the action): what the gateway recorded,
// asked for up to outcomeWait, or that it is not known yet. It never
// claims more than the record says.
func stoppedBySignal(c *api.Client, id string, stderr io.Writer) int {
	if id == "" {
		return fail(stderr, "stopped by a signal before the gateway named the action: if it had taken it, it is cancelled (a reviewer can look it up in the recent actions)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), outcomeWait)
	defer cancel()
	for {
		if a, err := c.Action(ctx, id); err == nil && a.Outcome.Valid() {
			msg := fmt.Sprintf("stopped by a signal: action %s ended %s", id, a.Outcome)
			if a.Termination.Valid() {
				msg += fmt.Sprintf(" (termination: %s)", a.Termination)
			}
			if a.Detail != "" {
				msg += ": " + a.Detail
			}
			return fail(stderr, "%s", msg)
		}
		select {
		case <-ctx.Done():
			return fail(stderr, "stopped by a signal: the gateway is cancelling action %s, and had not recorded its outcome after %s; "+
				"a command that had started may still be running (its outcome: GET /v1/actions/%s, or ask a reviewer)", id, outcomeWait, id)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stdinGrace is how long a pipe on standard input may stay silent before
// airlock-ssh sends no input: some agent harnesses leave one open with
// nothing coming, and a command that reads none must still run.
const stdinGrace = time.Second

// readStdin reads the standard input to send: all of it (at most
// api.MaxStdin bytes), or nothing for a terminal or a pipe that stays
// silent for stdinGrace — then late watches it for input that comes
// after all.
func readStdin(r io.Reader) (in []byte, late *lateInput, err error) {
	tooBig := fmt.Errorf("standard input is over %d bytes, more than airlock sends; pass -n, or move the data another way", api.MaxStdin)
	f, ok := r.(*os.File)
	if !ok {
		b, err := io.ReadAll(io.LimitReader(r, api.MaxStdin+1))
		if len(b) > api.MaxStdin {
			return nil, nil, tooBig
		}
		return b, nil, err
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
		return nil, nil, nil // a terminal: nothing is sent, as ssh -T with a tty would block
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, nil // no standard input at all
	}
	if fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0 {
		b, err := io.ReadAll(io.LimitReader(f, api.MaxStdin+1))
		if len(b) > api.MaxStdin {
			return nil, nil, tooBig
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading standard input: %v", err)
		}
		return b, nil, nil
	}
	// A pipe or a socket: wait for its first bytes, or its end.
	chunks := make(chan []byte, 16)
	done := make(chan error, 1)
	go func() {
		for {
			p := make([]byte, 64<<10)
			n, err := f.Read(p)
			if n > 0 {
				chunks <- p[:n]
			}
			if err != nil {
				close(chunks)
				if err != io.EOF {
					done <- err
				}
				close(done)
				return
			}
		}
	}()
	var buf []byte
	select {
	case c, ok := <-chunks:
		if !ok {
			return nil, nil, <-done // an empty input
		}
		buf = append(buf, c...)
	case <-time.After(stdinGrace):
		return nil, &lateInput{chunks: chunks}, nil
	}
	for c := range chunks {
		if len(buf)+len(c) > api.MaxStdin {
			return nil, nil, tooBig
		}
		buf = append(buf, c...)
	}
	if err := <-done; err != nil {
		return nil, nil, fmt.Errorf("reading standard input: %v", err)
	}
	return buf, nil, nil
}

// lateInput watches a standard input that was silent when the action was
// requested.
type lateInput struct {
	chunks <-chan []byte
}

// arrived is how many bytes came on it since, and whether it is still
// open; nil watches nothing.
func (l *lateInput) arrived() (n int, open bool) {
	if l == nil {
		return 0, false
	}
	for {
		select {
		case c, ok := <-l.chunks:
			if !ok {
				return n, false
			}
			n += len(c)
		default:
			return n, true
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
}

// newLocalFile prepares a get into dest: an existing dest is refused
// unless overwrite (and is then replaced, never written through).
func newLocalFile(dest string, overwrite bool) (*localFile, error) {
	if st, err := os.Lstat(dest); err == nil {
		switch {
		case !overwrite:
			return nil, fmt.Errorf("%s exists; pass --overwrite to replace it", dest)
		case st.IsDir():
			return nil, fmt.Errorf("%s is a directory; name the file to write", dest)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".airlock-*.part")
	if err != nil {
		return nil, err
	}
	return &localFile{dest: dest, tmp: tmp, overwrite: overwrite}, nil
}

// publish gives the temporary file its name: with overwrite by a rename
// (which replaces a file or a link there, never follows it), without by a
// hard link, which fails if something took the name meanwhile.
func (l *localFile) publish() error {
	if err := l.tmp.Sync(); err != nil {
		return err
	}
	if err := l.tmp.Chmod(0o644 &^ fs.FileMode(umask())); err != nil {
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
		return fail(stderr, "fetching the file of action %s: %v; %s was not written", a.ID, err, to.dest)
	}
	if err := to.publish(); err != nil {
		return fail(stderr, "writing %s: %v (the file of action %s was fetched whole and is gone from the gateway)", to.dest, err, a.ID)
	}
	return code
}
