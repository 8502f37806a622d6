package forcedcmd

import (
	"errors"
	"fmt"
	"io/fs"
	"log/syslog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/deploy/securefile"
)

// Decision is what became of a request. The names are part of the log
// format; append only, never rename.
type Decision uint8

// The decisions.
const (
	// Allow: the request matched a verb and its program was started (or
	// failed to start).
	Allow Decision = iota + 1
	// Refuse: the request was refused before anything ran.
	Refuse
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Record is one request, as logged.
type Record struct {
	Decision Decision
	// Verb and Args are the matched verb and its arguments; for a refused
	// request they are empty and Command holds the request as received.
	Verb    string
	Args    []string
	Command string
	// Reason says why a request was refused, or why an allowed program
	// could not be started.
	Reason string
	// Exit is the status airlock-action exits with.
	Exit int
	// TimedOut is set when the verb's timeout killed the program; Signal
	// names the signal that ended it ("KILL"), if one did.
	TimedOut bool
	Signal   string
	// ClientGone is set when the client closed the session while the
	// program ran, and airlock-action stopped the verb.
	ClientGone bool
	// Termination says, for a verb airlock-action stopped, whether its
	// end is confirmed; Left names the processes that still ran.
	Termination Termination
	Left        []string
	// Client is the client's address and port from SSH_CONNECTION.
	Client string
	// Auth is what sshd says authenticated the session (ExposeAuthInfo).
	Auth AuthInfo
	// Duration is how long the program ran.
	Duration time.Duration
	// ReadOnly is set for a request marked read-only
	// (policy.ReadOnlyMark): its verb runs with every mount read-only.
	ReadOnly bool
}

// maxLoggedCommand bounds how much of a refused request is logged.
const maxLoggedCommand = 512

// String formats the record as one line of key=value pairs. Every value a
// client chose is quoted with strconv.QuoteToASCII, so no request can break
// the line or hide characters in it.
func (r *Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision=%s", r.Decision)
	if r.ReadOnly {
		b.WriteString(" read_only=true")
	}
	if r.Verb != "" {
		fmt.Fprintf(&b, " verb=%s args=[", strconv.QuoteToASCII(r.Verb))
		for i, a := range r.Args {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.QuoteToASCII(a))
		}
		b.WriteByte(']')
	} else {
		c := r.Command
		if len(c) > maxLoggedCommand {
			c = fmt.Sprintf("%s…(%d bytes)", c[:maxLoggedCommand], len(c))
		}
		fmt.Fprintf(&b, " command=%s", strconv.QuoteToASCII(c))
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", strconv.QuoteToASCII(r.Reason))
	}
	fmt.Fprintf(&b, " exit=%d", r.Exit)
	if r.TimedOut {
		b.WriteString(" timeout=true")
	}
	if r.ClientGone {
		b.WriteString(" client_gone=true")
	}
	if r.Signal != "" {
		fmt.Fprintf(&b, " signal=%s", r.Signal)
	}
	if r.Termination != NotStopped {
		fmt.Fprintf(&b, " termination=%s", r.Termination)
	}
	if len(r.Left) > 0 {
		b.WriteString(" left=[")
		for i, l := range r.Left {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.QuoteToASCII(l))
		}
		b.WriteByte(']')
	}
	if r.Decision == Allow {
		fmt.Fprintf(&b, " duration=%s", r.Duration.Round(time.Millisecond))
	}
	if r.Auth.KeyID != "" || r.Auth.Certificate {
		fmt.Fprintf(&b, " key_id=%s serial=%d", strconv.QuoteToASCII(r.Auth.KeyID), r.Auth.Serial)
	}
	if r.Auth.Fingerprint != "" {
		fmt.Fprintf(&b, " key=%s", r.Auth.Fingerprint)
	}
	if r.Client != "" {
		fmt.Fprintf(&b, " client=%s", strconv.QuoteToASCII(r.Client))
	}
	return b.String()
}

// Logger receives one Record per request.
type Logger interface {
	Log(r *Record) error
}

