package classify

import "strings"

// byArguments classifies the programs whose class depends on their verb
// or their operands' form; false when name is none of them.
func (c *classifier) byArguments(text, name string, rest []word, depth int) bool {
	switch name {
	case "dd":
		c.dd(text, rest)
	case "sed":
		c.sed(text, rest)
	case "crontab":
		if len(rest) == 1 && rest[0].lit && rest[0].v == "-l" {
			c.add(text, ReadOnly, "lists cron jobs")
		} else {
			c.add(text, Forbidden, "installs or removes cron jobs")
		}
	case "visudo":
		c.add(text, Forbidden, "edits sudoers")
	case "systemctl", "service", "timedatectl", "hostnamectl", "loginctl":
		c.systemd(text, name, rest)
	case "git":
		c.git(text, rest)
	case "docker", "podman", "nerdctl":
		c.container(text, name, rest)
	case "kubectl", "oc":
		c.kubectl(text, name, rest)
	case "apt", "apt-get", "dnf", "yum", "zypper", "apk", "pip", "pip3", "npm", "gem", "snap", "brew":
		c.packages(text, name, rest)
	case "curl":
		c.curl(text, rest)
	case "wget":
		c.wget(text, rest)
	case "tar":
		c.tar(text, rest)
	case "sysctl":
		c.sysctl(text, rest)
	case "ip":
		c.ip(text, rest)
	case "openssl":
		c.openssl(text, rest)
	case "rm", "unlink", "shred", "rmdir", "srm", "wipe":
		c.remove(text, name, rest)
	case "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd", "unzstd", "compress", "uncompress":
		c.compress(text, name, rest)
	case "unzip", "patch", "cpio", "7z":
		c.add(text, Destructive, name+" writes files named by its input, anywhere the account can write")
	case "ssh-keygen", "mktemp":
		c.keygen(text, name, rest)
	case "chroot", "pkexec", "runuser", "setpriv", "nsenter", "unshare", "capsh", "sg":
		c.privileged(text, name, rest, depth)
	default:
		return false
	}
	return true
}

// ddOperands are dd's operands (KEY=VALUE), with what each value is.
var ddOperands = map[string]ValueKind{"if": ValueReadPath, "of": ValueWritePath, "bs": ValueNumber, "ibs": ValueNumber,
	"obs": ValueNumber, "cbs": ValueNumber, "count": ValueNumber, "skip": ValueNumber, "seek": ValueNumber,
	"iseek": ValueNumber, "oseek": ValueNumber, "conv": ValueText, "iflag": ValueText, "oflag": ValueText, "status": ValueText}

// dd writes every of= it is given (the last counts; all are classified).
func (c *classifier) dd(text string, rest []word) {
	for _, a := range rest {
		if !a.lit {
			c.add(text, Destructive, "dd with an operand the classifier cannot read")
			return
		}
		key, val, ok := strings.Cut(a.v, "=")
		kind, known := ddOperands[key]
		switch {
		case a.v == "--help" || a.v == "--version" || a.v == "--":
		case !ok || !known:
			c.add(text, Destructive, "dd "+a.v+" is not an operand the classifier knows")
			return
		case kind == ValueWritePath:
			c.writePath(text, val, "dd writes", writeOpen)
		}
	}
	c.add(text, ReadOnly, "dd copies to standard output")
}

// systemdVerbs are the verbs of systemctl, service and the *ctl tools
// that only show.
var systemdVerbs = set(`status show cat help list-units list-unit-files list-sockets list-timers list-jobs
	list-dependencies list-machines list-automounts list-paths is-active is-enabled is-failed is-system-running
	get-default show-environment list-timezones list-sessions list-users list-seats session-status user-status
	seat-status show-session show-user show-seat`)

var systemdOptions = compile(&model{exact: true, names: "systemctl", short: "t:p:aP:lqn:o:", long: "type= state= property= all recursive " +
	"reverse after before with-dependencies full value show-types job-mode= show-transaction ignore-inhibitors quiet " +
	"no-block no-wall no-reload no-legend no-pager no-ask-password system user global lines= output= plain " +
	"failed firmware-setup now runtime timestamp= check-inhibitors= kill-whom= signal= what= preset-mode= root= " +
	"image= marked read-only mkdir boot-loader-menu= boot-loader-entry= reboot-argument= when= dry-run help version",
	effects: "root,image:read"})

