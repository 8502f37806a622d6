package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/airlockgw/airlock/approvals"
)

// The values gohcl cannot decode alone: a list that may be written as one
// string, sizes with units, durations, paths and quotas; and the checks
// several blocks share.

// strOK decodes a list attribute written as one string (gohcl, no
// variables or functions); false means a problem was recorded.
func (c *checker) strOK(a *hcl.Attribute) (string, bool) {
	var s string
	if !c.Decode(a, &s) {
		return "", false
	}
	if strings.ContainsAny(s, "\x00\n\r") {
		c.Errorf(a.Range, "%s must not contain NUL or line breaks", a.Name)
		return "", false
	}
	return s, true
}

// strList decodes a list of strings; a single string is a list of one
// (checkpoint_every = "30s").
func (c *checker) strList(a *hcl.Attribute) []string {
	if a == nil {
		return nil
	}
	if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
		if s, ok := c.strOK(a); ok {
			return []string{s}
		}
		return nil
	}
	var l []string
	if !c.Decode(a, &l) {
		return nil
	}
	return l
}

// sizeRE is a size: a number of bytes, or one with a unit.
var sizeRE = regexp.MustCompile(`^\s*([0-9]+)\s*(B|KiB|MiB|GiB)?\s*$`)

// size parses a number of bytes: a whole number, or a string with a unit
// ("512", "64KiB", "1MiB").
func (c *checker) size(a *hcl.Attribute, def, min, max int64) int64 {
	if a == nil {
		return def
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		c.Diags(diags)
		return def
	}
	var text string
	switch v.Type() {
	case cty.Number:
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			c.Errorf(a.Range, "%s must be a whole number of bytes", a.Name)
			return def
		}
		text = bf.Text('f', 0)
	case cty.String:
		text = v.AsString()
	default:
		c.Errorf(a.Range, `%s must be a size: bytes (1048576) or with a unit ("64KiB", "1MiB")`, a.Name)
		return def
	}
	m := sizeRE.FindStringSubmatch(text)
	if m == nil {
		m = []string{"", "x", ""}
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		c.Errorf(a.Range, `%s = %q is not a size: write bytes (1048576) or with a unit ("64KiB", "1MiB")`, a.Name, text)
		return def
	}
	for _, u := range []struct {
		name  string
		shift uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}} {
		if m[2] == u.name {
			if n > max>>u.shift {
				n = max + 1
			} else {
				n <<= u.shift
			}
		}
	}
	if n < min || n > max {
		c.Errorf(a.Range, "%s = %s must be from %d to %d bytes", a.Name, strings.TrimSpace(text), min, max)
		return def
	}
	return n
}

// duration parses a duration written as a string ("90s", "10m", "1h30m"),
// the attribute name at r; def when it is not set.
func (c *checker) duration(name, s string, r hcl.Range, def, max time.Duration) time.Duration {
	if !c.Value(r) {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.Errorf(r, `%s = %q is not a positive duration; write it like "30s", "10m" or "1h"`, name, s)
		return def
	}
	if max > 0 && d > max {
		c.Errorf(r, "%s = %s is more than the maximum %s", name, d, max)
		return def
	}
	return d
}

// path is the file the attribute name at r names, made absolute against
// base; "" when it is not set.
func (c *checker) path(name, s string, r hcl.Range, base string) string {
	if !c.Value(r) {
		return ""
	}
	if s == "" {
		c.Errorf(r, "%s must not be empty", name)
		return ""
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(base, s)
	}
	return filepath.Clean(s)
}

// within is i, the attribute name at r, when it is from min to max; def
// when it is not set or out of bounds (a problem).
func (c *checker) within(name string, i int, r hcl.Range, def, min, max int) int {
	if !c.Value(r) {
		return def
	}
	if i < min || i > max {
		c.Errorf(r, "%s must be a whole number from %d to %d", name, min, max)
		return def
	}
	return i
}

// quotaRE is the short form of a quota: actions per rolling window.
var quotaRE = regexp.MustCompile(`^([0-9]+)/([0-9a-z.]+)$`)

