package forcedcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/securefile"
)

// Exit statuses of airlock-action besides the program's own.
const (
	// ExitRefused: the request was refused (unknown verb, invalid
	// argument, malformed command, unusable policy); nothing ran.
	ExitRefused = 126
	// ExitCannotRun: the verb matched but its program could not be
	// started.
	ExitCannotRun = 127
	// ExitTimeout: the verb's timeout passed and every process of it was
	// killed and is gone (as timeout(1) reports a timeout).
	ExitTimeout = 124
	// ExitUnconfirmed: airlock-action stopped the verb (its timeout
	// passed, or the client went away) but could not confirm that every
	// process of it ended; the log line names those still running. The
	// supervisor of a run_as verb (--reap) exits with it too when it
	// cannot confirm.
	ExitUnconfirmed = 125
	// exitSignalBase + N: the program died of signal N (as a shell
	// reports it).
	exitSignalBase = 128
)

// Path is the fixed PATH every program runs with.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// killGrace is how long Serve waits for a killed program's output to
// drain before it stops waiting for it.
const killGrace = 2 * time.Second

// Options configure Serve.
type Options struct {
	// PolicyFile is the policy to load. It must be supplied.
	PolicyFile string
	// Env is airlock-action's environment (os.Environ()): the request is
	// read from SSH_ORIGINAL_COMMAND, sshd's auth info from SSH_USER_AUTH,
	// the client from SSH_CONNECTION, and the verb's allow-listed
	// variables are passed on from it.
	Env []string
	// Stdout and Stderr receive the program's output; Stderr also gets
	// the one-line reason of a refusal. The program's stdin is /dev/null.
	// When Stdout is an *os.File (sshd's pipe or socket), the program's
	// process group is killed as soon as its other end closes.
	Stdout, Stderr io.Writer
	// Stdin is where a built-in put reads the file (os.Stdin); nil reads
	// nothing. Verbs never get it: their programs read /dev/null.
	Stdin io.Reader
	// Log receives the request's Record. When nil, Serve logs to
	// syslog (facility auth, tag airlock-action) when a syslog socket can
	// be reached, and to the policy's log_file when it sets one. A
	// log_file that cannot be opened refuses the request.
	Log Logger
	// Reaper is this airlock-action's path, which sudo runs to supervise
	// a run_as verb (airlock-action --reap); empty means
	// policy.DefaultReaper. sudoers must allow exactly
	// "Reaper --reap -- argv…" (see docs/operators.md).
	Reaper string

	// ownPolicy lets tests that run as an ordinary user serve a policy
	// they own; airlock-action never sets it.
	ownPolicy bool
}

// policyGuard refuses a policy the account serving it could change: the
// file or its directory owned by that (non-root) account, or writable by
// group or others (a sticky directory excepted). An agent's account must
// not be able to widen its own policy.
func policyGuard(path string, uid int) error { return fileGuard("policy", path, uid) }

// reaperGuard refuses a run_as supervisor the account could replace: sudo
// runs it as another user.
func reaperGuard(path string, uid int) error { return fileGuard("airlock-action", path, uid) }

// fileGuard refuses a file (what: "policy") the account uid could change,
// or put another in its place: securefile.CheckUnchangeable, worded for
// the person who installs the policy.
func fileGuard(what, path string, uid int) error {
	err := securefile.CheckUnchangeable(path, uid)
	var se *securefile.Error
	if !errors.As(err, &se) {
		return err // Load reports a missing file
	}
	place := se.Path
	if place != path {
		abs, _ := filepath.Abs(path)
		real, _ := filepath.EvalSymlinks(path)
		if place != abs && place != real {
			place = "its directory " + place
		}
	}
	if se.Problem == securefile.WrongOwner {
		return fmt.Errorf("%s %s: %s belongs to this account (uid %d), which could change it; give it to root (chown root %s)", what, path, place, uid, se.Path)
	}
	return fmt.Errorf("%s %s: %s is writable by group or others (mode %04o); chmod go-w %s", what, path, place, se.Mode.Perm(), se.Path)
}

