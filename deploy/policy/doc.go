// Package policy is the forced-command policy of airlock-action: the HCL
// policy file, the strict tokenizer for the command a client asked for
// (SSH_ORIGINAL_COMMAND), and the matcher that turns a request into a
// fixed argv or a refusal.
//
// Nothing here runs anything or touches the network: Parse reads a policy,
// Tokenize splits a command string without any expansion, and
// (*Policy).Match validates every argument against its verb's typed
// parameters and builds the argv to execute. Running that argv, logging and
// exit statuses belong to package forcedcmd.
//
// The policy file:
//
//	log_file = "/var/log/airlock-action.log"   # optional, appended to
//
//	verb "restart" {
//	  argv    = ["/usr/bin/systemctl", "restart", "{service}"]
//	  param "service" { enum = ["web", "worker"] }
//	  timeout = "5m"                 # default 1m
//	  run_as  = "app"                # optional: /usr/bin/sudo -n -u app -- /usr/local/bin/airlock-action --reap -- argv…
//	  dir     = "/srv/app"           # optional working directory
//	  env     = ["LANG"]             # optional: variables passed through
//	  class   = "mutating"           # optional: for a gateway judging requests by this file
//	}
//
// A parameter has exactly one type: enum = [values], regex = "RE" (RE2,
// matched against the whole argument), int = [min, max] (decimal, inclusive)
// or path_under = "/prefix" (an absolute, clean path strictly beneath the
// prefix, with no ".." and no symbolic link leading outside it). The
// request's words after the verb are the parameters' values, in the order
// the param blocks are declared; every parameter is required. In argv,
// "{name}" is replaced by the value and an argv element always stays one
// element ("{{" and "}}" stand for literal braces). argv[0] is a fixed
// absolute path.
//
// Two request forms are built in: put and get (MatchTransfer), with a
// transfer block, and the read-only mark, "@read-only " before a request
// (ReadOnlyMark, CutReadOnly), which airlock-action reads before anything
// else.
//
// This package knows nothing of SSH connections, HTTP or approvals.
package policy
