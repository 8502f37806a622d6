package sshexec_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/batchenv"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// batchEnvCommand prints each variable of the fixed set as NAME=value,
// or NAME unset, one a line.
func batchEnvCommand() string {
	var b strings.Builder
	for _, v := range batchenv.Vars() {
		b.WriteString(`if [ "${` + v.Name + `+set}" ]; then echo "` + v.Name + `=$` + v.Name + `"; else echo "` + v.Name + ` unset"; fi; `)
	}
	return b.String()
}

// acceptEnv is the AcceptEnv line for the fixed set.
func acceptEnv() string {
	line := "AcceptEnv"
	for _, v := range batchenv.Vars() {
		line += " " + v.Name
	}
	return line
}

// TestBatchEnvReachesTheCommand: against a real sshd whose AcceptEnv
// names the fixed set, the command sees every variable with its value.
func TestBatchEnvReachesTheCommand(t *testing.T) {
	t.Parallel()
	sshtest.Need(t)
	s := sshtest.NewSSHD(t, sshtest.Options{Config: []string{acceptEnv()}})
	res, err := sshexec.Run(context.Background(), configFor(s), batchEnvCommand())
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %+v", err, res)
	}
	var want strings.Builder
	for _, v := range batchenv.Vars() {
		want.WriteString(v.String() + "\n")
	}
	if got := string(res.Stdout); got != want.String() {
		t.Errorf("the command's environment:\n%s\nwant:\n%s", got, want.String())
	}
	res, err = sshexec.Run(context.Background(), configFor(s), "echo $GIT_TERMINAL_PROMPT")
	if err != nil || string(res.Stdout) != "0\n" {
		t.Errorf("echo $GIT_TERMINAL_PROMPT: %q %v", res.Stdout, err)
	}
}

// TestBatchEnvRefusedQuietly: an sshd without AcceptEnv ignores the env
// requests, and the action runs as it would without them.
func TestBatchEnvRefusedQuietly(t *testing.T) {
	t.Parallel()
	s := sharedSSHD(t) // no AcceptEnv
	res, err := sshexec.Run(context.Background(), configFor(s), batchEnvCommand())
	if err != nil || !res.Success() || len(res.Stderr) != 0 {
		t.Fatalf("Run: %v %+v (stderr %q)", err, res, res.Stderr)
	}
	for _, v := range batchenv.Vars() {
		if !strings.Contains(string(res.Stdout), v.Name+" unset\n") {
			t.Errorf("%s reached the command through an sshd that does not accept it:\n%s", v.Name, res.Stdout)
		}
	}
}
