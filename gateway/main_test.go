package gateway

import (
	"os"
	"runtime"
	"testing"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// shared is one real sshd for the package's tests that do not change it.
var (
	shared    *sshtest.SSHD
	sharedErr error
)

func TestMain(m *testing.M) {
	if _, err := os.Stat(sshtest.SSHDPath); err == nil {
		shared, sharedErr = sshtest.StartSSHD(sshtest.Options{})
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	gatewaytest.RemoveBinaries()
	pgtest.StopShared()
	os.Exit(code)
}

func sharedSSHD(t testing.TB) *sshtest.SSHD {
	t.Helper()
	sshtest.Need(t)
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	shared.LogOnFailure(t)
	return shared
}

func runtimeGOMAXPROCS() int { return runtime.GOMAXPROCS(0) }