// systemd classifies systemctl and its kind by verb: a verb that shows
// reads; start, restart, reload, enable change a service (mutating);
// any other verb stops, disables, removes or sets (destructive; the
// set-* verbs of timedatectl and hostnamectl are privileged).
func (c *classifier) systemd(text, name string, rest []word) {
	var verb word
	if name == "service" {
		ops := operands(rest)
		switch {
		case len(ops) >= 2:
			verb = ops[1]
		case len(ops) == 0 && anyExact(rest, "--status-all"):
			c.add(text, ReadOnly, "service --status-all shows")
			return
		default:
			c.add(text, Destructive, "service with no verb the classifier reads")
			return
		}
	} else {
		_, ops, ok := c.parse(text, systemdOptions, rest)
		if !ok {
			return
		}
		if len(ops) == 0 {
			c.add(text, ReadOnly, name+" shows")
			return
		}
		verb = ops[0]
	}
	v := verb.v
	switch {
	case !verb.lit:
		c.add(text, Destructive, name+" with a verb the classifier cannot read")
	case systemdVerbs[v]:
		c.add(text, ReadOnly, name+" "+v+" shows")
	case v == "enable" || v == "reenable" || v == "preset" || v == "preset-all" || v == "mask" || v == "link" ||
		v == "add-wants" || v == "add-requires" || v == "edit" || v == "set-property" || v == "revert" || v == "set-default":
		c.add(text, Forbidden, name+" "+v+" writes unit files or links under /etc/systemd or ~/.config/systemd: a service runs programs at boot or login")
	case strings.HasPrefix(v, "set-"):
		c.add(text, Privileged, name+" "+v+" changes the system's settings")
	case v == "start" || v == "restart" || v == "reload" || v == "try-restart" || v == "reload-or-restart" ||
		v == "try-reload-or-restart" || v == "daemon-reload" || v == "condrestart":
		c.add(text, Mutating, name+" "+v+" changes a service")
	default:
		c.add(text, Destructive, name+" "+v+" stops, disables, removes or is not a verb the classifier knows")
	}
}

// sysctlModel: sysctl's options (procps).
var sysctlModel = compile(&model{exact: true, names: "sysctl", short: "abeNnqoxAXdr:hVwpf::", long: "all binary ignore names values " +
	"pattern= quiet write load? system deprecated help version",
	effects: "w,write,p,f,load,system:privileged:sysctl_changes_kernel_parameters"})

// sysctl reads kernel parameters, unless it writes (-w, -p, NAME=VALUE).
func (c *classifier) sysctl(text string, rest []word) {
	opts, ops, ok := c.parse(text, sysctlModel, rest)
	if !ok {
		return
	}
	for _, p := range opts {
		c.option(text, sysctlModel, p.o, p.val)
	}
	for _, o := range ops {
		switch {
		case !o.lit:
			c.add(text, Privileged, "sysctl "+o.src+" may change a kernel parameter")
		case strings.Contains(o.v, "=") && kernelRuns(o.v):
			c.add(text, Forbidden, "sysctl "+o.v+" names a program the kernel runs as root")
		case strings.Contains(o.v, "="):
			c.add(text, Privileged, "sysctl "+o.src+" changes a kernel parameter")
		}
	}
	c.add(text, ReadOnly, "sysctl reads kernel parameters")
}

// ipReadVerbs are ip's verbs that show.
var ipReadVerbs = set(`show list lst ls sh get help`)

// ipOptions are ip's options before the object: how it prints. -batch
// and -force run commands from a file; -netns enters a namespace.
var ipOptions = set(`-4 -6 -0 -B -M -s -stats -statistics -d -details -j -json -p -pretty -c -color -br -brief -o
	-oneline -h -human -human-readable -r -resolve -t -timestamp -ts -tshort -a -all -iec -N -Numeric -V -Version`)

