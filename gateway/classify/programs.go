package classify

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// arg is one word of a simple command: its value when it is a literal.
type arg struct {
	v   string
	lit bool
}

// call classifies one simple command.
func (c *classifier) call(src string, ws []*syntax.Word, depth int) {
	text := src[int(ws[0].Pos().Offset()):int(ws[len(ws)-1].End().Offset())]
	args := make([]arg, len(ws))
	for i, w := range ws {
		args[i].v, args[i].lit = literal(w)
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

// writes classifies a program that writes each of its operands after the
// first skip ones (chmod's mode, chown's owner): forbidden paths are
// forbidden.
func (c *classifier) writes(text, name string, rest []arg, skip int, cl Class) {
	ops := operands(rest)
	if len(ops) <= skip {
		c.add(text, ReadOnly, name+" with nothing to change")
		return
	}
	for _, o := range ops[skip:] {
		if !o.lit {
			c.add(text, Destructive, name+" writes a path the classifier cannot read")
			continue
		}
		c.write(text, o.v, name+" changes "+o.v)
	}
	c.add(text, cl, name+" changes files")
}

// copy classifies cp, mv, install, ln and rsync: the last operand is
// written.
func (c *classifier) copy(text, name string, rest []arg) {
	if name == "rsync" && anyArg(rest, "--delete", "--remove-source-files") {
		c.add(text, Destructive, "rsync removes files")
	}
	ops := operands(rest)
	if len(ops) == 0 {
		c.add(text, ReadOnly, name+" with nothing to copy")
		return
	}
	dest := ops[len(ops)-1]
	if t, ok := optValue(rest, "-t", "--target-directory"); ok {
		dest = t
	}
	if !dest.lit {
		c.add(text, Destructive, name+" writes a path the classifier cannot read")
		return
	}
	c.write(text, dest.v, name+" writes "+dest.v)
}

func (c *classifier) dd(text string, rest []arg) {
	for _, a := range rest {
		if !a.lit {
			c.add(text, Destructive, "dd with an operand the classifier cannot read")
			return
		}
		if out, ok := strings.CutPrefix(a.v, "of="); ok {
			if strings.HasPrefix(out, "/dev/") && out != "/dev/null" && out != "/dev/stdout" {
				c.add(text, Destructive, "dd writes a device")
				return
			}
			c.write(text, out, "dd writes "+out)
			return
		}
	}
	c.add(text, ReadOnly, "dd writes to standard output")
}

// simpleSed is a sed script that only prints or substitutes to standard
// output: addresses with p, d, q, = or l; s/…/…/ with print flags.
var simpleSed = regexp.MustCompile(`^\s*(?:(?:[0-9]+|\$)?(?:,(?:[0-9]+|\$))?\s*[pdq=l]|(?:[0-9]+|\$)?(?:,(?:[0-9]+|\$))?\s*s/(?:[^/\\\n]|\\.)*/(?:[^/\\\n]|\\.)*/[gpiI0-9]*)\s*$`)

func (c *classifier) sed(text string, rest []arg) {
	var scripts []string
	explicit := false
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case !a.lit:
			if !explicit && len(scripts) == 0 {
				c.add(text, Destructive, "a sed program the classifier cannot read")
				return
			}
		case a.v == "-i" || strings.HasPrefix(a.v, "-i") || strings.HasPrefix(a.v, "--in-place") ||
			strings.HasPrefix(a.v, "-") && !strings.HasPrefix(a.v, "--") && strings.Contains(a.v[1:], "i") && !strings.ContainsAny(a.v[1:], "ef"):
			c.writes(text, "sed -i", rest[i+1:], 1, Mutating)
			return
		case a.v == "-e" || a.v == "--expression":
			explicit = true
			if i+1 < len(rest) {
				i++
				scripts = append(scripts, rest[i].v)
			}
		case a.v == "-f" || a.v == "--file" || strings.HasPrefix(a.v, "-f"):
			c.add(text, Destructive, "a sed program from a file the classifier cannot read")
			return
		case strings.HasPrefix(a.v, "-"):
		case !explicit && len(scripts) == 0:
			scripts = append(scripts, a.v)
		}
	}
	for _, s := range scripts {
		for _, part := range strings.Split(s, ";") {
			if strings.TrimSpace(part) != "" && !simpleSed.MatchString(part) {
				c.add(text, Destructive, "a sed program the classifier cannot read (it may write files or run commands)")
				return
			}
		}
	}
	c.add(text, ReadOnly, "sed prints")
}

