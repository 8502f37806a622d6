package policy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/airlockgw/airlock/deploy/hclcheck"
)

// Defaults and fixed values of a policy.
const (
	// DefaultTimeout bounds a verb that sets no timeout.
	DefaultTimeout = time.Minute
	// MaxTimeout is the longest timeout a verb may set.
	MaxTimeout = 24 * time.Hour
	// Sudo is the program that runs a verb with run_as, always as
	// "Sudo -n -u USER -- REAPER --reap -- argv…": -n never prompts (a
	// forced command has no terminal), -- ends sudo's options.
	Sudo = "/usr/bin/sudo"
	// DefaultReaper is where airlock-action is installed: through sudo it
	// supervises a run_as verb as the verb's user ("--reap"), so that
	// stopping the verb stops every process it started.
	DefaultReaper = "/usr/local/bin/airlock-action"
	// maxPolicyBytes bounds the policy file.
	maxPolicyBytes = 1 << 20
)

// Policy is a parsed, validated policy file.
type Policy struct {
	// File is the name the policy was parsed under.
	File string
	// LogFile, when set, is an absolute path every request's log line is
	// appended to (besides syslog).
	LogFile string
	// Verbs in file order.
	Verbs []*Verb
	// Transfer is the transfer block, nil without one.
	Transfer *Transfer
	// Reaper is the airlock-action that sudo runs for a run_as verb, as
	// "REAPER --reap -- argv…" (DefaultReaper unless the caller sets it
	// to the running airlock-action).
	Reaper string

	byName map[string]*Verb
}

// Verb is one verb block: what a request whose first word is Name runs.
type Verb struct {
	Name string
	// Argv is the template: argv[0] a fixed absolute path, "{param}"
	// placeholders in the other elements.
	Argv []string
	// Params in declaration order, which is the order of the request's
	// arguments.
	Params  []*Param
	Timeout time.Duration
	// RunAs, when set, runs Argv through Sudo as this user, supervised
	// by the policy's Reaper.
	RunAs string
	// Dir, when set, is the working directory.
	Dir string
	// Env lists the variables passed through from airlock-action's own
	// environment, besides the fixed PATH.
	Env []string
	// Class, when set, is how much the verb can change, as the gateway's
	// command classes name it (read_only, mutating, destructive,
	// privileged, forbidden): a gateway that holds a copy of this policy
	// judges the account's requests by it. airlock-action itself only
	// checks the name.
	Class string
	// Line is where the verb block starts in File.
	Line int

	argv []template
}

// Kind is a parameter's type.
type Kind uint8

// The parameter types.
const (
	Enum Kind = iota + 1
	Regex
	Int
	PathUnder
)

func (k Kind) String() string {
	switch k {
	case Enum:
		return "enum"
	case Regex:
		return "regex"
	case Int:
		return "int"
	case PathUnder:
		return "path_under"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Param is one typed parameter of a verb.
type Param struct {
	Name string
	Kind Kind
	// Values are the allowed values of an Enum.
	Values []string
	// Pattern is a Regex's expression as written; it must match the whole
	// argument. LeadingDash allows arguments that begin with "-", which a
	// Regex refuses by default so that a loose pattern cannot smuggle an
	// option into the program.
	Pattern     string
	LeadingDash bool
	// Min and Max bound an Int, inclusively.
	Min, Max int64
	// Under is a PathUnder's prefix: absolute and clean.
	Under string

	re *regexp.Regexp
}

// Error lists every problem found in a policy file, each with its
// file:line.
type Error struct {
	Problems []Problem
}

// Problem is one problem at a place in a policy file.
type Problem = hclcheck.Problem

func (e *Error) Error() string { return hclcheck.Text("policy file", e.Problems) }

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy file: read %s: %w", path, err)
	}
	if len(src) > maxPolicyBytes {
		return nil, &Error{Problems: []Problem{{File: path, Message: fmt.Sprintf("larger than %d bytes", maxPolicyBytes)}}}
	}
	return Parse(src, path)
}

// The policy file's schema, decoded with gohcl: every attribute with its
// place beside it (attr_range: a zero range when it is not set).
type fileBody struct {
	LogFile      string        `hcl:"log_file,optional"`
	LogFileRange hcl.Range     `hcl:"log_file,attr_range"`
	Verbs        []verbBody    `hcl:"verb,block"`
	Transfer     *transferBody `hcl:"transfer,block"`
}

