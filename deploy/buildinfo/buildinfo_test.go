package buildinfo

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A binary built from this checkout names its commit; one built with a
// release version says it.
func TestBuiltFromACheckoutNamesItsCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// -buildvcs=true, as go build's default does in a checkout (a
	// GOFLAGS of the machine may turn it off).
	dir := t.TempDir()
	bin := filepath.Join(dir, "airlock")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/airlock")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))) {
		t.Errorf("airlock version of a checkout build: %q, want commit %s", out, head)
	}
	rel := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "-ldflags", "-X github.com/airlockgw/airlock/deploy/buildinfo.Version=v9.8.7", "./cmd/airlock-ssh")
	rel.Dir = build.Dir
	if out, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--version").Output()
	if err != nil || !regexp.MustCompile(`^airlock-ssh v9\.8\.7 \(commit [0-9a-f]{40}`).Match(out) {
		t.Errorf("airlock-ssh --version of a release build: %q %v", out, err)
	}
}
