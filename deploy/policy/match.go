package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The reasons Match refuses a request that tokenized cleanly.
var (
	// ErrUnknownVerb: the first word names no verb of the policy.
	ErrUnknownVerb = errors.New("unknown verb")
	// ErrArgCount: the request has more or fewer arguments than the verb
	// has params.
	ErrArgCount = errors.New("wrong number of arguments")
)

// The reasons an *ArgError gives for refusing one argument.
var (
	ErrNotInEnum     = errors.New("not one of the allowed values")
	ErrNoMatch       = errors.New("does not match the pattern")
	ErrLeadingDash   = errors.New("begins with '-'")
	ErrNotInteger    = errors.New("not a decimal integer")
	ErrOutOfRange    = errors.New("out of range")
	ErrPathTraversal = errors.New("path has a '..' component")
	ErrPathNotClean  = errors.New("path is not absolute and clean")
	ErrPathOutside   = errors.New("path is not under the allowed prefix")
	ErrSymlinkEscape = errors.New("path leads outside the allowed prefix through a symbolic link")
	ErrPathUnchecked = errors.New("path cannot be checked for symbolic links")
)

// UnknownVerbError is returned for a request whose first word is not a
// verb; it wraps ErrUnknownVerb.
type UnknownVerbError struct{ Verb string }

func (e *UnknownVerbError) Error() string {
	return "the policy has no verb " + Quote(e.Verb)
}

func (e *UnknownVerbError) Unwrap() error { return ErrUnknownVerb }

// ArgCountError is returned when a request has the wrong number of
// arguments; it wraps ErrArgCount.
type ArgCountError struct {
	Verb      string
	Got, Want int
}

func (e *ArgCountError) Error() string {
	return fmt.Sprintf("verb %s takes %d argument(s), got %d", e.Verb, e.Want, e.Got)
}

func (e *ArgCountError) Unwrap() error { return ErrArgCount }

// ArgError says why one argument was refused.
type ArgError struct {
	Verb, Param string
	// Value is the argument as given.
	Value string
	// Err is one of the ErrNotInEnum … ErrSymlinkEscape sentinels.
	Err error
}

func (e *ArgError) Error() string {
	v := e.Value
	if len(v) > 200 {
		v = v[:200] + "…"
	}
	return fmt.Sprintf("verb %s: param %s: %s %v", e.Verb, e.Param, Quote(v), e.Err)
}

func (e *ArgError) Unwrap() error { return e.Err }

// Plan is what a matched request runs.
type Plan struct {
	// Verb is the matched verb.
	Verb *Verb
	// Args are the request's arguments after the verb, one per param.
	Args []string
	// Argv is the program and its arguments, ready for execve: the
	// prefix "Sudo -n -u USER -- Reaper --reap --" when the verb has
	// run_as, then the verb's argv with every "{param}" replaced. Each
	// template element is exactly one element.
	Argv []string
	// Dir is the working directory, "" for the caller's.
	Dir string
	// Timeout bounds the run.
	Timeout time.Duration
	// Env are the names of the variables to pass through.
	Env []string
}

// Match tokenizes command (see Tokenize), finds the verb named by its first
// word and validates every argument against the verb's params. It returns
// the Plan to run, or an error saying why the request is refused: a
// *SyntaxError, *UnknownVerbError, *ArgCountError or *ArgError. Nothing is
// run.
//
// A path_under argument is checked against the file system as it is now;
// a symbolic link created between Match and the program's use of the path
// is not seen. Keep the directories under the prefix writable only by
// accounts trusted not to race the check.
func (p *Policy) Match(command string) (*Plan, error) {
	return p.match(command, true)
}

// MatchText is Match without the file system: a path_under argument is
// checked as text only (absolute, clean, beneath its prefix), since the
// host that asks is not the one whose files the path names. A gateway
// uses it to judge a request before sending it; the target's
// airlock-action checks again, with its files.
func (p *Policy) MatchText(command string) (*Plan, error) {
	return p.match(command, false)
}

func (p *Policy) match(command string, files bool) (*Plan, error) {
	words, err := Tokenize(command)
	if err != nil {
		return nil, err
	}
	v := p.byName[words[0]]
	if v == nil {
		return nil, &UnknownVerbError{Verb: words[0]}
	}
	args := words[1:]
	if len(args) != len(v.Params) {
		return nil, &ArgCountError{Verb: v.Name, Got: len(args), Want: len(v.Params)}
	}
	values := make(map[string]string, len(args))
	for i, prm := range v.Params {
		if err := prm.check(args[i], files); err != nil {
			return nil, &ArgError{Verb: v.Name, Param: prm.Name, Value: args[i], Err: err}
		}
		values[prm.Name] = args[i]
	}
	plan := &Plan{Verb: v, Args: args, Dir: v.Dir, Timeout: v.Timeout, Env: v.Env}
	if v.RunAs != "" {
		plan.Argv = SudoPrefix(v.RunAs, p.Reaper)
	}
	for _, t := range v.argv {
		plan.Argv = append(plan.Argv, t.expand(values))
	}
	return plan, nil
}

// SudoPrefix is what comes before a run_as verb's argv: sudo, as user,
// runs reaper to supervise it.
func SudoPrefix(user, reaper string) []string {
	return []string{Sudo, "-n", "-u", user, "--", reaper, "--reap", "--"}
}

var intRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// check validates one argument.
func (p *Param) check(arg string, files bool) error {
	switch p.Kind {
	case Enum:
		for _, v := range p.Values {
			if arg == v {
				return nil
			}
		}
		return ErrNotInEnum
	case Regex:
		if !p.re.MatchString(arg) {
			return ErrNoMatch
		}
		if strings.HasPrefix(arg, "-") && !p.LeadingDash {
			return ErrLeadingDash
		}
		return nil
	case Int:
		if !intRE.MatchString(arg) || arg == "-0" {
			return ErrNotInteger
		}
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < p.Min || n > p.Max {
			return ErrOutOfRange
		}
		return nil
	case PathUnder:
		if !files {
			return checkPathText(arg, p.Under)
		}
		return checkPathUnder(arg, p.Under)
	}
	return fmt.Errorf("param %s has no type", p.Name)
}

// checkPathUnder accepts an absolute, clean path strictly beneath under
// whose existing part, with every symbolic link resolved, is still under
// under's own resolved location. The part of the path that does not exist
// yet cannot hold a link.
func checkPathUnder(path, under string) error {
	if err := checkPathText(path, under); err != nil {
		return err
	}
	root, err := filepath.EvalSymlinks(under)
	if err != nil {
		// The prefix itself is missing: nothing is under it.
		return fmt.Errorf("%w (%s does not exist on this host)", ErrPathOutside, under)
	}
	existing := path
	for {
		_, err := os.Lstat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return ErrPathUnchecked
		}
		existing = filepath.Dir(existing)
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		// A dangling link: the program would create its target,
		// wherever that is.
		return ErrSymlinkEscape
	}
	if real != root && !strings.HasPrefix(real, root+"/") {
		return ErrSymlinkEscape
	}
	return nil
}

// checkPathText accepts an absolute, clean path strictly beneath under,
// as text.
func checkPathText(path, under string) error {
	for _, el := range strings.Split(path, "/") {
		if el == ".." {
			return ErrPathTraversal
		}
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return ErrPathNotClean
	}
	if !strings.HasPrefix(path, under+"/") {
		return ErrPathOutside
	}
	return nil
}

// TransferRequest is a request of a built-in transfer verb:
//
//	put PATH MODE SIZE SHA256 [overwrite]   (the file's bytes on standard input)
//	get PATH                                (the file's bytes to standard output)
//
// MODE is octal permission bits (at most 0777), SIZE the exact number of
// bytes, SHA256 their digest in hex.
type TransferRequest struct {
	Put       bool
	Path      string
	Mode      uint32
	Size      int64
	SHA256    [32]byte
	Overwrite bool
}

// ErrNoTransfer: put or get asked of a policy without a transfer block,
// or a direction it does not allow.
var ErrNoTransfer = errors.New("this policy takes no such transfer")

// MatchTransfer reads command as a built-in transfer verb. It returns nil
// and no error when command names another verb (Match decides those). A
// put's path must be strictly beneath one of put_under, a get's of
// get_under, as path_under checks it: with files, against the file system
// as it is now; without, as text (see MatchText).
func (p *Policy) MatchTransfer(command string, files bool) (*TransferRequest, error) {
	words, err := Tokenize(command)
	if err != nil || (words[0] != "put" && words[0] != "get") || p.byName[words[0]] != nil {
		return nil, nil
	}
	t := p.Transfer
	if t == nil {
		return nil, fmt.Errorf("%w: it has no transfer block", ErrNoTransfer)
	}
	tr := &TransferRequest{Put: words[0] == "put"}
	unders := t.GetUnder
	switch {
	case tr.Put && (len(words) < 5 || len(words) > 6 || len(words) == 6 && words[5] != "overwrite"):
		return nil, errors.New("put takes PATH MODE SIZE SHA256 [overwrite]")
	case !tr.Put && len(words) != 2:
		return nil, errors.New("get takes PATH")
	case tr.Put:
		unders = t.PutUnder
		mode, err := strconv.ParseUint(words[2], 8, 32)
		if err != nil || mode > 0o777 {
			return nil, fmt.Errorf("put: mode %q: only permission bits in octal (at most 0777)", words[2])
		}
		size, err := strconv.ParseInt(words[3], 10, 64)
		if err != nil || size < 0 || size > t.MaxSize {
			return nil, fmt.Errorf("put: size %q: a number of bytes from 0 to the transfer's max_size of %d", words[3], t.MaxSize)
		}
		sum, err := hex.DecodeString(words[4])
		if err != nil || len(sum) != 32 {
			return nil, errors.New("put: the SHA-256 must be 64 hex digits")
		}
		tr.Mode, tr.Size, tr.Overwrite = uint32(mode), size, len(words) == 6
		copy(tr.SHA256[:], sum)
	}
	tr.Path = words[1]
	if err := t.allows(tr.Put, tr.Path, unders, files); err != nil {
		return nil, err
	}
	return tr, nil
}

// Allows says whether a put (or a get) of path is within the transfer
// block, as text (the gateway's check before it sends the request; the
// target checks again with its files).
func (t *Transfer) Allows(put bool, path string) error {
	unders := t.GetUnder
	if put {
		unders = t.PutUnder
	}
	return t.allows(put, path, unders, false)
}

func (t *Transfer) allows(put bool, path string, unders []string, files bool) error {
	verb := "get"
	if put {
		verb = "put"
	}
	if len(unders) == 0 {
		return fmt.Errorf("%w: %s is not allowed (no %s_under)", ErrNoTransfer, verb, verb)
	}
	var last error
	for _, under := range unders {
		check := checkPathText
		if files {
			check = checkPathUnder
		}
		if last = check(path, under); last == nil {
			return nil
		}
	}
	return fmt.Errorf("%s %s: %w (allowed under: %s)", verb, path, last, strings.Join(unders, ", "))
}
