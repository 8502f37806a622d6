// Command airlock runs the airlock gateway and its administration verbs.
//
// See docs/ for the guides and contract.md-derived reference; "airlock help"
// lists the verbs.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// A command is one top-level verb: it gets the remaining arguments and the
// standard streams and returns the process exit code.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the verb table. Each verb lives in its own file.
var commands = map[string]command{
	"version": {"print version, commit and Go version", runVersion},
	"audit":   {"verify, export and prove the audit log", runAudit},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
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
	fmt.Fprintln(w, `run "airlock COMMAND --help" for a command's flags`)
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	commit := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "airlock %s (commit %s, %s)\n", version, commit, runtime.Version())
	return 0
}
