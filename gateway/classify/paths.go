package classify

import (
	"path"
	"strings"
)

// pathRule is one row of the table of paths whose writing is more than a
// write: it grants access, or makes a later login, command, boot or
// scheduled job run programs.
type pathRule struct {
	// pattern: "/abs/path" the path itself; "/abs/dir/" the directory and
	// all under it; "~/rel" (or "~/rel/") the same in any home directory
	// (and any path ending so); "*/name" a file of that name anywhere.
	// Path components may hold glob characters (path.Match).
	pattern string
	class   Class
	why     string
}

// Why a path is in the table.
const (
	whyAccess    = "a file that grants access to the machine"
	whyScheduled = "a file that makes a login, service, boot or scheduled job run programs"
	whyLater     = "a file that names programs a later command runs"
	whyOnPath    = "a directory of programs that commands run by name"
)

// sensitivePaths is the one table of paths the classifier treats as more
// than an ordinary write. Forbidden rows grant access or run programs
// without anybody running a command (logins, services, cron, boot, the
// package manager, the dynamic linker); destructive rows make a later
// ordinary command run programs. docs/approvals.md lists it.
var sensitivePaths = []pathRule{
	// Access.
	{"*/authorized_keys", Forbidden, whyAccess},
	{"*/authorized_keys2", Forbidden, whyAccess},
	{"~/.ssh/rc", Forbidden, whyScheduled},
	{"~/.ssh/environment", Forbidden, whyScheduled},
	{"~/.rhosts", Forbidden, whyAccess},
	{"~/.shosts", Forbidden, whyAccess},
	{"~/.k5login", Forbidden, whyAccess},
	{"~/.k5users", Forbidden, whyAccess},
	{"~/.forward", Forbidden, whyScheduled},
	{"~/.pam_environment", Forbidden, whyScheduled},
	{"/etc/passwd", Forbidden, whyAccess},
	{"/etc/shadow", Forbidden, whyAccess},
	{"/etc/group", Forbidden, whyAccess},
	{"/etc/gshadow", Forbidden, whyAccess},
	{"/etc/passwd-", Forbidden, whyAccess},
	{"/etc/shadow-", Forbidden, whyAccess},
	{"/etc/subuid", Forbidden, whyAccess},
	{"/etc/subgid", Forbidden, whyAccess},
	{"/etc/sudoers", Forbidden, whyAccess},
	{"/etc/sudoers.d/", Forbidden, whyAccess},
	{"/etc/doas.conf", Forbidden, whyAccess},
	{"/etc/ssh/", Forbidden, whyAccess},
	{"/etc/pam.d/", Forbidden, whyAccess},
	{"/etc/pam.conf", Forbidden, whyAccess},
	{"/etc/security/", Forbidden, whyAccess},
	{"/etc/polkit-1/", Forbidden, whyAccess},
	{"/etc/hosts.equiv", Forbidden, whyAccess},
	{"/etc/shosts.equiv", Forbidden, whyAccess},
	{"/etc/nsswitch.conf", Forbidden, whyAccess},
	{"/etc/login.defs", Forbidden, whyAccess},
	{"/etc/shells", Forbidden, whyAccess},
	{"/etc/securetty", Forbidden, whyAccess},
	{"/etc/aliases", Forbidden, whyScheduled},
	// Scheduled: cron, at, systemd, init, boot, login scripts.
	{"/etc/cron*/", Forbidden, whyScheduled},
	{"/etc/anacrontab", Forbidden, whyScheduled},
	{"/var/spool/cron/", Forbidden, whyScheduled},
	{"/var/spool/at/", Forbidden, whyScheduled},
	{"/var/spool/anacron/", Forbidden, whyScheduled},
	{"/etc/systemd/", Forbidden, whyScheduled},
	{"/run/systemd/", Forbidden, whyScheduled},
	{"/lib/systemd/", Forbidden, whyScheduled},
	{"/usr/lib/systemd/", Forbidden, whyScheduled},
	{"/usr/local/lib/systemd/", Forbidden, whyScheduled},
	{"~/.config/systemd/", Forbidden, whyScheduled},
	{"~/.local/share/systemd/", Forbidden, whyScheduled},
	{"/etc/xdg/", Forbidden, whyScheduled},
	{"~/.config/autostart/", Forbidden, whyScheduled},
	{"/etc/init.d/", Forbidden, whyScheduled},
	{"/etc/init/", Forbidden, whyScheduled},
	{"/etc/rc*/", Forbidden, whyScheduled},
	{"/etc/inittab", Forbidden, whyScheduled},
	{"/etc/profile", Forbidden, whyScheduled},
	{"/etc/profile.d/", Forbidden, whyScheduled},
	{"/etc/bash.bashrc", Forbidden, whyScheduled},
	{"/etc/bashrc", Forbidden, whyScheduled},
	{"/etc/bash.bash_logout", Forbidden, whyScheduled},
	{"/etc/zsh/", Forbidden, whyScheduled},
	{"/etc/zshenv", Forbidden, whyScheduled},
	{"/etc/zprofile", Forbidden, whyScheduled},
	{"/etc/zshrc", Forbidden, whyScheduled},
	{"/etc/csh.cshrc", Forbidden, whyScheduled},
	{"/etc/csh.login", Forbidden, whyScheduled},
	{"/etc/environment", Forbidden, whyScheduled},
	{"/etc/environment.d/", Forbidden, whyScheduled},
	{"~/.config/environment.d/", Forbidden, whyScheduled},
	{"/etc/update-motd.d/", Forbidden, whyScheduled},
	{"/etc/motd.d/", Forbidden, whyScheduled},
	{"/etc/logrotate.conf", Forbidden, whyScheduled},
	{"/etc/logrotate.d/", Forbidden, whyScheduled},
	{"/etc/udev/", Forbidden, whyScheduled},
	{"/lib/udev/", Forbidden, whyScheduled},
	{"/usr/lib/udev/", Forbidden, whyScheduled},
	{"/etc/modprobe.d/", Forbidden, whyScheduled},
	{"/etc/modules", Forbidden, whyScheduled},
	{"/etc/modules-load.d/", Forbidden, whyScheduled},
	{"/etc/sysctl.conf", Forbidden, whyScheduled},
	{"/etc/sysctl.d/", Forbidden, whyScheduled},
	{"/etc/tmpfiles.d/", Forbidden, whyScheduled},
	{"/etc/NetworkManager/dispatcher.d/", Forbidden, whyScheduled},
	{"/etc/network/", Forbidden, whyScheduled},
	{"/etc/dhcp/", Forbidden, whyScheduled},
	{"/etc/ppp/", Forbidden, whyScheduled},
	{"/etc/X11/", Forbidden, whyScheduled},
	{"/etc/default/", Forbidden, whyScheduled},
	{"/etc/sysconfig/", Forbidden, whyScheduled},
	{"/etc/grub.d/", Forbidden, whyScheduled},
	{"/etc/default/grub", Forbidden, whyScheduled},
	{"/boot/", Forbidden, whyScheduled},
	{"/etc/initramfs-tools/", Forbidden, whyScheduled},
	// The package manager and the dynamic linker run what they are told
	// as root.
	{"/etc/apt/", Forbidden, whyScheduled},
	{"/etc/dpkg/", Forbidden, whyScheduled},
	{"/etc/yum.repos.d/", Forbidden, whyScheduled},
	{"/etc/yum/", Forbidden, whyScheduled},
	{"/etc/dnf/", Forbidden, whyScheduled},
	{"/etc/ld.so.preload", Forbidden, whyScheduled},
	{"/etc/ld.so.conf", Forbidden, whyScheduled},
	{"/etc/ld.so.conf.d/", Forbidden, whyScheduled},
	{"/etc/ld.so.cache", Forbidden, whyScheduled},
	// Programs that commands run by name, and system libraries.
	{"/bin/", Forbidden, whyOnPath},
	{"/sbin/", Forbidden, whyOnPath},
	{"/usr/bin/", Forbidden, whyOnPath},
	{"/usr/sbin/", Forbidden, whyOnPath},
	{"/usr/local/bin/", Forbidden, whyOnPath},
	{"/usr/local/sbin/", Forbidden, whyOnPath},
	{"/lib/", Forbidden, whyOnPath},
	{"/lib64/", Forbidden, whyOnPath},
	{"/usr/lib/", Forbidden, whyOnPath},
	{"/usr/lib64/", Forbidden, whyOnPath},
	{"/usr/local/lib/", Forbidden, whyOnPath},
	{"/usr/libexec/", Forbidden, whyOnPath},
	{"/usr/share/", Forbidden, whyOnPath},
	{"/opt/", Destructive, whyOnPath},
	{"/var/lib/dpkg/", Forbidden, whyScheduled},
	// The kernel's files: /proc reaches every file again (/proc/self/root)
	// and, with /sys, changes the kernel.
	{"/proc/", Forbidden, "a path under /proc, which reaches any file and the kernel's settings"},
	{"/sys/", Privileged, "a kernel setting"},
	// A later command of the same user runs what these name.
	{"~/.bashrc", Destructive, whyLater},
	{"~/.bash_profile", Destructive, whyLater},
	{"~/.bash_login", Destructive, whyLater},
	{"~/.bash_logout", Destructive, whyLater},
	{"~/.bash_aliases", Destructive, whyLater},
	{"~/.profile", Destructive, whyLater},
	{"~/.zshrc", Destructive, whyLater},
	{"~/.zshenv", Destructive, whyLater},
	{"~/.zprofile", Destructive, whyLater},
	{"~/.zlogin", Destructive, whyLater},
	{"~/.zlogout", Destructive, whyLater},
	{"~/.kshrc", Destructive, whyLater},
	{"~/.mkshrc", Destructive, whyLater},
	{"~/.cshrc", Destructive, whyLater},
	{"~/.tcshrc", Destructive, whyLater},
	{"~/.login", Destructive, whyLater},
	{"~/.logout", Destructive, whyLater},
	{"~/.config/fish/", Destructive, whyLater},
	{"~/.xinitrc", Destructive, whyLater},
	{"~/.xsession", Destructive, whyLater},
	{"~/.xprofile", Destructive, whyLater},
	{"~/.inputrc", Destructive, whyLater},
	{"~/.ssh/config", Destructive, whyLater},
	{"~/.gitconfig", Destructive, whyLater},
	{"~/.config/git/", Destructive, whyLater},
	{"/etc/gitconfig", Forbidden, whyLater},
	{"*/.git/", Destructive, whyLater},
	{".git/", Destructive, whyLater},
	{"*/.gitattributes", Destructive, whyLater},
	{"~/.vimrc", Destructive, whyLater},
	{"~/.vim/", Destructive, whyLater},
	{"~/.config/nvim/", Destructive, whyLater},
	{"~/.emacs", Destructive, whyLater},
	{"~/.emacs.d/", Destructive, whyLater},
	{"~/.npmrc", Destructive, whyLater},
	{"~/.yarnrc", Destructive, whyLater},
	{"~/.pip/", Destructive, whyLater},
	{"~/.config/pip/", Destructive, whyLater},
	{"~/.pydistutils.cfg", Destructive, whyLater},
	{"~/.local/lib/", Destructive, whyLater},
	{"~/.local/bin/", Destructive, whyOnPath},
	{"~/bin/", Destructive, whyOnPath},
	{"~/.cargo/", Destructive, whyLater},
	{"~/.docker/", Destructive, whyLater},
	{"~/.kube/", Destructive, whyLater},
	{"~/.aws/", Destructive, whyLater},
	{"~/.netrc", Destructive, whyLater},
	{"~/.wgetrc", Destructive, whyLater},
	{"~/.curlrc", Destructive, whyLater},
	{"~/.lesskey", Destructive, whyLater},
	{"~/.config/lesskey", Destructive, whyLater},
	{"~/.mailcap", Destructive, whyLater},
	{"~/.terraformrc", Destructive, whyLater},
	{"~/.gdbinit", Destructive, whyLater},
	{"~/.psqlrc", Destructive, whyLater},
	{"~/.sqliterc", Destructive, whyLater},
	{"~/.tmux.conf", Destructive, whyLater},
	{"~/.screenrc", Destructive, whyLater},
	{"~/.exrc", Destructive, whyLater},
	{"~/.hgrc", Destructive, whyLater},
	{"~/.Rprofile", Destructive, whyLater},
	{"~/.irbrc", Destructive, whyLater},
	{"~/.gradle/", Destructive, whyLater},
	{"~/.m2/", Destructive, whyLater},
	{"~/.gnupg/", Destructive, whyLater},
	{"~/.config/", Destructive, whyLater},
	{"~/.local/share/applications/", Destructive, whyLater},
	{"*/sitecustomize.py", Destructive, whyLater},
	{"*/usercustomize.py", Destructive, whyLater},
	{"*/*.pth", Destructive, whyLater},
}

