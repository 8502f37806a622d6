package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockgw/airlock/sshexec"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want options
	}{
		{"plain", []string{"build-box", "uptime"}, options{target: "build-box", command: "uptime"}},
		{"args joined with single spaces", []string{"build-box", "ls", "-la", "/srv"}, options{target: "build-box", command: "ls -la /srv"}},
		{"account@target", []string{"deploy@build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"-l account", []string{"-l", "deploy", "build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"-laccount", []string{"-ldeploy", "build-box", "id"}, options{account: "deploy", target: "build-box", command: "id"}},
		{"flags", []string{"--json", "--timeout", "30s", "--socket=/run/a.sock", "t", "true"}, options{json: true, timeout: 30 * time.Second, socket: "/run/a.sock", target: "t", command: "true"}},
		{"timeout in seconds", []string{"--timeout=90", "t", "true"}, options{timeout: 90 * time.Second, target: "t", command: "true"}},
		{"-- before the command", []string{"t", "--", "ls", "-l"}, options{target: "t", command: "ls -l"}},
		{"-- before the target", []string{"--", "t", "echo", "--json"}, options{target: "t", command: "echo --json"}},
		{"flags after the target belong to the command", []string{"t", "grep", "-A", "3", "x"}, options{target: "t", command: "grep -A 3 x"}},
		{"-T is a no-op", []string{"-T", "t", "true"}, options{target: "t", command: "true"}},
		{"-n and a reason", []string{"-n", "--reason", "check the disk", "t", "df"}, options{noStdin: true, reason: "check the disk", target: "t", command: "df"}},
		{"a secret", []string{"--secret=db", "t", "psql"}, options{secret: "db", target: "t", command: "psql"}},
		{"--accept-truncation", []string{"--accept-truncation", "t", "seq 9"}, options{acceptCut: true, target: "t", command: "seq 9"}},
		{"a put", []string{"--put", "conf.yml", "deploy@web:/srv/app/conf.yml", "--mode", "0640"}, options{put: true, local: "conf.yml", account: "deploy", target: "web", remote: "/srv/app/conf.yml", mode: "0640"}},
		{"a get", []string{"--overwrite", "--get", "web:/var/log/app.log", "app.log"}, options{get: true, overwrite: true, local: "app.log", target: "web", remote: "/var/log/app.log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRefusesHoles(t *testing.T) {
	for _, args := range [][]string{
		{"-A", "t", "true"}, {"-L", "8080:localhost:80", "t", "true"}, {"-L8080:localhost:80", "t", "true"},
		{"-R", "9000:localhost:22", "t", "true"}, {"-D", "1080", "t", "true"}, {"-X", "t", "true"}, {"-Y", "t", "true"},
		{"-W", "h:22", "t", "true"}, {"-J", "jump", "t", "true"}, {"-M", "t", "true"}, {"-S", "/tmp/ctl", "t", "true"},
		{"-o", "ProxyCommand=nc", "t", "true"}, {"-F", "/dev/null", "t", "true"}, {"-i", "key", "t", "true"},
		{"-p", "2222", "t", "true"}, {"-t", "t", "true"}, {"-tt", "t", "true"}, {"-N", "t"},
		{"--bogus", "t", "true"}, {"t"}, {}, {"-l"}, {"--timeout", "0s", "t", "true"}, {"--timeout", "soon", "t", "true"},
		{"-l", "a", "b@t", "true"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

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

func TestParseTransferMistakes(t *testing.T) {
	for _, args := range [][]string{
		{"--put", "a", "web:/x", "ls"},                   // a command too
		{"--put", "a", "web"},                            // no remote path
		{"--get", "web:/x"},                              // no local path
		{"--put", "a", "web:/x", "--get", "web:/y", "b"}, // two transfers
		{"--mode", "0644", "web", "ls"},                  // mode without a put
		{"--overwrite", "web", "ls"},                     // overwrite without a transfer
		{"--secret", "s", "--put", "a", "web:/x"},        // a secret with a transfer
		{"-l", "root", "--put", "a", "deploy@web:/x"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
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