func (c *classifier) systemctl(text, name string, rest []arg) {
	verb := firstOperand(rest)
	if name == "service" && len(operands(rest)) >= 2 {
		verb = operands(rest)[1].v
	}
	switch {
	case verb == "" || verb == "status" || verb == "show" || strings.HasPrefix(verb, "list") || strings.HasPrefix(verb, "is-") ||
		verb == "cat" || verb == "help" || verb == "get-default":
		c.add(text, ReadOnly, name+" "+verb+" reads")
	case verb == "start" || verb == "restart" || verb == "reload" || verb == "try-restart" || verb == "reload-or-restart" ||
		verb == "try-reload-or-restart" || verb == "daemon-reload" || verb == "enable" || verb == "reenable" || verb == "preset" || verb == "condrestart":
		c.add(text, Mutating, name+" "+verb+" changes a service")
	default:
		c.add(text, Destructive, name+" "+verb+" stops, disables or replaces")
	}
}

func (c *classifier) git(text string, rest []arg) {
	// git's own options come before the subcommand. Those known to take
	// a value have it skipped (-C PATH); one that sets configuration can
	// name a program to run (core.pager, core.sshCommand, an alias); any
	// other, or a word the classifier cannot read, may hide the
	// subcommand.
	for len(rest) > 0 && (!rest[0].lit || strings.HasPrefix(rest[0].v, "-")) {
		o := rest[0].v
		switch {
		case !rest[0].lit:
			c.add(text, Destructive, "git with an option the classifier cannot read")
			return
		case strings.HasPrefix(o, "-c") || strings.HasPrefix(o, "--config-env") || strings.HasPrefix(o, "--exec-path"):
			c.add(text, Destructive, "git "+o+" sets configuration that can run any program")
			return
		case gitValueOptions[o]:
			if len(rest) < 2 {
				c.add(text, Destructive, "git "+o+" without its value")
				return
			}
			rest = rest[2:]
		case gitFlagOptions[o] || gitValueOptions[strings.SplitN(o, "=", 2)[0]] && strings.Contains(o, "="):
			rest = rest[1:]
		default:
			c.add(text, Destructive, "git option "+o+" is not one the classifier knows")
			return
		}
	}
	verb := firstOperand(rest)
	switch verb {
	case "":
		c.add(text, ReadOnly, "git without a command prints its help")
		return
	case "status", "log", "diff", "show", "rev-parse", "describe", "ls-files", "ls-tree", "blame", "grep", "shortlog", "reflog", "cat-file", "version", "help", "ls-remote", "rev-list", "whatchanged", "for-each-ref", "show-ref", "count-objects", "verify-commit", "verify-tag", "name-rev", "merge-base", "var", "check-ignore", "check-attr":
		c.add(text, ReadOnly, "git "+verb+" reads")
		return
	case "clean", "rm", "filter-branch", "filter-repo", "prune", "update-ref", "replace":
		c.add(text, Destructive, "git "+verb+" removes or rewrites")
		return
	case "reset":
		if anyArg(rest, "--hard", "--merge", "--keep") {
			c.add(text, Destructive, "git reset --hard discards work")
			return
		}
	case "push":
		if anyArg(rest, "--force", "-f", "--force-with-lease", "--delete", "--mirror", "--prune") || anyPrefix(rest, "+", ":") {
			c.add(text, Destructive, "git push rewrites or deletes remote history")
			return
		}
	case "branch", "tag":
		if anyArg(rest, "-D", "-d", "--delete") {
			c.add(text, Destructive, "git "+verb+" deletes")
			return
		}
		if len(operands(rest)) == 1 {
			c.add(text, ReadOnly, "git "+verb+" lists")
			return
		}
	case "checkout", "restore", "stash":
		if anyArg(rest, "--", "-f", "--force", "drop", "clear") || verb == "restore" {
			c.add(text, Destructive, "git "+verb+" discards changes")
			return
		}
	case "remote":
		if len(operands(rest)) <= 1 || anyArg(rest, "-v") {
			c.add(text, ReadOnly, "git remote reads")
			return
		}
	case "config":
		if len(operands(rest)) <= 1 || anyArg(rest, "--get", "--list", "-l", "--get-all", "--get-regexp") {
			c.add(text, ReadOnly, "git config reads")
			return
		}
		// An alias, core.pager, core.fsmonitor, core.hooksPath, a
		// textconv driver: configuration names programs git runs later.
		c.add(text, Destructive, "git config writes configuration that can make git run any program")
		return
	case "pull", "fetch", "commit", "add", "merge", "rebase", "cherry-pick", "revert", "mv", "init", "clone", "am", "apply",
		"submodule", "worktree", "gc", "switch", "bisect", "notes", "sparse-checkout", "maintenance", "repack", "fsck", "archive", "bundle", "format-patch", "lfs":
	default:
		// Not a git command this classifier knows: an alias can run
		// any program.
		c.add(text, Destructive, "git "+verb+" is not a git command the classifier knows (an alias can run any program)")
		return
	}
	c.add(text, Mutating, "git "+verb+" changes a repository")
}

