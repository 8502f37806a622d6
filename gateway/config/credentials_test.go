package config

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
	"github.com/airlockgw/airlock/deploy/securefile"
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
	if _, err := LoadSigner(&Credential{Name: "c", PrivateKeyFile: key, PassphraseFile: passFile}); err != nil {
		t.Fatalf("with the right passphrase: %v", err)
	}
	for _, tt := range []struct {
		name string
		cred Credential
	}{
		{"no passphrase file", Credential{Name: "c", PrivateKeyFile: key}},
		{"wrong passphrase", Credential{Name: "c", PrivateKeyFile: key, PassphraseFile: wrongFile}},
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
	var fme *securefile.Error
	if _, err := LoadSigner(&Credential{Name: "c", PrivateKeyFile: key, PassphraseFile: passFile}); !errors.As(err, &fme) || fme.Fix() != "chmod 600 "+key {
		t.Errorf("world-readable key: err = %v, want *securefile.Error with the chmod to run", err)
	}
}
