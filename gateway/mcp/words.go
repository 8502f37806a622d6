package mcp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// argumentWords says, per argument, what a valid value is: the words a
// model can act on when the SDK's schema check refuses a call.
var argumentWords = map[string]string{
	"target":    "target must be the name of a configured target (a non-empty string; list_targets shows them)",
	"command":   "command must be one shell command line (a non-empty string)",
	"account":   "account must be the name of one of the target's accounts (a string), or be left out",
	"timeout_s": "timeout_s must be an integer number of seconds ≥ 1 (at most the account's max_timeout_s)",
	"wait_s":    fmt.Sprintf("wait_s must be an integer number of seconds from 1 to %d", maxWaitS),
	"stdin":     "stdin must be text (a string)",
	"reason":    "reason must be text of at most 500 characters",
	"action_id": "action_id must be the id of an action (act_…) from an ssh_exec result",
	"stream":    `stream must be "stdout", "stderr" or "stdin"`,
	"offset":    "offset must be an integer number of bytes ≥ 0",
	"limit":     "limit must be an integer number of bytes ≥ 1",
}

var (
	badPropertyRE  = regexp.MustCompile(`validating /properties/([A-Za-z_]+)`)
	missingRE      = regexp.MustCompile(`missing properties: \[(.*?)\]`)
	unexpectedRE   = regexp.MustCompile(`unexpected additional properties \[(.*?)\]`)
	schemaErrorTag = `validating "arguments"`
)

// argumentsInWords rewrites the SDK's refusal of a tool call's arguments
// — "validating "arguments": validating root: validating
// /properties/timeout_s: minimum: 0/1 is less than 1.000000" — into what
// a model can act on, and never echoes the value it refused (which may be
// huge).
func argumentsInWords(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*sdk.CallToolResult)
		if method != "tools/call" || err != nil || !ok || !r.IsError || len(r.Content) != 1 {
			return res, err
		}
		tc, ok := r.Content[0].(*sdk.TextContent)
		if !ok || !strings.HasPrefix(tc.Text, schemaErrorTag) {
			return res, err
		}
		tool := ""
		if p, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok {
			tool = p.Name
		}
		tc.Text = "invalid arguments: " + inWords(tc.Text, tool)
		return r, nil
	}
}

// inWords is the sentence for a schema refusal of tool's arguments.
func inWords(msg, tool string) string {
	names := func(list string) []string {
		var out []string
		for _, f := range strings.Split(list, ",") {
			if f = strings.Trim(strings.TrimSpace(f), `"`); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	switch {
	case missingRE.MatchString(msg):
		var words []string
		for _, n := range names(missingRE.FindStringSubmatch(msg)[1]) {
			words = append(words, n+" is required: "+cmp.Or(argumentWords[n], n+" must be given"))
		}
		return strings.Join(words, "; ")
	case unexpectedRE.MatchString(msg):
		extra := names(unexpectedRE.FindStringSubmatch(msg)[1])
		return fmt.Sprintf("%s %s not an argument of %s; its arguments are: %s", strings.Join(extra, ", "), isAre(len(extra)), tool, strings.Join(toolArguments[tool], ", "))
	case badPropertyRE.MatchString(msg):
		n := badPropertyRE.FindStringSubmatch(msg)[1]
		if w, ok := argumentWords[n]; ok {
			return w
		}
		return n + " has a value of the wrong type or range"
	}
	return "the arguments do not match the tool's input schema"
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// toolArguments lists each tool's arguments, for a call that sent others.
var toolArguments = map[string][]string{}

func init() {
	toolArguments[ToolExec] = slices.Sorted(maps.Keys(execInputSchema.Properties))
	toolArguments[ToolGetAction] = slices.Sorted(maps.Keys(getActionInputSchema.Properties))
	toolArguments[ToolListTargets] = []string{"(none)"}
}
