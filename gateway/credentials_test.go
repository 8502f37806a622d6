package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/approvals"
)

// The passphrase type (shared with reviewer passwords and tokens) never
// prints.
func TestSecretNeverPrints(t *testing.T) {
	s := approvals.NewSecret("hunter2-passphrase")
	type holder struct {
		Pass approvals.Secret
	}
	outs := []string{
		fmt.Sprint(s), fmt.Sprintf("%v %s %q %x %X %#v %+v", s, s, s, s, s, s, s),
		fmt.Sprintf("%+v %#v", holder{s}, holder{s}),
	}
	b, err := json.Marshal(holder{s})
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(b))
	for _, o := range outs {
		if strings.Contains(o, "hunter2") || strings.Contains(o, fmt.Sprintf("%x", "hunter2")) {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if s.Reveal() != "hunter2-passphrase" {
		t.Error("Reveal lost the secret")
	}
}

func TestCheckSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		wantErr bool
	}{
		{"owner only", write("ok", 0o600), false},
		{"read only owner", write("ro", 0o400), false},
		{"group readable", write("g", 0o640), true},
		{"world readable", write("w", 0o644), true},
		{"group writable", write("gw", 0o620), true},
		{"a directory", dir, true},
		{"missing", filepath.Join(dir, "missing"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSecretFile(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			var fme *FileModeError
			if tt.wantErr && strings.HasPrefix(tt.name, "group") || strings.HasPrefix(tt.name, "world") {
				if !errors.As(err, &fme) || fme.Fix != "chmod 600 "+tt.path {
					t.Errorf("err = %v, want a *FileModeError with the chmod to run", err)
				}
			}
		})
	}
	if os.Geteuid() == 0 {
		// Owned by another user: refused even with mode 0600.
		p := write("other", 0o600)
		if err := os.Chown(p, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		var fme *FileModeError
		if err := CheckSecretFile(p); !errors.As(err, &fme) || fme.UID != 12345 {
			t.Errorf("file owned by another user: err = %v", err)
		}
	}
}

func TestLoadSigner(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	const pass = "s3cret passphrase"
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", pass, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(&CredentialConfig{Name: "c", PrivateKeyFile: key, PassphraseFile: passFile}); err != nil {
		t.Fatalf("with the right passphrase: %v", err)
	}
	for _, tt := range []struct {
		name string
		cred CredentialConfig
	}{
		{"no passphrase file", CredentialConfig{Name: "c", PrivateKeyFile: key}},
		{"wrong passphrase", CredentialConfig{Name: "c", PrivateKeyFile: key, PassphraseFile: wrongFile}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadSigner(&tt.cred)
			if err == nil {
				t.Fatal("loaded")
			}
			if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), "nope") {
				t.Errorf("error reveals the passphrase: %v", err)
			}
		})
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	var fme *FileModeError
	if _, err := LoadSigner(&CredentialConfig{Name: "c", PrivateKeyFile: key, PassphraseFile: passFile}); !errors.As(err, &fme) {
		t.Errorf("world-readable key: err = %v, want *FileModeError", err)
	}
}
