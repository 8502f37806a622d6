package policy

import "strings"

// ReadOnlyMark is the first word of a request that a gateway marks
// read-only:
//
//	@read-only VERB [ARGS…]
//
// airlock-action reads the mark before anything else and then runs the
// verb with every mount read-only and no_new_privs (see package
// forcedcmd). Only the exact prefix "@read-only " at the very start is a
// mark; the rest is an ordinary request. No verb name can begin with "@",
// so a mark anywhere else ("'@read-only' VERB", " @read-only VERB", a
// second mark) names no verb and is refused. A mark can only narrow what
// a request may do: a client that sends one itself gets its own request
// confined, never more.
const ReadOnlyMark = "@read-only"

// MarkReadOnly returns command marked read-only.
func MarkReadOnly(command string) string { return ReadOnlyMark + " " + command }

// CutReadOnly returns command without its read-only mark, and whether it
// had one.
func CutReadOnly(command string) (rest string, marked bool) {
	return strings.CutPrefix(command, ReadOnlyMark+" ")
}