// openLog returns the logger Serve uses by default: syslog (facility auth,
// tag "airlock-action") when a syslog socket can be reached, and the file
// when file is not empty, appended to with one write per line. A missing
// syslog socket is not an error (containers and tests often have none); a
// log file that cannot be opened is.
func openLog(file string) (Logger, error) {
	var ls multiLogger
	if w, err := syslog.New(syslog.LOG_AUTH|syslog.LOG_INFO, "airlock-action"); err == nil {
		ls = append(ls, &syslogLogger{w: w})
	}
	if file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			ls.close()
			return nil, logFileError(file, err)
		}
		ls = append(ls, &fileLogger{f: f})
	}
	return ls, nil
}

// logFileError says why this account cannot append to the policy's
// log_file (err is what opening it said), and what fixes it for this
// install: most often another account that uses the same policy created
// the file, and one account cannot append to the file of another.
func logFileError(file string, err error) error {
	me := os.Geteuid()
	account := securefile.UserName(me)
	fi, serr := os.Stat(file)
	switch {
	case serr == nil && errors.Is(err, fs.ErrPermission):
		owner, _ := securefile.Owner(fi)
		if owner != me && owner != 0 {
			return fmt.Errorf("log_file %s cannot be written by this account, %s: it belongs to %s with mode %04o, another account that uses this policy and created it first; one log_file cannot serve two accounts unless both may write it; "+
				"fix: give each account a policy with its own log_file, or let them share it through a group they are both in: chgrp GROUP %s && chmod 0660 %s",
				file, account, securefile.UserName(owner), fi.Mode().Perm(), file, file)
		}
		return fmt.Errorf("log_file %s cannot be written by this account, %s: it belongs to %s with mode %04o; fix: chown %s %s (or, shared by several accounts, chgrp GROUP %s && chmod 0660 %s)",
			file, account, securefile.UserName(owner), fi.Mode().Perm(), securefile.AccountName(me), file, file, file)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("log_file %s cannot be created: its directory %s does not exist; fix: mkdir -p %s && install -m 0640 -o %s /dev/null %s",
			file, filepath.Dir(file), filepath.Dir(file), securefile.AccountName(me), file)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("log_file %s cannot be created by this account, %s: its directory %s does not let it; fix: create the file for the account: install -m 0640 -o %s /dev/null %s",
			file, account, filepath.Dir(file), securefile.AccountName(me), file)
	}
	return fmt.Errorf("log_file %s: %w", file, err)
}

// closeLog releases what openLog opened.
func closeLog(l Logger) {
	if m, ok := l.(multiLogger); ok {
		m.close()
	}
}

type multiLogger []Logger

func (m multiLogger) Log(r *Record) error {
	var errs []error
	for _, l := range m {
		errs = append(errs, l.Log(r))
	}
	return errors.Join(errs...)
}

func (m multiLogger) close() {
	for _, l := range m {
		switch l := l.(type) {
		case *syslogLogger:
			l.w.Close()
		case *fileLogger:
			l.f.Close()
		}
	}
}

type syslogLogger struct{ w *syslog.Writer }

func (l *syslogLogger) Log(r *Record) error {
	if r.Decision == Refuse {
		return l.w.Warning(r.String())
	}
	return l.w.Info(r.String())
}

// fileLogger writes each line with one write(2) on an O_APPEND file, so
// that lines of concurrent requests do not interleave.
type fileLogger struct{ f *os.File }

func (l *fileLogger) Log(r *Record) error {
	line := time.Now().UTC().Format(time.RFC3339Nano) + " airlock-action[" + strconv.Itoa(os.Getpid()) + "]: " + r.String() + "\n"
	_, err := l.f.WriteString(line)
	return err
}

// oneLine turns an error into a single line for stderr and the log.
func oneLine(err error) string {
	var pe *policy.Error
	if errors.As(err, &pe) && len(pe.Problems) > 1 {
		return fmt.Sprintf("policy file: %s and %d more problems (run airlock-action --check to see them all)", pe.Problems[0], len(pe.Problems)-1)
	}
	return strings.NewReplacer("\r", " ", "\n", "; ").Replace(err.Error())
}
