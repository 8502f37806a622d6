package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"
)

func TestRunWithoutGateway(t *testing.T) {
	var stdout, stderr bytes.Buffer
	sock := filepath.Join(t.TempDir(), "airlock.sock")
	code := run(context.Background(), []string{"--socket", sock, "t", "true"}, strings.NewReader(""), &stdout, &stderr)
	if code != 255 || !strings.Contains(stderr.String(), "airlock serve") {
		t.Fatalf("exit %d, stderr %q: want 255 and a hint to start the gateway", code, stderr.String())
	}
	// A control file but nothing listening.
	os.WriteFile(filepath.Join(filepath.Dir(sock), "control.json"), []byte(`{"socket":"`+sock+`","token":"x"}`), 0o600)
	stderr.Reset()
	if code := run(context.Background(), []string{"--socket", sock, "t", "true"}, strings.NewReader(""), &stdout, &stderr); code != 255 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestKillGraceIsSshexecs: the outcome wait allows for the kill grace the
// gateway's SSH client keeps.
func TestKillGraceIsSshexecs(t *testing.T) {
	if killGrace != sshexec.DefaultKillGrace {
		t.Fatalf("killGrace = %v, sshexec.DefaultKillGrace = %v", killGrace, sshexec.DefaultKillGrace)
	}
}

// TestLinksNoSSHClient: airlock-ssh starts once per action, and what it
// links it pays for at every start (page faults, package init): the SSH
// client, SFTP and SQLite stay out of it.
func TestLinksNoSSHClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"golang.org/x/crypto/ssh", "github.com/pkg/sftp", "github.com/mattn/go-sqlite3", "github.com/airlockgw/airlock/sshexec"} {
			if dep == heavy || strings.HasPrefix(dep, heavy+"/") && dep != "github.com/airlockgw/airlock/sshexec/outcome" {
				t.Errorf("airlock-ssh links %s", dep)
			}
		}
	}
}