// gitValueOptions are git's own options that take the next word as their
// value (or "=VALUE").
var gitValueOptions = map[string]bool{"-C": true, "--git-dir": true, "--work-tree": true, "--namespace": true, "--attr-source": true, "--super-prefix": true, "--list-cmds": true}

// gitFlagOptions are git's own options without a value.
var gitFlagOptions = map[string]bool{"-p": true, "-P": true, "--paginate": true, "--no-pager": true, "--bare": true, "--no-replace-objects": true,
	"--no-lazy-fetch": true, "--no-optional-locks": true, "--no-advice": true, "--literal-pathspecs": true, "--glob-pathspecs": true,
	"--noglob-pathspecs": true, "--icase-pathspecs": true, "--version": true, "--help": true, "-h": true,
	"--html-path": true, "--man-path": true, "--info-path": true}

func (c *classifier) container(text, name string, rest []arg) {
	verb := firstOperand(rest)
	switch verb {
	case "ps", "images", "logs", "inspect", "version", "info", "stats", "top", "port", "diff", "history", "events":
		c.add(text, ReadOnly, name+" "+verb+" reads")
	case "rm", "rmi", "kill", "prune", "stop", "down":
		c.add(text, Destructive, name+" "+verb+" removes or stops")
	case "system", "volume", "network", "image", "container", "builder":
		if anyArg(rest, "prune", "rm", "remove") {
			c.add(text, Destructive, name+" "+verb+" removes")
		} else {
			c.add(text, Mutating, name+" "+verb)
		}
	case "run", "exec", "create":
		if anyArg(rest, "--privileged", "--pid=host", "--net=host", "--network=host", "--userns=host") || anyPrefix(rest, "-v/:", "--volume=/:", "/:") {
			c.add(text, Privileged, name+" "+verb+" with host privileges")
		} else {
			c.add(text, Destructive, name+" "+verb+" runs a command the classifier cannot read")
		}
	default:
		c.add(text, Mutating, name+" "+verb)
	}
}

func (c *classifier) kubectl(text, name string, rest []arg) {
	verb := firstOperand(rest)
	switch verb {
	case "get", "describe", "logs", "top", "explain", "version", "api-resources", "api-versions", "cluster-info", "diff":
		c.add(text, ReadOnly, name+" "+verb+" reads")
	case "auth", "config":
		if anyArg(rest, "can-i", "view", "get-contexts", "current-context") {
			c.add(text, ReadOnly, name+" "+verb+" reads")
		} else {
			c.add(text, Mutating, name+" "+verb)
		}
	case "delete", "drain", "replace", "exec", "cp", "debug", "attach", "port-forward", "proxy":
		c.add(text, Destructive, name+" "+verb+" removes, replaces or reaches inside")
	default:
		c.add(text, Mutating, name+" "+verb+" changes the cluster")
	}
}

func (c *classifier) packages(text, name string, rest []arg) {
	verb := firstOperand(rest)
	switch verb {
	case "list", "show", "search", "policy", "info", "freeze", "check", "outdated", "view", "ls", "query", "help", "version", "--version", "":
		c.add(text, ReadOnly, name+" "+verb+" reads")
	case "remove", "purge", "autoremove", "uninstall", "erase", "del", "rm", "autoclean", "clean":
		c.add(text, Destructive, name+" "+verb+" removes packages")
	default:
		c.add(text, Mutating, name+" "+verb+" installs or changes packages")
	}
}

