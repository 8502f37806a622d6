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
	"github.com/hashicorp/hcl/v2/gohcl"
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

func (e *Error) Error() string { return hclcheck.Text("policy", e.Problems) }

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: read %s: %w", path, err)
	}
	if len(src) > maxPolicyBytes {
		return nil, &Error{Problems: []Problem{{File: path, Message: fmt.Sprintf("larger than %d bytes", maxPolicyBytes)}}}
	}
	return Parse(src, path)
}

// The policy file's schema, decoded with gohcl. Attributes are kept as
// *hcl.Attribute so that every problem can name its line.
type fileBody struct {
	LogFile  *hcl.Attribute `hcl:"log_file,optional"`
	Verbs    []verbBody     `hcl:"verb,block"`
	Transfer *transferBody  `hcl:"transfer,block"`
}

type transferBody struct {
	PutUnder *hcl.Attribute `hcl:"put_under,optional"`
	GetUnder *hcl.Attribute `hcl:"get_under,optional"`
	MaxSize  *hcl.Attribute `hcl:"max_size,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
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

type verbBody struct {
	Name     string         `hcl:"name,label"`
	Argv     *hcl.Attribute `hcl:"argv"`
	Timeout  *hcl.Attribute `hcl:"timeout,optional"`
	RunAs    *hcl.Attribute `hcl:"run_as,optional"`
	Dir      *hcl.Attribute `hcl:"dir,optional"`
	Env      *hcl.Attribute `hcl:"env,optional"`
	Class    *hcl.Attribute `hcl:"class,optional"`
	Params   []paramBody    `hcl:"param,block"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type paramBody struct {
	Name        string         `hcl:"name,label"`
	Enum        *hcl.Attribute `hcl:"enum,optional"`
	Regex       *hcl.Attribute `hcl:"regex,optional"`
	Int         *hcl.Attribute `hcl:"int,optional"`
	PathUnder   *hcl.Attribute `hcl:"path_under,optional"`
	LeadingDash *hcl.Attribute `hcl:"leading_dash,optional"`
	DefRange    hcl.Range      `hcl:",def_range"`
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
	if diags := gohcl.DecodeBody(f.Body, nil, &body); diags.HasErrors() {
		c.Diags(diags)
		return nil, c.err()
	}
	p := &Policy{File: name, Reaper: DefaultReaper, byName: map[string]*Verb{}}
	if body.LogFile != nil {
		p.LogFile = c.str(body.LogFile)
		if p.LogFile != "" && !isCleanAbs(p.LogFile) {
			c.Errorf(body.LogFile.Range, "log_file %q must be an absolute, clean path", p.LogFile)
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
	if b.Argv == nil {
		c.Errorf(b.DefRange, "verb %q: argv is required", b.Name)
	} else {
		v.Argv = c.strList(b.Argv)
	}
	switch {
	case b.Argv == nil:
	case len(v.Argv) == 0:
		c.Errorf(b.Argv.Range, "verb %q: argv is empty", b.Name)
	case !isCleanAbs(v.Argv[0]) || strings.ContainsAny(v.Argv[0], "{}"):
		c.Errorf(b.Argv.Range, "verb %q: argv[0] %q must be a fixed absolute, clean path (no PATH lookup, no parameters)", b.Name, v.Argv[0])
	}
	for i, el := range v.Argv {
		if !safeText(el) {
			c.Errorf(b.Argv.Range, "verb %q: argv[%d] holds a control character", b.Name, i)
			continue
		}
		t, err := parseTemplate(el)
		if err != nil {
			c.Errorf(b.Argv.Range, "verb %q: argv[%d] %q: %v", b.Name, i, el, err)
			continue
		}
		for _, part := range t {
			if part.param == "" {
				continue
			}
			if params[part.param] == nil {
				c.Errorf(b.Argv.Range, "verb %q: argv[%d] uses {%s}, which is not a declared param", b.Name, i, part.param)
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
	if b.Timeout != nil {
		s := c.str(b.Timeout)
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			c.Errorf(b.Timeout.Range, "verb %q: timeout %q is not a duration such as \"30s\" or \"5m\"", b.Name, s)
		case d <= 0 || d > MaxTimeout:
			c.Errorf(b.Timeout.Range, "verb %q: timeout %s must be above zero and at most %s", b.Name, d, MaxTimeout)
		default:
			v.Timeout = d
		}
	}
	if b.RunAs != nil {
		v.RunAs = c.str(b.RunAs)
		if !userNameRE.MatchString(v.RunAs) {
			c.Errorf(b.RunAs.Range, "verb %q: run_as %q is not a user name", b.Name, v.RunAs)
		}
	}
	if b.Dir != nil {
		v.Dir = c.str(b.Dir)
		if !isCleanAbs(v.Dir) {
			c.Errorf(b.Dir.Range, "verb %q: dir %q must be an absolute, clean path", b.Name, v.Dir)
		}
	}
	if b.Class != nil {
		v.Class = c.str(b.Class)
		if !slices.Contains(ClassNames, v.Class) {
			c.Errorf(b.Class.Range, "verb %q: class %q is not one of %s", b.Name, v.Class, strings.Join(ClassNames, ", "))
		}
	}
	if b.Env != nil {
		v.Env = c.strList(b.Env)
		for _, n := range v.Env {
			switch {
			case !envNameRE.MatchString(n):
				c.Errorf(b.Env.Range, "verb %q: env %q is not a variable name", b.Name, n)
			case deniedEnv[n] || strings.HasPrefix(n, "LD_"):
				c.Errorf(b.Env.Range, "verb %q: env %q may not be passed through (PATH is fixed; loader and shell start-up variables are refused)", b.Name, n)
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
		a   *hcl.Attribute
		dst *[]string
	}{{b.PutUnder, &t.PutUnder}, {b.GetUnder, &t.GetUnder}} {
		if d.a == nil {
			continue
		}
		for _, p := range c.strList(d.a) {
			if !isCleanAbs(p) || p == "/" {
				c.Errorf(d.a.Range, "transfer: %q must be an absolute, clean directory other than /", p)
				continue
			}
			*d.dst = append(*d.dst, p)
		}
	}
	if len(t.PutUnder) == 0 && len(t.GetUnder) == 0 {
		c.Errorf(b.DefRange, "transfer: set put_under, get_under or both")
	}
	if b.MaxSize != nil {
		s := c.str(b.MaxSize)
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
			c.Errorf(b.MaxSize.Range, "transfer: max_size %q must be a size such as \"64MiB\" (at most 1 TiB)", s)
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
	if b.Enum != nil {
		kinds = append(kinds, "enum")
		p.Kind = Enum
		p.Values = c.strList(b.Enum)
		if len(p.Values) == 0 {
			c.Errorf(b.Enum.Range, "param %q: enum is empty", b.Name)
		}
		for _, v := range p.Values {
			if !safeText(v) {
				c.Errorf(b.Enum.Range, "param %q: enum value %q holds a control character", b.Name, v)
			}
		}
	}
	if b.Regex != nil {
		kinds = append(kinds, "regex")
		p.Kind = Regex
		p.Pattern = c.str(b.Regex)
		re, err := regexp.Compile(`^(?:` + p.Pattern + `)$`)
		if err != nil {
			c.Errorf(b.Regex.Range, "param %q: regex: %v", b.Name, err)
		}
		p.re = re
	}
	if b.Int != nil {
		kinds = append(kinds, "int")
		p.Kind = Int
		var bounds []int64
		if diags := gohcl.DecodeExpression(b.Int.Expr, nil, &bounds); diags.HasErrors() {
			c.Diags(diags)
		} else if len(bounds) != 2 || bounds[0] > bounds[1] {
			c.Errorf(b.Int.Range, "param %q: int must be [min, max] with min <= max", b.Name)
		} else {
			p.Min, p.Max = bounds[0], bounds[1]
		}
	}
	if b.PathUnder != nil {
		kinds = append(kinds, "path_under")
		p.Kind = PathUnder
		p.Under = c.str(b.PathUnder)
		if !isCleanAbs(p.Under) || p.Under == "/" {
			c.Errorf(b.PathUnder.Range, "param %q: path_under %q must be an absolute, clean path other than /", b.Name, p.Under)
		}
	}
	if b.LeadingDash != nil {
		if diags := gohcl.DecodeExpression(b.LeadingDash.Expr, nil, &p.LeadingDash); diags.HasErrors() {
			c.Diags(diags)
		}
		if p.Kind != Regex {
			c.Errorf(b.LeadingDash.Range, "param %q: leading_dash applies to regex params only", b.Name)
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

func (c *collector) str(a *hcl.Attribute) string {
	var s string
	c.Decode(a, &s)
	return s
}

func (c *collector) strList(a *hcl.Attribute) []string {
	var l []string
	c.Decode(a, &l)
	return l
}

func (c *collector) err() error {
	if len(c.Problems) == 0 {
		return nil
	}
	return &Error{Problems: c.Problems}
}
