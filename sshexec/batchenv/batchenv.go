// Package batchenv is the fixed environment every action's command gets on
// its target: variables that make programs which would ask a question or
// start a pager (and so wait, without a terminal, until the action's
// deadline kills them) answer for themselves or print instead.
//
// Two ways carry it, since either may be missing: the gateway's SSH client
// (sshexec) sends each variable as an "env" request (RFC 4254 §6.4) before
// its one exec, which sshd passes on only for the names its AcceptEnv
// lists and otherwise ignores without a word; and airlock-action, the
// forced command, sets them for the program it runs whatever sshd passed.
//
// The set is fixed here, in code. No configuration, request or agent adds
// a name or changes a value: an agent's command line is the only thing it
// sends, and its own assignments (FOO=bar cmd) are the shell's business on
// the target, as they always were.
//
// It holds only variables that take a question or a pager away and change
// nothing else a command does. Left out on purpose: a locale (LANG,
// LC_ALL: a locale the target lacks makes every program warn), TERM (no
// terminal is requested; a program that needs one says so at once),
// editors (without a terminal they fail at once), and settings that pick
// an answer for the operator, such as dpkg's conffile choice or
// needrestart's mode.
//
// This package imports nothing, so that airlock-action, which runs on
// targets, links no SSH client for it.
package batchenv

// Var is one variable of the set.
type Var struct {
	Name, Value string
}

// String is the variable as an environment entry, NAME=value.
func (v Var) String() string { return v.Name + "=" + v.Value }

// vars is the set, sorted by name. Each entry says why it is there.
var vars = [...]Var{
	// apt-listchanges shows changelogs through a pager (or asks to go
	// on) during apt upgrades.
	{"APT_LISTCHANGES_FRONTEND", "none"},
	// debconf asks no questions; packages take their defaults.
	{"DEBIAN_FRONTEND", "noninteractive"},
	// git's pager, ahead of PAGER and core.pager.
	{"GIT_PAGER", "cat"},
	// git fails instead of asking for a user name or password.
	{"GIT_TERMINAL_PROMPT", "0"},
	// Every other program's pager: man, psql, less-based tools.
	{"PAGER", "cat"},
	// pip fails instead of asking (a confirmation, a password).
	{"PIP_NO_INPUT", "1"},
	// systemctl, journalctl, loginctl and friends.
	{"SYSTEMD_PAGER", "cat"},
}

// Vars returns the set, sorted by name: a copy, which the caller may keep.
func Vars() []Var {
	out := make([]Var, len(vars))
	copy(out, vars[:])
	return out
}