// parseQuota reads an account's quota: "500/24h" (actions per rolling
// window), or { per_run = 50, per_window = 500, window = "24h" }.
func parseQuota(a *hcl.Attribute) (approvals.Quota, error) {
	var q approvals.Quota
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return q, diags
	}
	count := func(v cty.Value, what string) (int, error) {
		if v.Type() != cty.Number || !v.AsBigFloat().IsInt() {
			return 0, fmt.Errorf("%s must be a whole number", what)
		}
		n, _ := v.AsBigFloat().Int64()
		if n < 1 || n > 1<<30 {
			return 0, fmt.Errorf("%s must be from 1 to %d", what, 1<<30)
		}
		return int(n), nil
	}
	window := func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > approvals.MaxQuotaWindow {
			return 0, fmt.Errorf("the window %q must be a duration such as \"1h\" or \"24h\", at most %s", s, approvals.MaxQuotaWindow)
		}
		return d, nil
	}
	switch {
	case v.Type() == cty.String:
		m := quotaRE.FindStringSubmatch(v.AsString())
		if m == nil {
			return q, fmt.Errorf("%q is not ACTIONS/WINDOW, such as \"500/24h\"", v.AsString())
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 1<<30 {
			return q, fmt.Errorf("%q: the number of actions must be from 1 to %d", v.AsString(), 1<<30)
		}
		d, err := window(m[2])
		q.PerWindow, q.Window = n, d
		return q, err
	case v.Type().IsObjectType():
		for name := range v.Type().AttributeTypes() {
			var err error
			switch f := v.GetAttr(name); name {
			case "per_run":
				q.PerRun, err = count(f, "per_run")
			case "per_window":
				q.PerWindow, err = count(f, "per_window")
			case "window":
				if f.Type() != cty.String {
					err = errors.New("window must be a duration string")
				} else {
					q.Window, err = window(f.AsString())
				}
			default:
				err = fmt.Errorf("unknown field %q (per_run, per_window, window)", name)
			}
			if err != nil {
				return q, err
			}
		}
		switch {
		case q.PerRun == 0 && q.PerWindow == 0:
			return q, errors.New("set per_run, per_window or both")
		case q.Window != 0 && q.PerWindow == 0:
			return q, errors.New("window needs per_window")
		case q.PerWindow != 0 && q.Window == 0:
			q.Window = DefaultQuotaWindow
		}
		return q, nil
	}
	return q, errors.New(`write "ACTIONS/WINDOW" (such as "500/24h") or { per_run = N, per_window = N, window = "24h" }`)
}

// nameRE is what target, account and credential names may look like: they
// appear in commands, URLs and authorized_keys comments.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// httpsURL reports whether s may be the URL of a service the gateway
// asks (an OpenID issuer, OPA, an OTLP receiver): https, or http on
// loopback; no query, fragment or user.
func httpsURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil &&
		(u.Scheme == "https" || u.Scheme == "http" && IsLoopback(u.Hostname()))
}

// printable reports whether s is free of control and format characters.
func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// clip shortens a name for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, strconv.Quote(k))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// IsLoopback reports whether host is "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// shellSyntax are characters that mean something to a shell and nothing
// to a program started without one.
const shellSyntax = "|&;<>()$`\\\"'*?[]{}~#"

// witnessCommand reads audit.witness_command: a list, the program and its
// arguments, run without a shell. A string is accepted when it is a plain
// program path (a list of one); one with spaces or shell syntax would be
// run as a single program of that name, and fail at every checkpoint, so
// it is refused with the list form to write instead.
func (c *checker) witnessCommand(a *hcl.Attribute, base string) []string {
	if a == nil {
		return nil
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		c.Diags(diags)
		return nil
	}
	if v.Type() == cty.String {
		s, ok := c.strOK(a)
		if !ok {
			return nil
		}
		if strings.ContainsAny(s, shellSyntax) || strings.IndexFunc(s, unicode.IsSpace) >= 0 {
			c.Errorf(a.Range, "witness_command = %q is run without a shell, as one program: write the program and its arguments as a list, like %s; "+
				"for redirection or pipes (>>, |), put the commands in a script and name the script",
				s, witnessListExample(s))
			return nil
		}
	}
	argv := c.strList(a)
	if argv == nil {
		return nil
	}
	if len(argv) == 0 || argv[0] == "" {
		c.Errorf(a.Range, `witness_command must name a program: ["/usr/local/bin/push-checkpoint", "ARG", …]`)
		return nil
	}
	for _, arg := range argv {
		if strings.ContainsAny(arg, "\x00\n\r") {
			c.Errorf(a.Range, "witness_command must not contain NUL or line breaks")
			return nil
		}
	}
	if !filepath.IsAbs(argv[0]) {
		argv[0] = filepath.Join(base, argv[0])
	}
	argv[0] = filepath.Clean(argv[0])
	return argv
}

// witnessListExample is the list form of a witness command written as one
// string, as far as it can be without a shell.
func witnessListExample(s string) string {
	words := strings.Fields(s)
	if strings.ContainsAny(s, shellSyntax) || len(words) == 0 {
		return `witness_command = ["/usr/local/bin/push-checkpoint", "--to", "/mnt/witness/notes.log"]`
	}
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return "witness_command = [" + strings.Join(q, ", ") + "]"
}