type transferBody struct {
	PutUnder      []string  `hcl:"put_under,optional"`
	PutUnderRange hcl.Range `hcl:"put_under,attr_range"`
	GetUnder      []string  `hcl:"get_under,optional"`
	GetUnderRange hcl.Range `hcl:"get_under,attr_range"`
	MaxSize       string    `hcl:"max_size,optional"`
	MaxSizeRange  hcl.Range `hcl:"max_size,attr_range"`
	DefRange      hcl.Range `hcl:",def_range"`
}

// Transfer is the transfer block: the built-in put and get verbs, which
// move one file through standard input or output.
type Transfer struct {
	// PutUnder and GetUnder are the directories a put may write and a get
	// may read strictly beneath (as path_under: no "..", no link leading
	// out); none: that verb is refused.
	PutUnder, GetUnder []string
	// MaxSize bounds a file, in bytes.
	MaxSize int64
}

// DefaultTransferMax is transfer.max_size when it is not set.
const DefaultTransferMax = 64 << 20

// verbBody is a verb block. argv is required, but optional to gohcl so
// that a missing one is said in the policy's words.
type verbBody struct {
	Name         string      `hcl:"name,label"`
	Argv         []string    `hcl:"argv,optional"`
	ArgvRange    hcl.Range   `hcl:"argv,attr_range"`
	Timeout      string      `hcl:"timeout,optional"`
	TimeoutRange hcl.Range   `hcl:"timeout,attr_range"`
	RunAs        string      `hcl:"run_as,optional"`
	RunAsRange   hcl.Range   `hcl:"run_as,attr_range"`
	Dir          string      `hcl:"dir,optional"`
	DirRange     hcl.Range   `hcl:"dir,attr_range"`
	Env          []string    `hcl:"env,optional"`
	EnvRange     hcl.Range   `hcl:"env,attr_range"`
	Class        string      `hcl:"class,optional"`
	ClassRange   hcl.Range   `hcl:"class,attr_range"`
	Params       []paramBody `hcl:"param,block"`
	DefRange     hcl.Range   `hcl:",def_range"`
}

type paramBody struct {
	Name             string    `hcl:"name,label"`
	Enum             []string  `hcl:"enum,optional"`
	EnumRange        hcl.Range `hcl:"enum,attr_range"`
	Regex            string    `hcl:"regex,optional"`
	RegexRange       hcl.Range `hcl:"regex,attr_range"`
	Int              []int64   `hcl:"int,optional"`
	IntRange         hcl.Range `hcl:"int,attr_range"`
	PathUnder        string    `hcl:"path_under,optional"`
	PathUnderRange   hcl.Range `hcl:"path_under,attr_range"`
	LeadingDash      bool      `hcl:"leading_dash,optional"`
	LeadingDashRange hcl.Range `hcl:"leading_dash,attr_range"`
	DefRange         hcl.Range `hcl:",def_range"`
}

var (
	verbNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)
	paramNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	userNameRE  = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// deniedEnv are variables no verb may pass through: PATH is fixed, and the
// others change how the dynamic loader or a shell behaves before the
// program's own code runs.
var deniedEnv = map[string]bool{
	"PATH": true, "IFS": true, "ENV": true, "BASH_ENV": true, "SHELLOPTS": true,
	"BASHOPTS": true, "PS4": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true,
	"HOSTALIASES": true, "RESOLV_HOST_CONF": true, "MALLOC_CHECK_": true,
}

// ClassNames are the classes a verb may declare, least to most severe.
var ClassNames = []string{"read_only", "mutating", "destructive", "privileged", "forbidden"}

