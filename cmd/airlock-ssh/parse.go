package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockgw/airlock/gateway/api"
)

const usage = `usage: airlock-ssh [flags] [account@]target [flags] [--] command [args...]
       airlock-ssh [flags] --put LOCAL [account@]target:REMOTE
       airlock-ssh [flags] --get [account@]target:REMOTE LOCAL
       airlock-ssh [--json] [--accept-truncation] --action ID

Runs one command on a target configured in the airlock gateway, after the
approval the gateway's policy requires, over a fresh SSH connection the
gateway makes.

standard input: read whole before the request and sent to the command (the
reviewer sees its size, digest and, when short text, the text; the
account's max_stdin bounds it, 1 MiB by default): a file, a closed pipe, a
pipe with bytes on it (read to its end). Nothing is sent, and nothing read,
when it is a terminal, with -n, or when it is a pipe or socket still open
with nothing on it: at once when it is also the standard input of the
process that started airlock-ssh (an agent harness's shell), else after
100 ms (a pipeline's writer writes at once). A note says no input was sent
(-n silences it); airlock-ssh watches that pipe without reading it: bytes
that arrive on it stay in the pipe, and airlock-ssh says so and fails the
call (exit 255); when they arrive before the command starts (while a
reviewer decides), it cancels the action rather than run the command
without them. To be sure input is sent, give it before airlock-ssh
starts (< FILE, a heredoc).

flags (before the target, or after it until the command begins or a --,
as ssh reads them: airlock-ssh box -l ops -- id; --put, --get and --action
only before it; a command that begins with - goes after a -- that follows
the target):
  -l ACCOUNT      remote account (default: the target's default account)
  -n              send no standard input, and do not look at it (as ssh -n)
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
                  to the gateway, or a signal; another gateway replica on
                  this host answers too (--socket)
  --json          print the action object as JSON instead of the output
  --accept-truncation
                  exit with the remote status even when the output was cut
                  (by the gateway's output cap or a broken stream); the cut
                  is still reported on stderr
  --socket PATH   gateway socket (default: $AIRLOCK_SOCKET, else the standard path)
  --exit-codes=ssh|detailed
                  ssh (the default): the remote exit status, else 255;
                  detailed: a code of its own for each outcome (below);
                  also $AIRLOCK_EXIT_CODES
  -T, -x, -a      accepted and ignored: no terminal, X11 or agent forwarding
                  is ever asked for. ssh's other flags are refused with why
                  and what to do instead
  --version       print the version (and the commit it was built from)

output: stdout and stderr stream as the command writes them. An account
whose output policy is "tail" or "none" returns its output at the end: the
last 64 KiB of each stream, or nothing; a line on stderr says what was
withheld. Whenever less than the whole output reached you (the gateway's
output cap, a stream cut), a line on stderr says so:
  airlock-ssh: stdout truncated: delivered N of M bytes (action ID)
The gateway keeps each stream whole up to the account's max_output (64 MiB
by default; GET /v1/targets lists it as max_output_bytes) for 24 hours, to
read back in pages; past it only the last 64 KiB is kept, and the action
says how many bytes were dropped.

waiting: the gateway sends a heartbeat at least every 15 s; airlock-ssh gives
up on one silent for 45 s ($AIRLOCK_SILENCE sets another limit, at least
1s), and, once the action is connecting, waits no longer than --timeout,
the 2 s kill grace and that silence: exit 255, "the gateway stopped
answering", with the action id. A wait for a reviewer ends when the
gateway's approval timeout does: the line that says airlock-ssh waits
names the approval, how long the reviewer has and until when. Before sending anything, airlock-ssh
checks that the socket's directory and control.json belong to root, you
or a system account and that no one else can change them.

exit status: the remote exit status; 255 when the command did not run to an
exit status, or when its output was cut (unless --accept-truncation), or
when input came too late; the reason is printed on stderr. A remote exit
255 looks the same: --exit-codes=detailed tells them apart, and never
uses 200-254 for a remote status:
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

// options are what the command line asks for.
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
	// codes is --exit-codes (codesSet), else $AIRLOCK_EXIT_CODES.
	codes    exitCodes
	codesSet bool
}

// usageError is a command line parse refuses. Its message is printed as
// it is; kind says what was wrong without reading it.
type usageError struct {
	kind usageKind
	// flag is the flag at fault (refusedFlag, unknownFlag, missingValue).
	flag string
	msg  string
}

func (e *usageError) Error() string { return e.msg }

// usageKind is what was wrong with a command line.
type usageKind uint8

const (
	// refusedFlag: one of ssh's flags that would open what airlock keeps
	// shut (see refused).
	refusedFlag usageKind = iota + 1
	// unknownFlag: a flag neither airlock-ssh nor ssh has.
	unknownFlag
	// missingValue: a flag without its value.
	missingValue
	// badValue: a value out of bounds or of the wrong form.
	badValue
	// badCombination: flags, or a flag and the operands, that do not go
	// together.
	badCombination
	// missingOperand: no target, an empty one, or no command.
	missingOperand
)

func usagef(kind usageKind, flag, format string, args ...any) error {
	return &usageError{kind: kind, flag: flag, msg: fmt.Sprintf(format, args...)}
}

// errHelp and errVersion are --help and --version: run prints and exits 0.
var (
	errHelp    = errors.New("help")
	errVersion = errors.New("version")
)

// parse reads the command line: flags, then [account@]target and the
// command, or a transfer's paths, as usage says. As ssh does, flags may
// also follow the target, until the command begins or a "--".
func parse(args []string) (options, error) {
	var o options
	c := &argv{args: args}
	ended, err := o.flags(c)
	if err != nil {
		return o, err
	}
	err = o.operands(c, ended)
	return o, err
}

// flags reads flags from the current argument on, up to the first that
// is not one (left current) or a "--" (passed; ended is then true).
func (o *options) flags(c *argv) (ended bool, err error) {
	for ; c.i < len(c.args); c.i++ {
		a := c.args[c.i]
		if a == "--" {
			c.i++
			return true, nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return false, nil
		}
		if err := o.flag(c, a); err != nil {
			return false, err
		}
	}
	return false, nil
}

// argv is the command line and the argument parse is at.
type argv struct {
	args []string
	i    int
	// afterTarget: the flags being read follow the target.
	afterTarget bool
}

// value returns the value of flag name at the current argument:
// "--name=V" for a long flag, "-nV" for a short one, or else the next
// argument, which it moves past.
func (c *argv) value(name string) (string, error) {
	a := c.args[c.i]
	if v, ok := strings.CutPrefix(a, name+"="); ok && strings.HasPrefix(name, "--") {
		return v, nil
	}
	if len(a) > len(name) && !strings.HasPrefix(name, "--") {
		return a[len(name):], nil // -lroot
	}
	if c.i+1 >= len(c.args) {
		return "", usagef(missingValue, name, "%s needs a value", name)
	}
	c.i++
	return c.args[c.i], nil
}

// isLong reports whether a is the long flag name, alone or as name=V.
func isLong(a, name string) bool { return a == name || strings.HasPrefix(a, name+"=") }

// flag reads flag a (and its value) into o.
func (o *options) flag(c *argv, a string) error {
	var err error
	if name, _, _ := strings.Cut(a, "="); c.afterTarget && (name == "--put" || name == "--get" || name == "--action") {
		return usagef(badCombination, name, "%s goes before the target: it takes the place of a target and command (see airlock-ssh --help)", name)
	}
	switch {
	case a == "-h" || a == "--help":
		return errHelp
	case a == "--version":
		return errVersion
	case a == "--json":
		o.json = true
	case a == "--accept-truncation":
		o.acceptCut = true
	case a == "-n":
		o.noStdin = true
	case isLong(a, "--action"):
		o.action, err = c.value("--action")
	case isLong(a, "--reason"):
		if o.reason, err = c.value("--reason"); err != nil {
			return err
		}
		if n := utf8.RuneCountInString(o.reason); n > api.MaxReason {
			return usagef(badValue, "--reason", "--reason is %d characters, over the limit of %d", n, api.MaxReason)
		}
	case isLong(a, "--secret"):
		if o.secret, err = c.value("--secret"); err != nil {
			return err
		}
		if o.secret == "" {
			return usagef(badValue, "--secret", "--secret needs the name of a secret the gateway holds")
		}
	case a == "--put" || a == "--get":
		return o.transfer(c, a)
	case isLong(a, "--mode"):
		o.mode, err = c.value("--mode")
	case a == "--overwrite":
		o.overwrite = true
	case a == "-T" || a == "-x" || a == "-a":
		// ssh's "no terminal", "no X11", "no agent forwarding": what
		// every action is anyway.
	case a == "-l" || strings.HasPrefix(a, "-l") && len(a) > 2 && !strings.HasPrefix(a, "--"):
		o.account, err = c.value("-l")
	case isLong(a, "--timeout"):
		var v string
		if v, err = c.value("--timeout"); err != nil {
			return err
		}
		o.timeout, err = parseTimeout(v)
	case isLong(a, "--socket"):
		o.socket, err = c.value("--socket")
	case isLong(a, "--exit-codes"):
		var v string
		if v, err = c.value("--exit-codes"); err != nil {
			return err
		}
		o.codes, err = parseExitCodes(v, "--exit-codes")
		o.codesSet = true
	case len(a) > 2 && a[1] != '-':
		return o.cluster(c, a)
	default:
		return flagError(c, a, a)
	}
	return err
}

// transfer reads --put LOCAL [account@]target:REMOTE or --get
// [account@]target:REMOTE LOCAL (a is the flag) into o.
func (o *options) transfer(c *argv, a string) error {
	if c.i+2 >= len(c.args) {
		return usagef(missingValue, a, "%s needs two paths: see airlock-ssh --help", a)
	}
	if o.put || o.get {
		return usagef(badCombination, a, "one transfer per action: --put or --get, once")
	}
	src, dst := c.args[c.i+1], c.args[c.i+2]
	c.i += 2
	o.put, o.get = a == "--put", a == "--get"
	dest := dst
	o.local = src
	if o.get {
		dest, o.local = src, dst
	}
	target, remote, ok := strings.Cut(dest, ":")
	if !ok || remote == "" {
		return usagef(badValue, a, "%s: %q is not [account@]target:REMOTE", a, dest)
	}
	if o.local == "" {
		return usagef(badValue, a, "%s: the local path is empty", a)
	}
	o.target, o.remote = target, remote
	return nil
}

// operands reads what follows the flags: [account@]target, flags after
// it unless a "--" ended them (ended), and the command; or nothing after
// --action or a transfer.
func (o *options) operands(c *argv, ended bool) error {
	rest := c.args[c.i:]
	if o.action != "" {
		if len(rest) > 0 || o.put || o.get {
			return usagef(badCombination, "--action", "--action takes no target, command or transfer: it reports an action that was already requested")
		}
		return nil
	}
	if o.mode != "" && !o.put {
		return usagef(badCombination, "--mode", "--mode goes with --put")
	}
	if o.overwrite && !o.put && !o.get {
		return usagef(badCombination, "--overwrite", "--overwrite goes with --put or --get")
	}
	if o.put || o.get {
		if len(rest) > 0 {
			return usagef(badCombination, "", "a transfer takes no command")
		}
		if err := o.setTarget(o.target); err != nil {
			return err
		}
		if o.secret != "" {
			return usagef(badCombination, "--secret", "--secret goes with a command, not a transfer")
		}
		return nil
	}
	if len(rest) == 0 {
		return usagef(missingOperand, "", "no target given (see airlock-ssh --help)")
	}
	if err := o.setTarget(rest[0]); err != nil {
		return err
	}
	c.i++
	return o.readCommand(c, ended)
}

// readCommand reads the command that follows the target: after flags, as
// ssh reads them there, unless a "--" before the target ended them
// (ended). A first word that reads as a flag is sent only after a "--"
// right before it; elsewhere it is refused, never sent by mistake.
func (o *options) readCommand(c *argv, ended bool) error {
	explicit := false // a "--" directly before the command
	if !ended {
		c.afterTarget = true
		account := o.account
		var err error
		if explicit, err = o.flags(c); err != nil {
			return err
		}
		switch {
		case account != "" && o.account != account:
			return usagef(badCombination, "-l", "account given twice: %s and -l %s", account, o.account)
		case o.mode != "":
			return usagef(badCombination, "--mode", "--mode goes with --put")
		case o.overwrite:
			return usagef(badCombination, "--overwrite", "--overwrite goes with --put or --get")
		}
	} else if c.i < len(c.args) && c.args[c.i] == "--" {
		c.i++
		explicit = true
	}
	rest := c.args[c.i:]
	if len(rest) == 0 {
		return usagef(missingOperand, "", "no command given: airlock runs one command per action, never an interactive shell")
	}
	if strings.HasPrefix(rest[0], "-") && !explicit {
		return usagef(badCombination, rest[0], "the command would begin with %s, which reads as a flag: flags ended at the -- before the target; put flags before that --, and a command that begins with - after a -- that follows the target: airlock-ssh [flags] TARGET -- COMMAND", rest[0])
	}
	// As ssh does: the arguments are joined with single spaces.
	o.command = strings.Join(rest, " ")
	return nil
}

// setTarget takes [account@]target; an account there and another with -l
// is an error.
func (o *options) setTarget(dest string) error {
	if user, host, ok := strings.Cut(dest, "@"); ok {
		if o.account != "" && o.account != user {
			return usagef(badCombination, "-l", "account given twice: -l %s and %s@", o.account, user)
		}
		o.account, dest = user, host
	}
	if dest == "" {
		return usagef(missingOperand, "", "empty target")
	}
	o.target = dest
	return nil
}

// parseTimeout reads --timeout: whole seconds or a duration, at least 1s.
func parseTimeout(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, usagef(badValue, "--timeout", "--timeout %q: give whole seconds (30) or a duration (30s, 5m), at least 1s", v)
	}
	return d, nil
}
