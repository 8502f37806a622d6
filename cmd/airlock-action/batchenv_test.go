package main

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/batchenv"
)

// wantBatchEnv fails t unless env(1)'s output holds every variable of the
// fixed non-interactive set with its value.
func wantBatchEnv(t *testing.T, res *sshexec.Result, err error) {
	t.Helper()
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %+v (stderr %q)", err, res, res.Stderr)
	}
	lines := strings.Split(string(res.Stdout), "\n")
	for _, v := range batchenv.Vars() {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, v.Name+"=") {
				n++
				if l != v.String() {
					t.Errorf("the program has %q, want %q", l, v.String())
				}
			}
		}
		if n != 1 {
			t.Errorf("the program's environment has %s %d times, want once:\n%s", v.Name, n, res.Stdout)
		}
	}
}

// TestBatchEnvThroughSSHD: a verb run by airlock-action gets the fixed
// non-interactive environment though the target's sshd accepts no env
// request (its config has no AcceptEnv).
func TestBatchEnvThroughSSHD(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	res, err := sshexec.Run(context.Background(), e.config(e.key), "environment")
	wantBatchEnv(t, res, err)
}

// TestBatchEnvThroughSudo: a run_as verb gets it too, though sudo resets
// the environment (env_reset): its supervisor sets it again.
func TestBatchEnvThroughSudo(t *testing.T) {
	e, key, _, _ := runAsEnv(t)
	res, err := sshexec.Run(context.Background(), e.config(key), "environment-root")
	wantBatchEnv(t, res, err)
}
