package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// TestMCPGetOverwriteKeepsTheMode: ssh_get with overwrite gives the file
// it saves the permission bits of the one it replaces; a new file is
// 0600. Through `airlock mcp`, the gateway and a real sshd.
func TestMCPGetOverwriteKeepsTheMode(t *testing.T) {
	t.Parallel()
	d := startMCPDaemon(t, mcpApprovalTimeout)
	data := t.TempDir()
	cs := mcpWithFiles(t, d.socket, data)
	root := filepath.Join(data, "airlock", "files")
	remote := filepath.Join(sshtest.SafeDir(t), "remote.txt")
	if err := os.WriteFile(remote, []byte("from the target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		existing fs.FileMode // 0: no file there
		want     fs.FileMode
	}{
		{"read-only", 0o400, 0o400},
		{"group", 0o640, 0o640},
		{"new", 0, 0o600},
	} {
		if tt.existing != 0 {
			os.WriteFile(filepath.Join(root, tt.name), []byte("old\n"), tt.existing)
			os.Chmod(filepath.Join(root, tt.name), tt.existing)
		}
		done := make(chan *sdk.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_get",
				Arguments: map[string]any{"target": "box-call", "path": remote, "local_path": tt.name, "overwrite": tt.existing != 0}})
			if err != nil {
				t.Errorf("ssh_get: %v", err)
			}
			done <- res
		}()
		var res *sdk.CallToolResult
		testkit.Eventually(t, func() bool {
			select {
			case res = <-done:
				return true
			default:
			}
			out, _, _ := d.cli("approvals", "list", "--json")
			var list []api.Approval
			json.Unmarshal([]byte(out), &list)
			for _, a := range list {
				d.cli("approvals", "approve", a.ID)
			}
			return false
		}, "ssh_get %s to end", tt.name)
		if res == nil || res.IsError {
			t.Fatalf("ssh_get %s: %s", tt.name, mcptest.Text(res))
		}
		st, err := os.Stat(filepath.Join(root, tt.name))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != tt.want {
			t.Errorf("%s: mode %04o, want %04o", tt.name, got, tt.want)
		}
	}
}

// mcpWithFiles runs `airlock mcp` with the socket and XDG_DATA_HOME=data
// (its transfer directory is data/airlock/files) and returns a Go SDK
// session over its stdio, closed when the test ends.
func mcpWithFiles(t *testing.T, socket, data string) *sdk.ClientSession {
	t.Helper()
	airlock, _ := binaries(t)
	cmd := exec.Command(airlock, "mcp")
	cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+socket, "XDG_DATA_HOME="+data)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "airlock-test", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