// sensitive returns the class and reason of writing p, a path cleaned
// and with any home directory written "~" (0 when p is an ordinary
// path).
func sensitive(p string) (Class, string) {
	var cl Class
	why := ""
	for _, r := range sensitivePaths {
		if r.class > cl && matchRule(r.pattern, p) {
			cl, why = r.class, r.why
		}
	}
	return cl, why
}

// sensitiveWithin returns the class and reason of a directory that holds
// a path of the table: changing it (moving a directory there, making it a
// link, chmod -R) changes what it holds. /etc holds /etc/passwd; a home
// directory, or a directory named .ssh anywhere, holds ~/.ssh/rc. (A
// "*/name" row alone, a file of that name in any directory, makes no
// directory sensitive.)
func sensitiveWithin(p string) (Class, string) {
	var cl Class
	why := ""
	comps := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for _, r := range sensitivePaths {
		if r.class > cl && holds(comps, r.pattern) {
			cl, why = r.class, "holds "+r.pattern+": "+r.why
		}
	}
	return cl, why
}

// holds reports whether the directory of components dir holds a path
// that pattern names.
func holds(dir []string, pattern string) bool {
	pat := strings.Split(strings.TrimSuffix(pattern, "/"), "/")
	switch {
	case len(dir) == 1 && dir[0] == "":
		return true // the root holds everything
	case pat[0] == "":
		// An absolute row: dir is a proper prefix of it.
		return len(dir) < len(pat) && matchComps(pat[:len(dir)], dir, false)
	case pat[0] == "~" && (strings.Join(dir, "/") == home || len(dir) <= 3 && (len(dir) < 2 || dir[1] == "home" || dir[1] == "root")):
		return true // a home directory, or where homes are
	case pat[0] == "~" || pat[0] == "*":
		// In any directory: dir ends with the row's first components.
		rel := pat[1:]
		for k := 1; k < len(rel); k++ {
			if len(dir) >= k && matchComps(rel[:k], dir[len(dir)-k:], false) {
				return true
			}
		}
	}
	return false
}