// Parse parses and validates a policy. name is used in problems and as
// Policy.File. Every problem found is reported at once in an *Error.
func Parse(src []byte, name string) (*Policy, error) {
	c := &collector{hclcheck.Collector{File: name}}
	f, diags := hclparse.NewParser().ParseHCL(src, name)
	c.Diags(diags)
	if f == nil || diags.HasErrors() {
		return nil, c.err()
	}
	var body fileBody
	d := hclcheck.DecodeBody(f.Body, &body)
	if len(d.Structure) > 0 {
		c.Diags(d.Structure)
		return nil, c.err()
	}
	c.Hold(d.Values)
	p := &Policy{File: name, Reaper: DefaultReaper, byName: map[string]*Verb{}}
	if hclcheck.Set(body.LogFileRange) {
		c.Value(body.LogFileRange)
		p.LogFile = body.LogFile
		if p.LogFile != "" && !isCleanAbs(p.LogFile) {
			c.Errorf(body.LogFileRange, "log_file %q must be an absolute, clean path", p.LogFile)
		}
	}
	for i := range body.Verbs {
		v := c.verb(&body.Verbs[i])
		if v == nil {
			continue
		}
		if _, dup := p.byName[v.Name]; dup {
			c.Errorf(body.Verbs[i].DefRange, "verb %q is declared twice", v.Name)
			continue
		}
		p.byName[v.Name] = v
		p.Verbs = append(p.Verbs, v)
	}
	if t := body.Transfer; t != nil {
		p.Transfer = c.transfer(t)
		for _, name := range []string{"put", "get"} {
			if _, dup := p.byName[name]; dup {
				c.Errorf(t.DefRange, "verb %q is built in with a transfer block; rename the verb block", name)
			}
		}
	}
	c.SayHeld()
	if len(body.Verbs) == 0 && body.Transfer == nil {
		c.Problems = append(c.Problems, Problem{File: name, Line: 1, Message: "no verb blocks: every request would be refused"})
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Verb returns the verb called name, or nil.
func (p *Policy) Verb(name string) *Verb { return p.byName[name] }

func (c *collector) verb(b *verbBody) *Verb {
	before := len(c.Problems)
	v := &Verb{Name: b.Name, Line: b.DefRange.Start.Line, Timeout: DefaultTimeout}
	if !verbNameRE.MatchString(b.Name) {
		c.Errorf(b.DefRange, "verb name %q: use letters, digits, '.', '_', ':' and '-', starting with a letter or digit", b.Name)
	}
	params := map[string]*Param{}
	for i := range b.Params {
		pb := &b.Params[i]
		prm := c.param(pb)
		if prm == nil {
			continue
		}
		if params[prm.Name] != nil {
			c.Errorf(pb.DefRange, "verb %q: param %q is declared twice", b.Name, prm.Name)
			continue
		}
		params[prm.Name] = prm
		v.Params = append(v.Params, prm)
	}
	used := map[string]bool{}
	if !hclcheck.Set(b.ArgvRange) {
		c.Errorf(b.DefRange, "verb %q: argv is required", b.Name)
	} else {
		c.Value(b.ArgvRange)
		v.Argv = b.Argv
	}
	switch {
	case !hclcheck.Set(b.ArgvRange):
	case len(v.Argv) == 0:
		c.Errorf(b.ArgvRange, "verb %q: argv is empty", b.Name)
	case !isCleanAbs(v.Argv[0]) || strings.ContainsAny(v.Argv[0], "{}"):
		c.Errorf(b.ArgvRange, "verb %q: argv[0] %q must be a fixed absolute, clean path (no PATH lookup, no parameters)", b.Name, v.Argv[0])
	}
	for i, el := range v.Argv {
		if !safeText(el) {
			c.Errorf(b.ArgvRange, "verb %q: argv[%d] holds a control character", b.Name, i)
			continue
		}
		t, err := parseTemplate(el)
		if err != nil {
			c.Errorf(b.ArgvRange, "verb %q: argv[%d] %q: %v", b.Name, i, el, err)
			continue
		}
		for _, part := range t {
			if part.param == "" {
				continue
			}
			if params[part.param] == nil {
				c.Errorf(b.ArgvRange, "verb %q: argv[%d] uses {%s}, which is not a declared param", b.Name, i, part.param)
			}
			used[part.param] = true
		}
		v.argv = append(v.argv, t)
	}
	for _, prm := range v.Params {
		if !used[prm.Name] {
			c.Errorf(b.DefRange, "verb %q: param %q is not used in argv", b.Name, prm.Name)
		}
	}
	if hclcheck.Set(b.TimeoutRange) {
		c.Value(b.TimeoutRange)
		s := b.Timeout
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			c.Errorf(b.TimeoutRange, "verb %q: timeout %q is not a duration such as \"30s\" or \"5m\"", b.Name, s)
		case d <= 0 || d > MaxTimeout:
			c.Errorf(b.TimeoutRange, "verb %q: timeout %s must be above zero and at most %s", b.Name, d, MaxTimeout)
		default:
			v.Timeout = d
		}
	}
	if hclcheck.Set(b.RunAsRange) {
		c.Value(b.RunAsRange)
		v.RunAs = b.RunAs
		if !userNameRE.MatchString(v.RunAs) {
			c.Errorf(b.RunAsRange, "verb %q: run_as %q is not a user name", b.Name, v.RunAs)
		}
	}
	if hclcheck.Set(b.DirRange) {
		c.Value(b.DirRange)
		v.Dir = b.Dir
		if !isCleanAbs(v.Dir) {
			c.Errorf(b.DirRange, "verb %q: dir %q must be an absolute, clean path", b.Name, v.Dir)
		}
	}
	if hclcheck.Set(b.ClassRange) {
		c.Value(b.ClassRange)
		v.Class = b.Class
		if !slices.Contains(ClassNames, v.Class) {
			c.Errorf(b.ClassRange, "verb %q: class %q is not one of %s", b.Name, v.Class, strings.Join(ClassNames, ", "))
		}
	}
	if hclcheck.Set(b.EnvRange) {
		c.Value(b.EnvRange)
		v.Env = b.Env
		for _, n := range v.Env {
			switch {
			case !envNameRE.MatchString(n):
				c.Errorf(b.EnvRange, "verb %q: env %q is not a variable name", b.Name, n)
			case deniedEnv[n] || strings.HasPrefix(n, "LD_"):
				c.Errorf(b.EnvRange, "verb %q: env %q may not be passed through (PATH is fixed; loader and shell start-up variables are refused)", b.Name, n)
			}
		}
	}
	if len(c.Problems) > before {
		return nil
	}
	return v
}

// sizeRE is a size: bytes, or with a unit.
var sizeRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB)?$`)

// transfer reads the transfer block.
func (c *collector) transfer(b *transferBody) *Transfer {
	t := &Transfer{MaxSize: DefaultTransferMax}
	for _, d := range []struct {
		dirs []string
		at   hcl.Range
		dst  *[]string
	}{{b.PutUnder, b.PutUnderRange, &t.PutUnder}, {b.GetUnder, b.GetUnderRange, &t.GetUnder}} {
		c.Value(d.at)
		for _, p := range d.dirs {
			if !isCleanAbs(p) || p == "/" {
				c.Errorf(d.at, "transfer: %q must be an absolute, clean directory other than /", p)
				continue
			}
			*d.dst = append(*d.dst, p)
		}
	}
	if len(t.PutUnder) == 0 && len(t.GetUnder) == 0 {
		c.Errorf(b.DefRange, "transfer: set put_under, get_under or both")
	}
	if hclcheck.Set(b.MaxSizeRange) {
		c.Value(b.MaxSizeRange)
		s := b.MaxSize
		m := sizeRE.FindStringSubmatch(s)
		n, err := int64(0), error(nil)
		if m != nil {
			n, err = strconv.ParseInt(m[1], 10, 64)
			shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m[2]]
			if err == nil && n > (1<<40)>>shift {
				err = errors.New("too large")
			}
			n <<= shift
		}
		if m == nil || err != nil || n <= 0 {
			c.Errorf(b.MaxSizeRange, "transfer: max_size %q must be a size such as \"64MiB\" (at most 1 TiB)", s)
		} else {
			t.MaxSize = n
		}
	}
	return t
}

func (c *collector) param(b *paramBody) *Param {
	before := len(c.Problems)
	p := &Param{Name: b.Name}
	if !paramNameRE.MatchString(b.Name) {
		c.Errorf(b.DefRange, "param name %q: use lower-case letters, digits and '_'", b.Name)
	}
	var kinds []string
	if hclcheck.Set(b.EnumRange) {
		c.Value(b.EnumRange)
		kinds = append(kinds, "enum")
		p.Kind = Enum
		p.Values = b.Enum
		if len(p.Values) == 0 {
			c.Errorf(b.EnumRange, "param %q: enum is empty", b.Name)
		}
		for _, v := range p.Values {
			if !safeText(v) {
				c.Errorf(b.EnumRange, "param %q: enum value %q holds a control character", b.Name, v)
			}
		}
	}
	if hclcheck.Set(b.RegexRange) {
		c.Value(b.RegexRange)
		kinds = append(kinds, "regex")
		p.Kind = Regex
		p.Pattern = b.Regex
		re, err := regexp.Compile(`^(?:` + p.Pattern + `)$`)
		if err != nil {
			c.Errorf(b.RegexRange, "param %q: regex: %v", b.Name, err)
		}
		p.re = re
	}
	if hclcheck.Set(b.IntRange) {
		kinds = append(kinds, "int")
		p.Kind = Int
		switch {
		case !c.Value(b.IntRange): // no list of two numbers, said
		case len(b.Int) != 2 || b.Int[0] > b.Int[1]:
			c.Errorf(b.IntRange, "param %q: int must be [min, max] with min <= max", b.Name)
		default:
			p.Min, p.Max = b.Int[0], b.Int[1]
		}
	}
	if hclcheck.Set(b.PathUnderRange) {
		c.Value(b.PathUnderRange)
		kinds = append(kinds, "path_under")
		p.Kind = PathUnder
		p.Under = b.PathUnder
		if !isCleanAbs(p.Under) || p.Under == "/" {
			c.Errorf(b.PathUnderRange, "param %q: path_under %q must be an absolute, clean path other than /", b.Name, p.Under)
		}
	}
	if hclcheck.Set(b.LeadingDashRange) {
		c.Value(b.LeadingDashRange)
		p.LeadingDash = b.LeadingDash
		if p.Kind != Regex {
			c.Errorf(b.LeadingDashRange, "param %q: leading_dash applies to regex params only", b.Name)
		}
	}
	if len(kinds) != 1 {
		c.Errorf(b.DefRange, "param %q: set exactly one of enum, regex, int, path_under (found %d)", b.Name, len(kinds))
	}
	if len(c.Problems) > before {
		return nil
	}
	return p
}

// template is one argv element: literal text and parameter references.
type template []templatePart

type templatePart struct {
	text  string // literal, when param is ""
	param string
}

var errTemplate = errors.New(`braces must be "{param}", "{{" or "}}"`)

func parseTemplate(s string) (template, error) {
	var (
		t   template
		lit strings.Builder
	)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, errTemplate
			}
			name := s[i+1 : i+end]
			if !paramNameRE.MatchString(name) {
				return nil, errTemplate
			}
			if lit.Len() > 0 {
				t = append(t, templatePart{text: lit.String()})
				lit.Reset()
			}
			t = append(t, templatePart{param: name})
			i += end
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i++
				continue
			}
			return nil, errTemplate
		default:
			lit.WriteByte(s[i])
		}
	}
	if lit.Len() > 0 || len(t) == 0 {
		t = append(t, templatePart{text: lit.String()})
	}
	return t, nil
}

// ArgvWith is the verb's argv with every literal piece of an element
// passed through literal and every "{param}" through param (given the
// parameter's name): for example sudoers patterns, with parameters as
// wildcards.
func (v *Verb) ArgvWith(literal, param func(string) string) []string {
	out := make([]string, len(v.argv))
	for i, t := range v.argv {
		var b strings.Builder
		for _, p := range t {
			if p.param == "" {
				b.WriteString(literal(p.text))
			} else {
				b.WriteString(param(p.param))
			}
		}
		out[i] = b.String()
	}
	return out
}

func (t template) expand(values map[string]string) string {
	var b strings.Builder
	for _, p := range t {
		if p.param == "" {
			b.WriteString(p.text)
		} else {
			b.WriteString(values[p.param])
		}
	}
	return b.String()
}

func isCleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && safeText(p)
}

// collector gathers problems with their lines.
type collector struct {
	hclcheck.Collector
}

func (c *collector) err() error {
	if len(c.Problems) == 0 {
		return nil
	}
	return &Error{Problems: c.Problems}
}