// Serve handles one request as sshd's forced command and returns the exit
// status for airlock-action to exit with: the program's, or ExitRefused,
// ExitCannotRun, ExitTimeout, or 128+N for a program killed by signal N.
// ctx bounds nothing on its own; cancelling it kills the program's process
// group as a timeout would.
func Serve(ctx context.Context, o Options) int {
	rec := &Record{Decision: Refuse, Exit: ExitRefused}
	rec.Command, _ = lookupEnv(o.Env, "SSH_ORIGINAL_COMMAND")
	rec.Client = client(o.Env)
	if f, ok := lookupEnv(o.Env, "SSH_USER_AUTH"); ok {
		rec.Auth = readAuthInfo(f)
	}

	log := o.Log
	pol, err := policy.Load(o.PolicyFile)
	if err == nil && !o.ownPolicy {
		if gerr := policyGuard(o.PolicyFile, os.Geteuid()); gerr != nil {
			pol, err = nil, gerr // refused, and logged where syslog reaches
		}
	}
	if log == nil {
		file := ""
		if pol != nil {
			file = pol.LogFile
		}
		l, lerr := openLog(file)
		if lerr != nil {
			// Fail closed: the operator asked for a file log we cannot
			// write. Syslog still gets the line when it is there.
			l, _ = openLog("")
			err = errors.Join(err, lerr)
		}
		defer closeLog(l)
		log = l
	}
	finish := func() int {
		switch {
		case rec.Decision == Refuse:
			fmt.Fprintf(o.Stderr, "airlock-action: refused: %s\n", rec.Reason)
		case rec.Exit == ExitCannotRun:
			fmt.Fprintf(o.Stderr, "airlock-action: cannot run: %s\n", rec.Reason)
		}
		log.Log(rec) // a log that fails now cannot undo what ran
		return rec.Exit
	}
	if err != nil {
		rec.Reason = oneLine(err)
		return finish()
	}
	if _, ok := lookupEnv(o.Env, "SSH_ORIGINAL_COMMAND"); !ok {
		rec.Reason = "no command: this key only runs commands allowed by the policy, never a login shell"
		return finish()
	}
	if o.Reaper != "" {
		pol.Reaper = o.Reaper
	}
	// The gateway's mark comes first: what follows it is the request.
	command, readOnly := policy.CutReadOnly(rec.Command)
	rec.ReadOnly = readOnly
	if tr, err := pol.MatchTransfer(command, true); tr != nil || err != nil {
		if readOnly {
			rec.Reason = "a built-in put or get is never marked read-only"
			return finish()
		}
		if err != nil {
			rec.Reason = oneLine(err)
			return finish()
		}
		serveTransfer(tr, pol.Transfer, o, rec)
		return finish()
	}
	plan, err := pol.Match(command)
	if err == nil && readOnly && plan.Verb.RunAs != "" {
		err = readOnlyRunAs(plan.Verb)
	}
	if err == nil && plan.Verb.RunAs != "" && !o.ownPolicy {
		if gerr := reaperGuard(pol.Reaper, os.Geteuid()); gerr != nil {
			err = fmt.Errorf("verb %s runs as %s: %w", plan.Verb.Name, plan.Verb.RunAs, gerr)
		}
	}
	if err != nil {
		rec.Reason = oneLine(err)
		return finish()
	}
	rec.Decision, rec.Verb, rec.Args, rec.Command = Allow, plan.Verb.Name, plan.Args, ""
	run(ctx, plan, o, rec)
	return finish()
}

// supervisor is the airlock-action that supervises a verb that runs as
// the account: Reaper, else this program.
func (o Options) supervisor() string {
	if o.Reaper != "" {
		return o.Reaper
	}
	p, _ := os.Executable()
	return p
}

