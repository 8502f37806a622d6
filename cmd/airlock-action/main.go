// Command airlock-action is the forced command for targets: sshd runs it
// instead of the command a client asked for, and it runs only what its
// policy allows, with no shell.
//
//	command="/usr/local/bin/airlock-action --policy /etc/airlock/action.hcl",restrict ssh-ed25519 AAAA… airlock:T/A
//
// Usage:
//
//	airlock-action [--policy FILE]                  serve the request in $SSH_ORIGINAL_COMMAND
//	airlock-action --check [--policy FILE]          validate the policy (problems as FILE:LINE)
//	airlock-action --explain "CMD" [--policy FILE]  show what CMD would run, or why it is refused
//	airlock-action --reap -- PROGRAM [ARGS…]        supervise a verb (airlock-action, or sudo for run_as, runs this)
//	airlock-action --reap --read-only -- PROGRAM…   supervise a verb marked read-only (airlock-action runs this)
//	airlock-action --version                        print the version and the commit it was built from
//
// A verb's program gets a fixed environment: PATH, the gateway's
// non-interactive set (GIT_TERMINAL_PROMPT=0, DEBIAN_FRONTEND=noninteractive,
// PAGER=cat, …; package sshexec/batchenv), whatever sshd passed under those
// names, and the variables its env allow-list names; --explain shows it.
//
// A request that begins with "@read-only " was marked read-only by the
// gateway: its verb runs with every mount read-only, or is refused. A
// refused request exits 126 with one line on stderr. See
// deploy/forcedcmd for the exit statuses and the log line.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlockgw/airlock/deploy/buildinfo"

	"github.com/airlockgw/airlock/deploy/forcedcmd"
	"github.com/airlockgw/airlock/deploy/policy"
)

// DefaultPolicy is where operators put the policy.
const DefaultPolicy = "/etc/airlock/action.hcl"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--reap" {
		os.Exit(forcedcmd.ReapMain(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// self is this binary's path: what sudo must run to supervise a run_as
// verb.
func self() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}

func run(args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock-action", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyFile := fs.String("policy", DefaultPolicy, "policy `file`")
	check := fs.Bool("check", false, "validate the policy and exit: 0 valid, 1 not")
	explain := fs.String("explain", "", "show the argv `command` would run, or why it is refused")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "airlock-action %s\n", buildinfo.Read())
		return 0
	}
	// --explain is "given" when it is on the command line, even empty: an
	// empty value must not fall through to serving a request.
	explaining := false
	fs.Visit(func(f *flag.Flag) { explaining = explaining || f.Name == "explain" })
	switch {
	case fs.NArg() > 0 && explaining:
		fmt.Fprintf(stderr, "airlock-action: unexpected argument %q: quote the whole command for --explain, e.g. --explain \"deploy web\"\n", fs.Arg(0))
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "airlock-action: unexpected argument %q: the request comes from $SSH_ORIGINAL_COMMAND; use --explain to try one\n", fs.Arg(0))
		return 2
	case *check && explaining:
		fmt.Fprintln(stderr, "airlock-action: --check and --explain are separate: give one")
		return 2
	case explaining && strings.TrimSpace(*explain) == "":
		fmt.Fprintln(stderr, "airlock-action: --explain needs the command to try, e.g. --explain \"deploy web\"")
		return 2
	}
	switch {
	case *check:
		return forcedcmd.Check(*policyFile, self(), stdout)
	case explaining:
		pol, err := policy.Load(*policyFile)
		if err != nil {
			fmt.Fprintf(stderr, "airlock-action: %v\n", err)
			return 1
		}
		if r := self(); r != "" {
			pol.Reaper = r
		}
		return forcedcmd.Explain(pol, *explain, stdout)
	}
	return forcedcmd.Serve(context.Background(), forcedcmd.Options{
		PolicyFile: *policyFile,
		Env:        env,
		Stdout:     stdout,
		Stderr:     stderr,
		// A built-in put reads its file here; verbs never do.
		Stdin:  os.Stdin,
		Reaper: self(),
	})
}
