package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestGetOverwriteKeepsTheMode: `--get --overwrite` replaces a file with
// one of the same permission bits (a 0600 file stays 0600), and a new
// file gets 0644 less the umask. Through the built airlock-ssh, the
// gateway and a real sshd.
func TestGetOverwriteKeepsTheMode(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	remote := filepath.Join(sshtest.SafeDir(t), "remote.txt")
	if err := os.WriteFile(remote, []byte("from the target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := syscall.Umask(0)
	syscall.Umask(m)
	dir := t.TempDir()
	tests := []struct {
		name     string
		existing fs.FileMode // 0: no file there
		want     fs.FileMode
	}{
		{"owner only", 0o600, 0o600},
		{"group readable", 0o640, 0o640},
		{"read only", 0o400, 0o400},
		{"executable", 0o750, 0o750},
		{"new", 0, 0o644 &^ fs.FileMode(m)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := filepath.Join(dir, tt.name)
			args := []string{"--get", "box:" + remote, local}
			if tt.existing != 0 {
				if err := os.WriteFile(local, []byte("old\n"), tt.existing); err != nil {
					t.Fatal(err)
				}
				os.Chmod(local, tt.existing)
				args = append([]string{"--overwrite"}, args...)
			}
			if stderr, code := agent(t, d, io.Discard, args...); code != 0 {
				t.Fatalf("airlock-ssh %v: exit %d, %s", args, code, stderr)
			}
			st, err := os.Stat(local)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(local); string(b) != "from the target\n" {
				t.Errorf("the file holds %q", b)
			}
			if got := st.Mode().Perm(); got != tt.want {
				t.Errorf("mode %04o, want %04o", got, tt.want)
			}
		})
	}
}
