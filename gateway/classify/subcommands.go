package classify

import (
	"regexp"
	"strings"
)

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
