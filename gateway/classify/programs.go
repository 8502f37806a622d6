package classify

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call classifies one simple command.
func (c *classifier) call(src string, ws []*syntax.Word, depth int) {
	text := src[int(ws[0].Pos().Offset()):int(ws[len(ws)-1].End().Offset())]
	args := make([]arg, len(ws))
	for i, w := range ws {
		args[i] = readWord(src, w)
	}
	c.program(text, args, depth)
}

// Programs by what they do whatever their arguments.
var (
	readOnly = set(`ls dir vdir cat tac head tail less more grep egrep fgrep zgrep rg ag wc sort uniq cut tr nl
		column paste join comm diff cmp md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum
		base32 base64 od hexdump strings file stat realpath readlink basename dirname pwd echo printf true false
		test [ date cal uptime uname id whoami groups who w last lastlog users ps pgrep pidof free vmstat iostat
		mpstat pidstat df du lsblk blkid lscpu lsmod lspci lsusb lsof ss netstat ping ping6 traceroute tracepath
		mtr dig nslookup host getent printenv which type whereis locale sleep seq jq tree locate nproc arch tty
		cd : zcat bzcat xzcat zless timedatectl loginctl hostnamectl findmnt namei expr factor numfmt fold fmt
		expand unexpand rev shuf tsort look top htop history htpasswd-check wait read let set shopt
		unset umask alias unalias times caller help dirs pushd popd hash jobs fg bg export readonly local
		declare typeset free ulimit nstat lslocks lsns exit return break continue shift getopts
		sleep true false basename`)
	mutating = set(`mkdir touch patch logger ssh-keygen gzip gunzip bzip2 bunzip2 xz unxz zip unzip split csplit
		mkfifo mktemp htpasswd`)
	destructive = set(`rm rmdir unlink shred mkfs mke2fs mkswap wipefs fdisk sfdisk cfdisk parted sgdisk gdisk
		truncate reboot shutdown poweroff halt init telinit kexec eval source . ssh scp sftp nc ncat netcat
		socat telnet ftp exec trap`)
	privileged = set(`pkexec runuser setpriv nsenter chroot unshare passwd chpasswd chage useradd usermod userdel
		adduser deluser groupadd groupmod groupdel gpasswd newgrp mount umount swapon swapoff modprobe insmod
		rmmod setcap chattr iptables ip6tables iptables-restore nft ufw firewall-cmd setenforce setfacl
		capsh sg`)
	shells       = set(`sh bash dash zsh ksh mksh ash fish busybox`)
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
func (c *classifier) program(text string, args []arg, depth int) {
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
	if c.runner(text, name, rest, depth) || c.byArguments(text, name, rest) {
		return
	}
	switch {
	case readOnly[name]:
		c.add(text, ReadOnly, name+" reads")
	case mutating[name]:
		c.add(text, Mutating, name+" writes files")
	case destructive[name]:
		c.add(text, Destructive, name+" destroys or runs what the classifier cannot see")
	case privileged[name]:
		c.add(text, Privileged, name+" changes users, mounts, the kernel or the network")
	default:
		c.add(text, Destructive, "unknown program "+name)
	}
}

// runner classifies the programs that run other commands (wrappers,
// sudo, su, shells, interpreters, xargs, find, watch) and openssl; false
// when name is none of them.
func (c *classifier) runner(text, name string, rest []arg, depth int) bool {
	switch {
	case name == "env" || name == "nice" || name == "nohup" || name == "time" || name == "stdbuf" || name == "ionice" ||
		name == "timeout" || name == "command" || name == "builtin" || name == "chrt" || name == "taskset" || name == "setsid" || name == "flock":
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
	case name == "openssl":
		if anyArg(rest, "-out", "-keyout") || anyExact(rest, "genrsa", "genpkey", "req", "ca", "rand") && anyArg(rest, "-out") {
			c.add(text, Mutating, "openssl writes files")
		} else {
			c.add(text, ReadOnly, "openssl reads or prints")
		}
	case name == "watch":
		c.watch(text, rest, depth)
	default:
		return false
	}
	return true
}

// byArguments classifies the programs whose class depends on their
// subcommand, options or operands; false when name is none of them.
func (c *classifier) byArguments(text, name string, rest []arg) bool {
	switch {
	case name == "tee":
		c.writes(text, "tee", rest, 0, Mutating)
	case name == "cp" || name == "mv" || name == "install" || name == "ln" || name == "rsync":
		c.copy(text, name, rest)
	case name == "chmod" || name == "chown" || name == "chgrp":
		c.writes(text, name, rest, 1, Mutating)
	case name == "touch" || name == "mkdir":
		c.writes(text, name, rest, 0, Mutating)
	case name == "dd":
		c.dd(text, rest)
	case name == "sed":
		c.sed(text, rest)
	case name == "kill" || name == "killall" || name == "pkill":
		if len(rest) > 0 && rest[0].lit && (rest[0].v == "-0" || rest[0].v == "-l" || rest[0].v == "-L") {
			c.add(text, ReadOnly, "checks or lists signals")
		} else {
			c.add(text, Destructive, "ends processes")
		}
	case name == "crontab":
		if len(rest) == 1 && rest[0].lit && rest[0].v == "-l" {
			c.add(text, ReadOnly, "lists cron jobs")
		} else {
			c.add(text, Forbidden, "installs or removes cron jobs")
		}
	case name == "visudo":
		c.add(text, Forbidden, "edits sudoers")
	case name == "systemctl" || name == "service":
		c.systemctl(text, name, rest)
	case name == "journalctl":
		if anyArg(rest, "--vacuum", "--rotate", "--flush", "--relinquish-var") {
			c.add(text, Destructive, "removes or rotates journal files")
		} else {
			c.add(text, ReadOnly, "reads the journal")
		}
	case name == "dmesg":
		if anyArg(rest, "-c", "-C", "--clear", "--read-clear") {
			c.add(text, Destructive, "clears the kernel log")
		} else {
			c.add(text, ReadOnly, "reads the kernel log")
		}
	case name == "git":
		c.git(text, rest)
	case name == "docker" || name == "podman" || name == "nerdctl":
		c.container(text, name, rest)
	case name == "kubectl" || name == "oc":
		c.kubectl(text, name, rest)
	case name == "apt" || name == "apt-get" || name == "dnf" || name == "yum" || name == "zypper" || name == "apk" ||
		name == "pip" || name == "pip3" || name == "npm" || name == "gem" || name == "snap" || name == "brew":
		c.packages(text, name, rest)
	case name == "curl":
		c.curl(text, rest)
	case name == "wget":
		if anyArg(rest, "--spider") || hasPair(rest, "-O", "-") || anyExact(rest, "-O-", "-qO-") {
			c.add(text, ReadOnly, "fetches to standard output")
		} else {
			c.add(text, Mutating, "downloads a file")
		}
	case name == "tar":
		c.tar(text, rest)
	case name == "sysctl":
		if len(rest) > 0 && (anyExact(rest, "-w", "--write", "-p", "--load", "--system") || anyContains(rest, "=")) {
			c.add(text, Privileged, "changes kernel parameters")
		} else {
			c.add(text, ReadOnly, "reads kernel parameters")
		}
	case name == "hostname":
		if len(rest) > 0 && rest[0].lit && !strings.HasPrefix(rest[0].v, "-") {
			c.add(text, Privileged, "changes the host name")
		} else {
			c.add(text, ReadOnly, "prints the host name")
		}
	case name == "ip":
		if anyExact(rest, "add", "del", "delete", "set", "flush", "change", "replace", "append", "exec") {
			c.add(text, Privileged, "changes network configuration")
		} else {
			c.add(text, ReadOnly, "shows network configuration")
		}
	default:
		return false
	}
	return true
}

// inner classifies a command string run by a shell or wrapper (sh -c,
// su -c).
func (c *classifier) inner(text string, a arg, depth int) {
	if !a.lit {
		c.add(text, Destructive, "runs a command string the classifier cannot read")
		return
	}
	c.line(a.v, depth+1)
}

// wrapperValueOpts are the options of wrappers that take a value.
var wrapperValueOpts = map[string]map[string]bool{
	"env":     set(`-u --unset -C --chdir -S --split-string`),
	"nice":    set(`-n --adjustment`),
	"ionice":  set(`-c --class -n --classdata -p --pid -P --pgid -u --uid`),
	"timeout": set(`-s --signal -k --kill-after`),
	"chrt":    set(``),
	"taskset": set(``),
	"flock":   set(`-w --timeout -E --conflict-exit-code`),
	"stdbuf":  set(`-i -o -e`),
}

// wrapper classifies a program that runs the rest of its arguments as a
// command.
func (c *classifier) wrapper(text, name string, rest []arg, depth int) {
	i, ok := skipOptions(rest, wrapperValueOpts[name], name == "env")
	opts := rest[:i]
	switch {
	case !ok:
		c.add(text, Destructive, name+" runs a command the classifier cannot read")
		return
	case name == "command" && anyExact(opts, "-v", "-V"):
		c.add(text, ReadOnly, "looks a command up")
		return
	case name == "env" && (anyExact(opts, "-S") || anyPrefix(opts, "--split-string")):
		c.add(text, Destructive, "env -S splits a string the classifier does not")
		return
	}
	switch name {
	case "timeout":
		i++ // the duration
	case "chrt", "taskset":
		i++ // the priority or mask
	case "flock":
		i++ // the lock file
	}
	if i >= len(rest) {
		c.add(text, ReadOnly, name+" with no command")
		return
	}
	c.program(text, rest[i:], depth+1)
}

// sudoValueOpts are sudo's and doas's options that take a value.
var sudoValueOpts = set(`-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role -t --type -U --other-user -T --command-timeout -a`)

func (c *classifier) sudo(text, name string, rest []arg, depth int) {
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

// shell classifies sh, bash and their kind: with -c, the string it runs;
// otherwise it runs a script or its input, which the classifier cannot
// read.
func (c *classifier) shell(text, name string, rest []arg, depth int) {
	if name == "busybox" {
		if len(rest) > 0 {
			c.program(text, rest, depth+1)
		}
		return
	}
	for i, a := range rest {
		if !a.lit {
			break
		}
		if !strings.HasPrefix(a.v, "-") || a.v == "-" || a.v == "--" {
			break
		}
		if !strings.HasPrefix(a.v, "--") && strings.Contains(a.v, "c") {
			// The first operand after the options is the command string.
			for j := i + 1; j < len(rest); j++ {
				if rest[j].lit && strings.HasPrefix(rest[j].v, "-") && rest[j].v != "-" {
					continue
				}
				c.inner(text, rest[j], depth)
				return
			}
			c.add(text, Destructive, name+" -c without a command string")
			return
		}
	}
	if onlyVersion(rest) {
		c.add(text, ReadOnly, "prints a version")
		return
	}
	c.add(text, Destructive, name+" runs a script or its input, which the classifier cannot read")
}

func onlyVersion(rest []arg) bool {
	return len(rest) == 1 && rest[0].lit && (rest[0].v == "--version" || rest[0].v == "-V" || rest[0].v == "-v" || rest[0].v == "version")
}

// skipOptions returns the index of the first operand of rest, after its
// options (those in valueOpts take the next argument), a "--" and, with
// assigns, NAME=value arguments (env, sudo); false when an argument before
// it is not a literal.
func skipOptions(rest []arg, valueOpts map[string]bool, assigns bool) (int, bool) {
	i := 0
	for i < len(rest) {
		a := rest[i]
		switch {
		case !a.lit:
			return i, false
		case a.v == "--":
			return i + 1, true
		case assigns && assignRE.MatchString(a.v):
		case !strings.HasPrefix(a.v, "-") || a.v == "-":
			return i, true
		case valueOpts[a.v]:
			i++
		}
		i++
	}
	return min(i, len(rest)), true
}

// assignRE is a NAME=value argument.
var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

var watchValueOpts = set(`-n --interval -q --equexit`)

// watch runs its operands, joined, with sh -c (or as argv with -x).
func (c *classifier) watch(text string, rest []arg, depth int) {
	i, ok := skipOptions(rest, watchValueOpts, false)
	switch {
	case !ok:
		c.add(text, Destructive, "watch runs a command the classifier cannot read")
	case i >= len(rest):
		c.add(text, ReadOnly, "watch with no command")
	case anyExact(rest[:i], "-x", "--exec"):
		c.program(text, rest[i:], depth+1)
	default:
		parts := make([]string, 0, len(rest)-i)
		for _, a := range rest[i:] {
			if !a.lit {
				c.add(text, Destructive, "watch runs a command the classifier cannot read")
				return
			}
			parts = append(parts, a.v)
		}
		c.line(strings.Join(parts, " "), depth+1)
	}
}

var xargsValueOpts = set(`-a --arg-file -d --delimiter -E -e --eof -I -i --replace -L -l --max-lines -n --max-args -P --max-procs -s --max-chars --process-slot-var`)

func (c *classifier) xargs(text string, rest []arg, depth int) {
	i, ok := skipOptions(rest, xargsValueOpts, false)
	switch {
	case !ok:
		c.add(text, Destructive, "xargs runs a command the classifier cannot read")
	case i >= len(rest):
		c.add(text, ReadOnly, "xargs echoes its input")
	default:
		// The command gets more arguments from the input; its program,
		// and what is written, can be read.
		c.program(text, rest[i:], depth+1)
	}
}

func (c *classifier) find(text string, rest []arg, depth int) {
	cl, rule := ReadOnly, "find lists files"
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !a.lit {
			continue // a starting point or pattern
		}
		switch a.v {
		case "-delete":
			c.add(text, Destructive, "find -delete removes files")
			return
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(rest) && !(rest[j].lit && (rest[j].v == ";" || rest[j].v == "+")) {
				j++
			}
			if j > i+1 {
				c.program(text, rest[i+1:j], depth+1)
			}
			i = j
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(rest) {
				c.write(text, rest[i+1].v, "find "+a.v+" writes "+rest[i+1].v)
			}
		}
	}
	c.add(text, cl, rule)
}