// ip shows network configuration; any verb but the showing ones changes
// it (privileged).
func (c *classifier) ip(text string, rest []word) {
	i := 0
	for ; i < len(rest); i++ {
		a := rest[i]
		switch {
		case !a.lit:
			c.add(text, Destructive, "ip "+a.src+" is not a literal")
			return
		case a.v == "-f" || a.v == "-family":
			i++
		case strings.HasPrefix(a.v, "-") && !ipOptions[a.v] && !strings.HasPrefix(a.v, "-color="):
			c.add(text, Destructive, "ip "+a.v+" is not an option the classifier knows")
			return
		case !strings.HasPrefix(a.v, "-"):
			goto object
		}
	}
object:
	for _, a := range rest[i:] {
		if !a.lit {
			c.add(text, Destructive, "ip "+a.src+" is not a literal")
			return
		}
	}
	switch {
	case i+1 >= len(rest):
		c.add(text, ReadOnly, "ip shows network configuration")
	case ipReadVerbs[rest[i+1].v] || rest[i].v == "help":
		c.add(text, ReadOnly, "ip "+rest[i].v+" "+rest[i+1].v+" shows")
	default:
		c.add(text, Privileged, "ip "+rest[i].v+" "+rest[i+1].v+" changes network configuration or runs a command")
	}
}

// kernelRuns reports whether a kernel parameter names a program the
// kernel runs (a pipe in core_pattern, the modprobe and hotplug helpers).
func kernelRuns(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	k = strings.ReplaceAll(k, "/", ".")
	return strings.Contains(k, "core_pattern") || strings.Contains(k, "modprobe") || strings.Contains(k, "hotplug") ||
		strings.Contains(k, "usermodehelper") || strings.Contains(k, "binfmt")
}

// remove classifies rm and its kind: it removes its operands (and with
// -r all they hold), at least destructive, forbidden where the table
// says.
func (c *classifier) remove(text, name string, rest []word) {
	c.add(text, Destructive, name+" removes files")
	dash := false
	for _, a := range rest {
		switch {
		case !dash && a.lit && a.v == "--":
			dash = true
		case !dash && a.lit && strings.HasPrefix(a.v, "-") && a.v != "-":
		default:
			c.writeWord(text, a, name+" removes", writeTree)
		}
	}
}

// compress classifies gzip and its kind: each operand is replaced by
// the file it is made into (FILE.gz, or FILE from FILE.gz).
func (c *classifier) compress(text, name string, rest []word) {
	c.add(text, Mutating, name+" replaces files")
	for _, a := range rest {
		if a.lit && strings.HasPrefix(a.v, "-") {
			continue
		}
		c.writeWord(text, a, name+" replaces", writeTree)
		if !a.lit {
			continue
		}
		for _, ext := range []string{".gz", ".tgz", ".bz2", ".xz", ".lzma", ".zst", ".Z", ".z"} {
			if out, ok := strings.CutSuffix(a.v, ext); ok && out != "" {
				c.writePath(text, out, name+" writes", writeMake)
			}
		}
		c.writePath(text, a.v+".gz", name+" writes", writeMake)
	}
}

// keygen classifies ssh-keygen and mktemp: they make files, where -f
// (ssh-keygen: FILE and FILE.pub) or -p/--tmpdir (mktemp) or a template
// with a directory says.
func (c *classifier) keygen(text, name string, rest []word) {
	c.add(text, Mutating, name+" makes files")
	for i, a := range rest {
		switch {
		case !a.lit:
			c.writeWord(text, a, name+" makes", writeMake)
		case name == "ssh-keygen" && a.v == "-f" && i+1 < len(rest):
			c.writeWord(text, rest[i+1], name+" writes", writeMake)
			if rest[i+1].lit {
				c.writePath(text, rest[i+1].v+".pub", name+" writes", writeMake)
			}
		case name == "mktemp" && (a.v == "-p" || a.v == "--tmpdir") && i+1 < len(rest):
			c.writeWord(text, rest[i+1], name+" makes a file in", writeInDir)
		case name == "mktemp" && strings.HasPrefix(a.v, "--tmpdir="):
			c.writePath(text, strings.TrimPrefix(a.v, "--tmpdir="), name+" makes a file in", writeInDir)
		case name == "mktemp" && !strings.HasPrefix(a.v, "-") && strings.Contains(a.v, "/"):
			c.writePath(text, a.v, name+" makes", writeMake)
		}
	}
}
