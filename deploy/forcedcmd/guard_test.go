package forcedcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Renaming a directory replaces everything below it: a policy whose
// directory is root's but sits in a directory the account owns is one the
// account can swap for its own (mv the directory aside, make another with
// a policy of its choosing), so it is refused too.
func TestPolicyBelowTheAccountsDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another account")
	}
	const uid = 4242
	home := filepath.Join(t.TempDir(), "home")
	dir := filepath.Join(home, "policy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := writePolicy(t, dir, `verb "hi" { argv = ["/bin/echo", "hi"] }`)
	os.Chmod(file, 0o644)
	if err := policyGuard(file, uid); err != nil {
		t.Fatalf("policyGuard with root's directories: %v", err)
	}
	os.Chown(home, uid, uid)
	if err := policyGuard(file, uid); err == nil || !strings.Contains(err.Error(), "its directory "+home) || !strings.Contains(err.Error(), "belongs to this account") {
		t.Errorf("policyGuard below the account's directory: %v, want %s refused", err, home)
	}
}
