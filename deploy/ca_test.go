package deploy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func TestInitCA(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys", "ca")
	pub, created, err := InitCA(file)
	if err != nil || !created {
		t.Fatalf("InitCA: %v, created %v", err, created)
	}
	if pub.Type() != ssh.KeyAlgoED25519 {
		t.Errorf("CA key type %s, want ed25519", pub.Type())
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(file), 0o700 | os.ModeDir}, {file, 0o600}, {file + ".pub", 0o644}} {
		fi, err := os.Stat(f.path)
		if err != nil || fi.Mode() != f.mode {
			t.Errorf("%s: mode %v, %v; want %v", f.path, fi.Mode(), err, f.mode)
		}
	}
	if got := strings.TrimSpace(readFile(t, file+".pub")); got != CAPublicKeyLine(pub) {
		t.Errorf(".pub = %q, want %q", got, CAPublicKeyLine(pub))
	}
	s, err := LoadCA(file, nil)
	if err != nil || !bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
		t.Fatalf("LoadCA: %v, or a different key", err)
	}
	// An existing CA is kept: every target trusts it.
	again, created, err := InitCA(file)
	if err != nil || created || !bytes.Equal(again.Marshal(), pub.Marshal()) {
		t.Errorf("second InitCA: created %v, %v, same key %v", created, err, bytes.Equal(again.Marshal(), pub.Marshal()))
	}
}

func TestInitCAAsRootGivesTheKeyToTheStateDirOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	uid, gid := testUserIDs(t)
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(state, "keys", "ca")
	if _, _, err := InitCA(file); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(file), file, file + ".pub"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if u, g := securefile.Owner(fi); u != uid || g != gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, u, g, uid, gid)
		}
	}
}

func TestCARefusesUnsafeKeyFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, file string)
		want  securefile.Problem
		root  bool
	}{
		{"group-readable", func(t *testing.T, file string) { os.Chmod(file, 0o640) }, securefile.ReadableByOthers, false},
		{"world-readable", func(t *testing.T, file string) { os.Chmod(file, 0o604) }, securefile.ReadableByOthers, false},
		{"group-writable", func(t *testing.T, file string) { os.Chmod(file, 0o620) }, securefile.WritableByOthers, false},
		{"symbolic link", func(t *testing.T, file string) {
			os.Rename(file, file+".real")
			os.Symlink(file+".real", file)
		}, securefile.NotRegular, false},
		{"owned by someone else", func(t *testing.T, file string) {
			uid, gid := testUserIDs(t)
			os.Chown(file, uid, gid)
		}, securefile.WrongOwner, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			file := filepath.Join(t.TempDir(), "keys", "ca")
			if _, _, err := InitCA(file); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, file)
			var ue *securefile.Error
			if tt.want != securefile.WrongOwner { // root may read the gateway user's key
				if _, err := LoadCA(file, nil); !errors.As(err, &ue) || ue.Problem != tt.want {
					t.Errorf("LoadCA: %v, want %v", err, tt.want)
				}
			}
			if _, _, err := InitCA(file); !errors.As(err, &ue) || ue.Problem != tt.want {
				t.Errorf("InitCA over it: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewActionCert(t *testing.T) {
	t.Parallel()
	ca := sshtest.NewKey()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	c, err := NewActionCert(ca, CertRequest{
		ActionID: "01JQ7ZS5Y3", Account: "deploy", Serial: 123, Timeout: 5 * time.Minute,
		ForceCommand: "/usr/local/bin/airlock-action", SourceAddress: "10.0.0.5/32,fd00::1", Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	cert := c.Certificate
	type summary struct {
		KeyID, CertKeyID   string
		Serial, CertSerial uint64
		Type               uint32
		Principals         []string
		After, Before      time.Time
		Critical, Ext      map[string]string
		KeyType            string
	}
	got := summary{c.KeyID, cert.KeyId, c.Serial, cert.Serial, cert.CertType, cert.ValidPrincipals,
		time.Unix(int64(cert.ValidAfter), 0).UTC(), time.Unix(int64(cert.ValidBefore), 0).UTC(),
		cert.CriticalOptions, cert.Extensions, cert.Key.Type()}
	want := summary{"airlock:01JQ7ZS5Y3", "airlock:01JQ7ZS5Y3", 123, 123, ssh.UserCert, []string{"deploy"},
		now.Add(-30 * time.Second), now.Add(7 * time.Minute),
		map[string]string{"force-command": "/usr/local/bin/airlock-action", "source-address": "10.0.0.5/32,fd00::1"},
		map[string]string{}, ssh.KeyAlgoED25519}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("certificate (-want +got):\n%s", diff)
	}
	if !c.ValidAfter.Equal(want.After) || !c.ValidBefore.Equal(want.Before) {
		t.Errorf("ActionCert validity %v–%v, want %v–%v", c.ValidAfter, c.ValidBefore, want.After, want.Before)
	}
	if !bytes.Equal(cert.SignatureKey.Marshal(), ca.PublicKey().Marshal()) {
		t.Error("not signed by the CA")
	}
	checker := ssh.CertChecker{SupportedCriticalOptions: []string{"force-command", "source-address"}, Clock: func() time.Time { return now }, IsUserAuthority: func(k ssh.PublicKey) bool { return bytes.Equal(k.Marshal(), ca.PublicKey().Marshal()) }}
	if err := checker.CheckCert("deploy", cert); err != nil {
		t.Errorf("CheckCert: %v", err)
	}
	if !bytes.Equal(c.Signer.PublicKey().Marshal(), cert.Marshal()) {
		t.Error("the signer does not present the certificate")
	}
	// Every action gets a key of its own.
	c2, err := NewActionCert(ca, CertRequest{ActionID: "b", Account: "deploy", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c2.Certificate.Key.Marshal(), cert.Key.Marshal()) {
		t.Error("two actions share a key")
	}
}

func TestNewActionCertRefuses(t *testing.T) {
	t.Parallel()
	ca := sshtest.NewKey()
	ok := CertRequest{ActionID: "a1", Account: "deploy", Timeout: time.Minute}
	tests := []struct {
		name   string
		ca     ssh.Signer
		modify func(r *CertRequest)
	}{
		{"no CA", nil, func(r *CertRequest) {}},
		{"no action id", ca, func(r *CertRequest) { r.ActionID = "" }},
		{"space in action id", ca, func(r *CertRequest) { r.ActionID = "a b" }},
		{"newline in action id", ca, func(r *CertRequest) { r.ActionID = "a\nb" }},
		{"long action id", ca, func(r *CertRequest) { r.ActionID = strings.Repeat("a", 129) }},
		{"no account", ca, func(r *CertRequest) { r.Account = "" }},
		{"account with a comma", ca, func(r *CertRequest) { r.Account = "deploy,root" }},
		{"no timeout", ca, func(r *CertRequest) { r.Timeout = 0 }},
		{"timeout too long", ca, func(r *CertRequest) { r.Timeout = 25 * time.Hour }},
		{"newline in force-command", ca, func(r *CertRequest) { r.ForceCommand = "a\nb" }},
		{"bad source-address", ca, func(r *CertRequest) { r.SourceAddress = "10.0.0.0/8,example.com" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.modify(&r)
			if _, err := NewActionCert(tt.ca, r); !errors.Is(err, ErrInvalidCertRequest) {
				t.Errorf("got %v, want ErrInvalidCertRequest", err)
			}
		})
	}
}

func TestCredentialPublicKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, typ, passphrase string
		dropPub               bool
	}{
		{"ed25519", "ed25519", "", true},
		{"encrypted ed25519 without .pub", "ed25519", "secret", true},
		{"rsa", "rsa", "", true},
	}
	for _, tt := range tests {
		file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
		want, err := sshtest.GenerateKeyFile(file, tt.typ, tt.passphrase)
		if err != nil {
			t.Fatal(err)
		}
		if tt.dropPub {
			os.Remove(file + ".pub")
		}
		got, err := CredentialPublicKey(file)
		if err != nil || !bytes.Equal(got.Marshal(), want.Marshal()) {
			t.Errorf("%s: %v or a different key", tt.name, err)
		}
	}
}
