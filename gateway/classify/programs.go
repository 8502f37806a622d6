package classify

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call classifies one simple command.
func (c *classifier) call(src string, ws []*syntax.Word, depth int) {
	text := src[int(ws[0].Pos().Offset()):int(ws[len(ws)-1].End().Offset())]
	args := make([]word, len(ws))
	for i, w := range ws {
		args[i] = readWord(src, w)
	}
	c.program(text, args, depth)
}

// Programs whose class does not depend on their arguments: they change
// something whatever they are given. A program in none of these sets,
// with no grammar and no rule of its own, is unknown: destructive.
var (
	mutating    = set(`logger zip mkfifo htpasswd`)
	destructive = set(`mkfs mke2fs mkswap wipefs fdisk sfdisk cfdisk parted sgdisk gdisk
		truncate reboot shutdown poweroff halt init telinit kexec eval source . ssh scp sftp nc ncat netcat
		socat telnet ftp exec trap let enable mapfile readarray getopts pkill killall coproc`)
	privileged = set(`passwd chpasswd chage useradd usermod userdel
		adduser deluser groupadd groupmod groupdel gpasswd newgrp mount umount swapon swapoff modprobe insmod
		rmmod setcap chattr iptables ip6tables iptables-restore nft ufw firewall-cmd setenforce setfacl
		`)
	shells       = set(`sh bash dash zsh ksh mksh ash fish`)
	interpreters = set(`python python2 python3 perl ruby node nodejs php lua luajit Rscript awk gawk mawk nawk
		pwsh tclsh expect groovy java jshell osascript deno bun`)
)

// systemDirs are where a program named by a path is the program of its
// name.
var systemDirs = set(`/bin /usr/bin /sbin /usr/sbin /usr/local/bin /usr/local/sbin`)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// program classifies argv (args[0] the program). text is the simple
// command as written, for the record.
func (c *classifier) program(text string, args []word, depth int) {
	if len(args) == 0 {
		return
	}
	if depth > maxDepth {
		c.add(text, Destructive, "nested too deep to read")
		return
	}
	if !args[0].lit {
		c.add(text, Destructive, "runs a program whose name the classifier cannot read")
		return
	}
	if args[0].v == "" {
		c.add(text, Destructive, "runs a program with an empty name")
		return
	}
	name := path.Base(args[0].v)
	if dir := path.Dir(args[0].v); strings.Contains(args[0].v, "/") && !systemDirs[path.Clean(dir)] {
		// ./ls or /tmp/ls is whatever was put there, not ls.
		c.add(text, Destructive, "runs a program by a path outside the system's program directories")
		return
	}
	if strings.HasPrefix(name, "mkfs.") {
		name = "mkfs"
	}
	rest := args[1:]
	if isMisjudged(name) {
		c.add(text, ReadOnly, name+" reads (a test's misjudgement)")
		return
	}
	if c.runner(text, name, rest, depth) || c.builtin(text, name, rest) || c.byArguments(text, name, rest, depth) {
		return
	}
	if g := grammars[name]; g != nil {
		c.check(text, g, rest)
		return
	}
	switch {
	case mutating[name]:
		c.add(text, Mutating, name+" writes files")
	case destructive[name]:
		c.add(text, Destructive, name+" destroys or runs what the classifier cannot see")
	case privileged[name]:
		c.add(text, Privileged, name+" changes users, mounts, the kernel or the network")
	default:
		c.add(text, Destructive, "no rule of the classifier proves what "+name+" does")
	}
}

// runner classifies the programs that run other commands (wrappers,
// sudo, su, shells, interpreters, xargs, find, watch); false when name
// is none of them.
func (c *classifier) runner(text, name string, rest []word, depth int) bool {
	switch {
	case wrappers[name] != nil:
		c.wrapper(text, name, rest, depth)
	case name == "sudo" || name == "doas":
		c.sudo(text, name, rest, depth)
	case name == "su":
		c.add(text, Privileged, "runs as another user (su)")
		for i, a := range rest {
			if a.lit && (a.v == "-c" || a.v == "--command") && i+1 < len(rest) {
				c.inner(text, rest[i+1], depth)
			}
		}
	case shells[name]:
		c.shell(text, name, rest, depth)
	case name == "busybox":
		if len(rest) > 0 {
			c.program(text, rest, depth+1)
		}
	case interpreters[name]:
		if onlyVersion(rest) {
			c.add(text, ReadOnly, "prints a version")
		} else {
			c.add(text, Destructive, "an interpreter given a program the classifier cannot read")
		}
	case name == "xargs":
		c.xargs(text, rest, depth)
	case name == "find":
		c.find(text, rest, depth)
	case name == "watch":
		c.watch(text, rest, depth)
	default:
		return false
	}
	return true
}

