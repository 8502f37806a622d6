package classify

import "strings"

// privValueOpts are the options of the privileged wrappers that take the
// next word as their value.
var privValueOpts = map[string]map[string]bool{
	"chroot":  set(`--userspec --groups`),
	"pkexec":  set(`--user -u`),
	"runuser": set(`-u --user -g --group -G --supp-group -s --shell -w --whitelist-environment`),
	"setpriv": set(`--inh-caps --ambient-caps --bounding-set --groups --reuid --regid --ruid --euid --rgid --egid --securebits --pdeathsig --selinux-label --apparmor-profile --landlock-access --landlock-rule`),
	"nsenter": set(`-t --target -S --setuid -G --setgid`),
	"unshare": set(`--setuid --setgid -S -G --map-user --map-group --map-users --map-groups --propagation --kill-child`),
	"sg":      set(``),
	"capsh":   set(``),
}

// privileged classifies the programs that run a command with other
// privileges or in another namespace: at least privileged, and the
// command they run is classified too (it may be forbidden). What they
// run is found past their options: capsh's bash arguments after --,
// runuser's and sg's -c string.
func (c *classifier) privileged(text, name string, rest []word, depth int) {
	c.add(text, Privileged, name+" runs a command with other privileges or in another namespace")
	if name == "capsh" {
		for i, a := range rest {
			if a.lit && a.v == "--" {
				c.shell(text, "bash", rest[i+1:], depth)
				return
			}
		}
		return
	}
	user := false // runuser -u USER: the operands are the command
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		user = user || a.lit && (a.v == "-u" || a.v == "--user" || strings.HasPrefix(a.v, "--user="))
		switch {
		case !a.lit:
			c.add(text, Destructive, name+": "+a.src+" is not a literal")
			return
		case (a.v == "-c" || a.v == "--command") && i+1 < len(rest):
			c.inner(text, rest[i+1], depth)
			return
		case a.v == "--":
			c.privCommand(text, name, rest[i+1:], user, depth)
			return
		case strings.HasPrefix(a.v, "-"):
			if privValueOpts[name][a.v] {
				i++
			}
		default:
			c.privCommand(text, name, rest[i:], user, depth)
			return
		}
	}
}

// privCommand classifies what a privileged wrapper runs, given its first
// operand on: chroot's new root and sg's group come first; runuser's
// operands are a command only after -u USER (runuser USER opens a
// shell).
func (c *classifier) privCommand(text, name string, ops []word, user bool, depth int) {
	switch name {
	case "chroot":
		if len(ops) == 0 {
			return
		}
		// The command runs in the new root's /: its paths are the new
		// root's, which the classifier places as if it were / (so a
		// write to /etc/passwd there is still read as one).
		if !(ops[0].lit && ops[0].v == "/") {
			c.cwd.unknown = true
		} else {
			c.cwd.enter(&word{v: "/", lit: true, one: true})
		}
		ops = ops[1:]
	case "sg":
		if len(ops) == 0 {
			return
		}
		// sg GROUP [-c] COMMAND… runs its words, joined, with sh -c.
		ops = ops[1:]
		if len(ops) > 1 && ops[0].lit && ops[0].v == "-c" {
			c.inner(text, ops[1], depth)
			return
		}
		parts := make([]string, 0, len(ops))
		for _, a := range ops {
			if !a.lit {
				c.add(text, Destructive, "sg runs a command the classifier cannot read")
				return
			}
			parts = append(parts, a.v)
		}
		if len(parts) > 0 {
			c.line(strings.Join(parts, " "), depth+1)
		}
		return
	case "runuser":
		if !user {
			return // runuser USER: a shell, or with -c the string (above)
		}
	}
	if len(ops) > 0 {
		c.program(text, ops, depth+1)
	}
}