// run executes plan and fills in rec's exit, timeout, signal and duration.
//
// Every verb runs under a supervisor, airlock-action --reap (through sudo
// for a run_as verb, as the verb's user): the child subreaper of what the
// program starts, so that a stop reaches every process of the verb, even
// one that left the program's process group and lost its parent.
func run(ctx context.Context, plan *policy.Plan, o Options, rec *Record) {
	argv := plan.Argv
	runAs := plan.Verb.RunAs != ""
	if !runAs {
		// Said here rather than by the supervisor, in the record.
		if err := unix.Access(argv[0], unix.X_OK); err != nil {
			rec.Exit = ExitCannotRun
			rec.Reason = oneLine(&os.PathError{Op: "exec", Path: argv[0], Err: err})
			return
		}
		reap := []string{o.supervisor(), "--reap", "--"}
		if rec.ReadOnly {
			reap = []string{o.supervisor(), "--reap", readOnlyFlag, "--"}
		}
		argv = append(reap, argv...)
	}
	cmd := &exec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    environment(plan.Env, o.Env),
		Dir:    plan.Dir,
		Stdout: o.Stdout,
		Stderr: o.Stderr,
		// Its own process group, so that a signal from sshd reaches
		// everything the program started.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   killGrace,
	}
	ctx, cancel := context.WithTimeout(ctx, plan.Timeout)
	defer cancel()

	// sshd delivers SIGHUP/SIGTERM to us when the session ends or the
	// gateway asks; pass them on to the whole group.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	start := time.Now()
	var startErr error
	if rec.ReadOnly {
		startErr = startConfined(cmd)
	} else {
		startErr = cmd.Start()
	}
	var ce *confineError
	switch {
	case errors.As(startErr, &ce):
		rec.Decision, rec.Exit, rec.Reason = Refuse, ExitRefused, oneLine(startErr)
		return
	case startErr != nil:
		rec.Exit = ExitCannotRun
		rec.Reason = oneLine(startErr)
		return
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	gone := make(chan struct{})
	if f, ok := o.Stdout.(*os.File); ok {
		stop := make(chan struct{})
		watched := make(chan struct{})
		go func() { defer close(watched); watchPeer(f, stop, gone) }()
		defer func() { close(stop); <-watched }()
	}
	tree := &verbTree{pid: pgid, runAs: runAs, done: done}
	var err error
	stopped := func() {
		var left []proctree.Proc
		err, rec.Termination, left = tree.stop()
		rec.Left = describeLeft(left)
	}
wait:
	for {
		select {
		case err = <-done:
			break wait
		case s := <-sigs:
			// To the group: for run_as that is sudo, which passes it on
			// to the supervisor, which passes it on to the program's group.
			syscall.Kill(-pgid, s.(syscall.Signal))
		case <-gone:
			rec.ClientGone = true
			stopped()
			break wait
		case <-ctx.Done():
			select {
			case err = <-done: // it ended by itself as time ran out
				break wait
			default:
			}
			rec.TimedOut = true
			stopped()
			break wait
		}
	}
	rec.Duration = time.Since(start)
	// Whatever is left in the group goes with the program: a verb's
	// work ends when its program does. (The supervisor has done the same
	// for every process under it, in the group or not.)
	syscall.Kill(-pgid, syscall.SIGKILL)

	var ws syscall.WaitStatus
	if cmd.ProcessState != nil { // nil: it did not end even when killed
		ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	if msg := conclude(rec, ws, plan); msg != "" {
		fmt.Fprintln(o.Stderr, msg)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		rec.Reason = oneLine(err)
	}
}

// conclude sets rec's exit status and signal from how the program (or
// sudo) ended, ws, and how airlock-action stopped it, and returns the line
// for stderr ("" for none): a verb stopped with its end unconfirmed exits
// ExitUnconfirmed, one that timed out ExitTimeout, any other as its
// program did (128+N for signal N).
func conclude(rec *Record, ws syscall.WaitStatus, plan *policy.Plan) string {
	switch code := ws.ExitStatus(); {
	case ws.Signaled():
		rec.Signal = signalName(ws.Signal())
		rec.Exit = exitSignalBase + int(ws.Signal())
	case rec.Termination == Confirmed && code > exitSignalBase && code <= exitSignalBase+64:
		// The supervisor of a stopped verb exits 128+N, never by the
		// signal (see Reap).
		rec.Signal = signalName(syscall.Signal(code - exitSignalBase))
		rec.Exit = code
	default:
		rec.Exit = code
	}
	switch {
	case rec.Termination == Unconfirmed:
		rec.Exit = ExitUnconfirmed
	case rec.TimedOut:
		rec.Exit = ExitTimeout
	}
	switch {
	case rec.TimedOut && rec.Termination == Unconfirmed:
		return fmt.Sprintf("airlock-action: verb %s passed its timeout (%s) and was stopped, but its end is unconfirmed: %s (exit %d)", plan.Verb.Name, plan.Timeout, leftSentence(rec.Left), ExitUnconfirmed)
	case rec.TimedOut:
		return fmt.Sprintf("airlock-action: verb %s passed its timeout (%s); every process of it was killed (exit %d)", plan.Verb.Name, plan.Timeout, ExitTimeout)
	}
	return ""
}

// peerPoll is how often watchPeer looks at the output channel.
const peerPoll = 250 * time.Millisecond

// watchPeer closes gone when the reading end of f — sshd's end of the
// session's stdout — is closed: the client went away (the gateway closes
// the connection when an action times out or is cancelled). sshd refuses
// "signal" requests for forced-command sessions, so this is how the end of
// an action reaches the program. poll(2) reports POLLERR (pipe) or POLLHUP
// (socket) for it whatever events are asked for. It returns when stop is
// closed.
func watchPeer(f *os.File, stop <-chan struct{}, gone chan<- struct{}) {
	fds := []unix.PollFd{{Fd: int32(f.Fd())}}
	for {
		n, err := unix.Poll(fds, int(peerPoll/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			close(gone)
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// environment is the program's environment: the fixed PATH, the
// allow-listed names that are set in env, and the fixed non-interactive
// set (withBatchEnv), whose values no allow-listed name replaces.
func environment(names, env []string) []string {
	out := []string{"PATH=" + Path}
	for _, n := range names {
		if v, ok := lookupEnv(env, n); ok {
			out = append(out, n+"="+v)
		}
	}
	return withBatchEnv(out)
}

// lookupEnv finds name in env; like getenv(3), the first entry wins.
func lookupEnv(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// client is "ADDRESS PORT" of the client, from SSH_CONNECTION ("client
// port server port").
func client(env []string) string {
	c, _ := lookupEnv(env, "SSH_CONNECTION")
	f := strings.Fields(c)
	if len(f) < 2 {
		return ""
	}
	return f[0] + " " + f[1]
}

// signalName is the signal's name without "SIG" ("KILL", "TERM"), as
// sshexec reports exit-signal names.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(s))
}

// Explain writes what command would run — the argv with each element
// quoted, the working directory, the timeout and the environment — or why
// it would be refused. It returns 0 when the command would run and
// ExitRefused otherwise. Nothing is run and nothing is logged.
func Explain(pol *policy.Policy, command string, w io.Writer) int {
	command, readOnly := policy.CutReadOnly(command)
	if tr, err := pol.MatchTransfer(command, true); tr != nil || err != nil {
		if readOnly {
			err = errors.New("a built-in put or get is never marked read-only")
		}
		if err != nil {
			fmt.Fprintf(w, "refused (exit %d): %s\n", ExitRefused, oneLine(err))
			return ExitRefused
		}
		if tr.Put {
			fmt.Fprintf(w, "built-in put: %d bytes with SHA-256 %x from standard input to %s, mode %04o, overwrite %v\n", tr.Size, tr.SHA256, tr.Path, tr.Mode, tr.Overwrite)
		} else {
			fmt.Fprintf(w, "built-in get: %s to standard output\n", tr.Path)
		}
		return 0
	}
	plan, err := pol.Match(command)
	if err == nil && readOnly && plan.Verb.RunAs != "" {
		err = readOnlyRunAs(plan.Verb)
	}
	if err != nil {
		fmt.Fprintf(w, "refused (exit %d): %s\n", ExitRefused, oneLine(err))
		return ExitRefused
	}
	q := make([]string, len(plan.Argv))
	for i, a := range plan.Argv {
		q[i] = policy.Quote(a)
	}
	dir := plan.Dir
	if dir == "" {
		dir = "(the account's home directory, as sshd leaves it)"
	}
	env := "PATH=" + Path + " " + batchEnvWords()
	if len(plan.Env) > 0 {
		env += " and, when set, " + strings.Join(plan.Env, " ")
	}
	fmt.Fprintf(w, "verb:    %s (%s:%d)\n", plan.Verb.Name, pol.File, plan.Verb.Line)
	fmt.Fprintf(w, "argv:    %s\n", strings.Join(q, " "))
	fmt.Fprintf(w, "dir:     %s\n", dir)
	fmt.Fprintf(w, "timeout: %s (then every process of it is killed: exit %d, or %d when that cannot be confirmed)\n", plan.Timeout, ExitTimeout, ExitUnconfirmed)
	fmt.Fprintf(w, "env:     %s\n", env)
	if readOnly {
		fmt.Fprintf(w, "marked:  %s: every mount read-only and no_new_privs, in namespaces of its own; refused (exit %d) when the kernel cannot do that\n", policy.ReadOnlyMark, ExitRefused)
	}
	return 0
}

// Check loads the policy at path and writes every problem, one per line as
// FILE:LINE: MESSAGE, or a summary and warnings (a program that does not
// exist or is not executable here) when it is valid, and for each run_as
// verb the sudoers rule it needs. reaper is this airlock-action's path
// (empty: policy.DefaultReaper). It returns 0 for a valid policy and 1
// otherwise.
func Check(path, reaper string, w io.Writer) int {
	pol, err := policy.Load(path)
	if err != nil {
		var pe *policy.Error
		if errors.As(err, &pe) {
			for _, p := range pe.Problems {
				fmt.Fprintln(w, p)
			}
		} else {
			fmt.Fprintln(w, err)
		}
		return 1
	}
	if reaper != "" {
		pol.Reaper = reaper
	}
	runAs := false
	for _, v := range pol.Verbs {
		progs := []string{v.Argv[0]}
		if v.RunAs != "" {
			progs, runAs = append(progs, policy.Sudo), true
		}
		for _, prog := range progs {
			if fi, err := os.Stat(prog); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				fmt.Fprintf(w, "%s:%d: warning: verb %s: %s is not an executable file here\n", pol.File, v.Line, v.Name, prog)
			}
		}
	}
	if err := policyGuard(path, os.Geteuid()); err != nil {
		fmt.Fprintf(w, "%s\n", err)
		return 1
	}
	if runAs {
		if err := reaperGuard(pol.Reaper, os.Geteuid()); err != nil {
			fmt.Fprintf(w, "%s: run_as verbs: %s\n", pol.File, err)
			return 1
		}
	}
	if pol.LogFile != "" {
		// Serve refuses every request when it cannot open its log.
		target := pol.LogFile
		if _, err := os.Stat(target); err != nil {
			target = filepath.Dir(target)
		}
		if err := unix.Access(target, unix.W_OK); err != nil {
			fmt.Fprintf(w, "%s: %v; every request would be refused (run --check as the account the key logs in as)\n", pol.File, logFileError(pol.LogFile, err))
			return 1
		}
	}
	for _, v := range pol.Verbs {
		for _, p := range v.Params {
			if p.Kind == policy.PathUnder {
				if _, err := os.Stat(p.Under); err != nil {
					fmt.Fprintf(w, "%s:%d: warning: verb %s: path_under %s does not exist here: every path is refused until it does\n", pol.File, v.Line, v.Name, p.Under)
				}
			}
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
		fmt.Fprintf(w, "%s: warning: owned by uid %d, not root: if that is the airlock account, it can change its own policy (airlock-action refuses to serve it then)\n", pol.File, fi.Sys().(*syscall.Stat_t).Uid)
	}
	if runAs {
		fmt.Fprintf(w, "%s: run_as verbs run through sudo, supervised by %s; sudoers must allow (as the account the key logs in as):\n", pol.File, pol.Reaper)
		for _, v := range pol.Verbs {
			if v.RunAs != "" {
				fmt.Fprintf(w, "  (%s) NOPASSWD: %s\n", v.RunAs, sudoersCommand(pol.Reaper, v))
			}
		}
	}
	fmt.Fprintf(w, "%s: ok, %d verbs\n", pol.File, len(pol.Verbs))
	return 0
}

// sudoersCommand is the command a sudoers rule must allow for run_as verb
// v: the supervisor and the verb's argv, each parameter a wildcard (the
// policy has checked the arguments before sudo sees them), with the
// characters sudoers treats specially escaped.
func sudoersCommand(reaper string, v *policy.Verb) string {
	esc := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`, `=`, `\=`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`, ` `, `\ `)
	words := append([]string{esc.Replace(reaper), "--reap", "--"}, v.ArgvWith(esc.Replace, func(string) string { return "*" })...)
	return strings.Join(words, " ")
}
