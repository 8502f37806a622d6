package forcedcmd

import (
	"strings"

	"github.com/airlockgw/airlock/sshexec/batchenv"
)

// withBatchEnv returns env with the fixed non-interactive environment
// (package batchenv: GIT_TERMINAL_PROMPT=0, PAGER=cat, …) in it. Its
// values replace whatever env had under those names: sshd passes them on
// only when its AcceptEnv allows, a verb's env pass-through and sudo's
// env_reset must not change them, and a target with this forced command
// gets them with no sshd setting at all.
func withBatchEnv(env []string) []string {
	vars := batchenv.Vars()
	fixed := make(map[string]bool, len(vars))
	for _, v := range vars {
		fixed[v.Name] = true
	}
	out := make([]string, 0, len(env)+len(vars))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !fixed[name] {
			out = append(out, kv)
		}
	}
	for _, v := range vars {
		out = append(out, v.String())
	}
	return out
}

// batchEnvWords is the fixed set as Explain shows it.
func batchEnvWords() string {
	var words []string
	for _, v := range batchenv.Vars() {
		words = append(words, v.String())
	}
	return strings.Join(words, " ")
}
