package main

import "strings"

// sshOnly are the rest of OpenSSH's options (ssh(1)): flags airlock-ssh
// cannot honour, refused with what to do instead, so that an ssh command
// line carried over is never half understood. The ones that would open a
// hole are in refused.
var sshOnly = map[string]string{
	"-1": "SSH protocol 1 does not exist here; remove -1",
	"-2": "the protocol is always SSH 2; remove -2",
	"-4": "the target's address comes from the gateway's configuration; remove -4",
	"-6": "the target's address comes from the gateway's configuration; remove -6",
	"-b": "the gateway connects from its own address; remove -b",
	"-B": "the gateway connects from its own address; remove -B",
	"-c": "ciphers are chosen by the gateway; remove -c",
	"-m": "MACs are chosen by the gateway; remove -m",
	"-C": "compression is the gateway's choice; remove -C",
	"-e": "there is no interactive session and so no escape character; remove -e",
	"-E": "airlock-ssh writes no log file: the gateway's audit log records every action (airlock audit show ID); remove -E",
	"-g": "port forwarding is never offered: an action is one command",
	"-G": "there is no ssh configuration to print: the gateway's configuration decides (airlock-ssh --json shows an action's facts)",
	"-I": "agents hold no keys: the gateway holds the credentials",
	"-k": "agents hold no credentials to delegate: the gateway holds them; remove -k",
	"-K": "agents hold no credentials to delegate: the gateway holds them; remove -K",
	"-O": "connections are never shared, so there is no master to control",
	"-P": "connection options are fixed by the gateway's configuration; remove -P",
	"-Q": "algorithms are the gateway's; remove -Q",
	"-q": "airlock-ssh's notes on stderr say what was cut, withheld or not sent, and are never silenced; remove -q (2>/dev/null drops them)",
	"-s": "an action is one command: subsystems are never requested (--put and --get copy files)",
	"-v": "airlock-ssh has no debug output: --json prints the action's facts, and the audit log holds its record (airlock audit show ID); remove -v",
	"-V": "airlock-ssh --version prints the version",
	"-w": "tunnel forwarding is never offered: an action is one command",
	"-y": "airlock-ssh writes no log: the gateway's audit log records every action; remove -y",
}

// cluster reads a, a cluster of short flags (-nT, -nlops), as ssh does.
func (o *options) cluster(c *argv, a string) error {
	for i := 1; i < len(a); i++ {
		switch f := a[i : i+1]; f {
		case "n":
			o.noStdin = true
		case "T", "x", "a":
		case "h":
			return errHelp
		case "l":
			if v := a[i+1:]; v != "" {
				o.account = v
				return nil
			}
			if c.i+1 >= len(c.args) {
				return usagef(missingValue, "-l", "-l needs a value")
			}
			c.i++
			o.account = c.args[c.i]
			return nil
		default:
			return flagError(c, "-"+f, a)
		}
	}
	return nil
}

// flagError is the error for flag (in argument a): one of ssh's
// refused with why, else unknown; after the target, with how to send a
// command that begins with -.
func flagError(c *argv, flag, a string) error {
	if why := refusal(flag); why != "" {
		return usagef(refusedFlag, flag, "%s is refused: %s", flag, why)
	}
	what := flag
	if flag != a {
		what = flag + " (in " + a + ")"
	}
	if c.afterTarget {
		return usagef(unknownFlag, flag, "unknown flag %s after the target (see airlock-ssh --help); a command that begins with - goes after a -- that follows the target: airlock-ssh [flags] TARGET -- %s", what, strings.Join(c.args[c.i:], " "))
	}
	return usagef(unknownFlag, flag, "unknown flag %s (see airlock-ssh --help)", what)
}

// refusal is why ssh's flag is refused; "" for a flag ssh does not have.
func refusal(flag string) string {
	if why, ok := refused[flag]; ok {
		return why
	}
	return sshOnly[flag]
}