func (c *classifier) curl(text string, rest []arg) {
	for i, a := range rest {
		if !a.lit {
			continue
		}
		switch {
		case a.v == "-o" || a.v == "--output":
			if i+1 < len(rest) {
				c.write(text, rest[i+1].v, "curl writes "+rest[i+1].v)
			}
		case a.v == "-O" || a.v == "--remote-name" || a.v == "--remote-name-all" || strings.HasPrefix(a.v, "-") && !strings.HasPrefix(a.v, "--") && strings.ContainsAny(a.v, "O"):
			c.add(text, Mutating, "curl writes a file")
		case a.v == "-d" || strings.HasPrefix(a.v, "--data") || a.v == "-F" || a.v == "--form" || a.v == "-T" || a.v == "--upload-file" || a.v == "--json":
			c.add(text, Mutating, "curl sends data")
		case a.v == "-X" || a.v == "--request":
			if i+1 < len(rest) && rest[i+1].lit && (strings.EqualFold(rest[i+1].v, "GET") || strings.EqualFold(rest[i+1].v, "HEAD")) {
				continue
			}
			c.add(text, Mutating, "curl sends a request that may change something")
		case strings.HasPrefix(a.v, "-X") && len(a.v) > 2 && !strings.EqualFold(a.v[2:], "GET") && !strings.EqualFold(a.v[2:], "HEAD"):
			c.add(text, Mutating, "curl sends a request that may change something")
		}
	}
	c.add(text, ReadOnly, "curl fetches")
}

func (c *classifier) tar(text string, rest []arg) {
	mode := ""
	if len(rest) > 0 && rest[0].lit {
		mode = strings.TrimPrefix(rest[0].v, "-")
	}
	switch {
	case anyArg(rest, "--delete"):
		c.add(text, Destructive, "tar deletes from an archive")
	case anyArg(rest, "-x", "--extract", "--get") || strings.ContainsAny(mode, "x"):
		c.add(text, Mutating, "tar extracts files")
	case anyArg(rest, "-t", "--list") || strings.ContainsAny(mode, "t") && !strings.ContainsAny(mode, "crux"):
		c.add(text, ReadOnly, "tar lists an archive")
	default:
		c.add(text, Mutating, "tar writes an archive")
	}
}

// operands are the arguments that are not options (after "--", all).
func operands(rest []arg) []arg {
	var out []arg
	dash := false
	for _, a := range rest {
		switch {
		case dash:
			out = append(out, a)
		case a.lit && a.v == "--":
			dash = true
		case a.lit && strings.HasPrefix(a.v, "-") && a.v != "-":
		default:
			out = append(out, a)
		}
	}
	return out
}

func firstOperand(rest []arg) string {
	for _, o := range operands(rest) {
		if o.lit {
			return o.v
		}
		return ""
	}
	return ""
}

func anyArg(rest []arg, names ...string) bool {
	for _, a := range rest {
		if !a.lit {
			continue
		}
		for _, n := range names {
			if a.v == n || strings.HasPrefix(a.v, n+"=") || strings.HasPrefix(n, "--") && strings.HasPrefix(a.v, n) {
				return true
			}
		}
	}
	return false
}

func anyExact(rest []arg, names ...string) bool {
	for _, a := range rest {
		for _, n := range names {
			if a.lit && a.v == n {
				return true
			}
		}
	}
	return false
}

func anyPrefix(rest []arg, prefixes ...string) bool {
	for _, a := range rest {
		for _, p := range prefixes {
			if a.lit && strings.HasPrefix(a.v, p) {
				return true
			}
		}
	}
	return false
}

func anyContains(rest []arg, s string) bool {
	for _, a := range rest {
		if a.lit && strings.Contains(a.v, s) {
			return true
		}
	}
	return false
}

func hasPair(rest []arg, opt, val string) bool {
	for i := 0; i+1 < len(rest); i++ {
		if rest[i].lit && rest[i].v == opt && rest[i+1].lit && rest[i+1].v == val {
			return true
		}
	}
	return false
}

func optValue(rest []arg, names ...string) (arg, bool) {
	for i, a := range rest {
		for _, n := range names {
			if a.lit && a.v == n && i+1 < len(rest) {
				return rest[i+1], true
			}
			if a.lit && strings.HasPrefix(a.v, n+"=") {
				return arg{v: strings.TrimPrefix(a.v, n+"="), lit: true}, true
			}
		}
	}
	return arg{}, false
}
