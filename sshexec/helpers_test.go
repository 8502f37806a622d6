package sshexec_test

import (
	"os"
	"syscall"
	"testing"
)

func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