// matchRule reports whether path p falls under pattern (see pathRule).
func matchRule(pattern, p string) bool {
	dir := strings.HasSuffix(pattern, "/")
	pat := strings.Split(strings.TrimSuffix(pattern, "/"), "/")
	comps := strings.Split(p, "/")
	switch {
	case pat[0] == "*":
		// A name anywhere: match the pattern against every tail of p.
		pat = pat[1:]
		for i := range comps {
			if matchComps(pat, comps[i:], dir) {
				return true
			}
		}
		return false
	case pat[0] == "~":
		// In any home: "~/rel", or any path ending so.
		pat = pat[1:]
		for i := range comps {
			if matchComps(pat, comps[i:], dir) {
				return true
			}
		}
		return false
	case pat[0] == "":
		return matchComps(pat, comps, dir)
	}
	// A relative pattern (".git/config"): p relative, or any tail.
	for i := range comps {
		if matchComps(pat, comps[i:], dir) {
			return true
		}
	}
	return false
}

// matchComps matches path components against pattern components: all of
// them, or (dir) the pattern's as a prefix.
func matchComps(pat, comps []string, dir bool) bool {
	if len(comps) < len(pat) || !dir && len(comps) != len(pat) {
		return false
	}
	for i, pc := range pat {
		if ok, err := path.Match(pc, comps[i]); err != nil || !ok {
			return false
		}
	}
	return true
}