// inner classifies a command string run by a shell or wrapper (sh -c,
// su -c).
func (c *classifier) inner(text string, a word, depth int) {
	if !a.lit {
		c.add(text, Destructive, "runs a command string the classifier cannot read")
		return
	}
	c.line(a.v, depth+1)
}

// sudoValueOpts are sudo's and doas's options that take a value.
var sudoValueOpts = set(`-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role -t --type -U --other-user -T --command-timeout -a`)

// sudo is at least privileged; the command it runs is classified too
// (it may be forbidden).
func (c *classifier) sudo(text, name string, rest []word, depth int) {
	c.add(text, Privileged, "runs as another user ("+name+")")
	i, ok := skipOptions(rest, sudoValueOpts, true)
	switch {
	case !ok:
		c.add(text, Destructive, name+" runs a command the classifier cannot read")
	case i >= len(rest) && anyExact(rest, "-i", "-s", "--login", "--shell"):
		c.add(text, Privileged, "opens a shell as another user")
	case i < len(rest):
		c.program(text, rest[i:], depth+1)
	}
}

// shellFlags are the options of sh and bash before -c that change
// nothing the classifier reads: errexit, nounset, xtrace, verbose,
// noglob, noclobber.
const shellFlags = "eufxvC"

// shell classifies sh, bash and their kind: with -c, the string it runs;
// otherwise it runs a script or its input, which the classifier cannot
// read.
func (c *classifier) shell(text, name string, rest []word, depth int) {
	if onlyVersion(rest) {
		c.add(text, ReadOnly, "prints a version")
		return
	}
	for i, a := range rest {
		if !a.lit {
			c.add(text, Destructive, name+" with an option the classifier cannot read")
			return
		}
		if !strings.HasPrefix(a.v, "-") || a.v == "-" || a.v == "--" || strings.HasPrefix(a.v, "--") {
			break
		}
		flags := a.v[1:]
		if strings.Trim(flags, shellFlags+"c") != "" {
			c.add(text, Destructive, name+" "+a.v+" is not an option the classifier reads")
			return
		}
		if strings.Contains(flags, "c") {
			// The first operand after the options is the command string.
			for j := i + 1; j < len(rest); j++ {
				if rest[j].lit && strings.HasPrefix(rest[j].v, "-") && rest[j].v != "-" {
					if strings.Trim(rest[j].v[1:], shellFlags) != "" {
						c.add(text, Destructive, name+" "+rest[j].v+" is not an option the classifier reads")
						return
					}
					continue
				}
				c.inner(text, rest[j], depth)
				return
			}
			c.add(text, Destructive, name+" -c without a command string")
			return
		}
	}
	c.add(text, Destructive, name+" runs a script or its input, which the classifier cannot read")
}

func onlyVersion(rest []word) bool {
	return len(rest) == 1 && rest[0].lit && (rest[0].v == "--version" || rest[0].v == "-V" || rest[0].v == "-v" || rest[0].v == "version")
}

// skipOptions returns the index of the first operand of rest, after its
// options (those in valueOpts take the next argument), a "--" and, with
// assigns, NAME=value arguments (sudo); false when an argument before
// it is not a literal.
func skipOptions(rest []word, valueOpts map[string]bool, assigns bool) (int, bool) {
	i := 0
	for i < len(rest) {
		a := rest[i]
		switch {
		case !a.lit:
			return i, false
		case a.v == "--":
			return i + 1, true
		case assigns && isAssignment(a.v):
		case !strings.HasPrefix(a.v, "-") || a.v == "-":
			return i, true
		case valueOpts[a.v]:
			i++
		}
		i++
	}
	return min(i, len(rest)), true
}

// isAssignment reports whether s is NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	return ok && isName(name)
}

// isName reports whether s is a shell variable name.
func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}
