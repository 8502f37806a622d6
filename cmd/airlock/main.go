// Command airlock runs the airlock gateway and its administration verbs.
//
// See docs/ for the guides and contract.md-derived reference; "airlock help"
// lists the verbs.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/airlockgw/airlock/deploy/buildinfo"
)

// version is what the gateway records (gateway.started) and MCP
// clients are told: the release or module version, and the commit.
func version() string {
	i := buildinfo.Read()
	if len(i.Revision) >= 12 {
		return i.Version + "+" + i.Revision[:12]
	}
	return i.Version
}

// A command is one top-level verb: it gets the remaining arguments and the
// standard streams and returns the process exit code (2: a usage error).
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
	// group is set when the verb is made of sub-verbs ("approvals list").
	group *group
}

// commands is the verb table. Each verb lives in its own file.
var commands = map[string]command{
	"version": {summary: "print version, commit and Go version", run: runVersion},
}

// A group is a verb made of sub-verbs, such as "approvals list": its first
// argument names the sub-verb, and "help", -h or --help print its usage.
type group struct {
	name  string
	usage string // the whole help text: the sub-verbs with their flags and arguments
	verbs map[string]verbFunc
}

// A verbFunc runs a sub-verb with the arguments after its name.
type verbFunc func(args []string, stdout, stderr io.Writer) int

// bind makes the verbFunc of verb from a function that runs several.
func bind(run func(verb string, args []string, stdout, stderr io.Writer) int, verb string) verbFunc {
	return func(args []string, stdout, stderr io.Writer) int { return run(verb, args, stdout, stderr) }
}

// command makes g a top-level verb.
func (g *group) command(summary string) command {
	return command{summary: summary, run: g.run, group: g}
}

func (g *group) run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, g.usage)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, g.usage)
		return 0
	}
	verb, ok := g.verbs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "airlock %s: unknown verb %q; run \"airlock %s help\"\n", g.name, args[0], g.name)
		return 2
	}
	return verb(args[1:], stdout, stderr)
}

// isHelp reports whether arg asks for help rather than naming a verb.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if isHelp(args[0]) {
		if len(args) > 1 { // airlock help VERB
			if c, ok := commands[args[1]]; ok {
				return c.run([]string{"--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "airlock: unknown command %q; run \"airlock help\" for the list\n", args[0])
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: airlock COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `run "airlock COMMAND --help" for a command's verbs and flags`)
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock version", "airlock version", stderr)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageErrorf(stderr, "airlock version takes no arguments")
	}
	fmt.Fprintf(stdout, "airlock %s\n", buildinfo.Read())
	return 0
}
