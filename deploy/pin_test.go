package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

func TestSelect(t *testing.T) {
	k1, k2, ca := fixedKey(t, 1), fixedKey(t, 2), fixedKey(t, 3)
	cert := &ssh.Certificate{Key: k2, CertType: ssh.HostCert, SignatureKey: ca}
	offered := []OfferedKey{{Key: k1}, {Key: k2, Cert: cert}}
	tests := []struct {
		name    string
		fp      string
		want    Selection
		wantErr error
	}{
		{"plain key", ssh.FingerprintSHA256(k1), Selection{OfferedKey: offered[0]}, nil},
		{"certified key", ssh.FingerprintSHA256(k2), Selection{OfferedKey: offered[1]}, nil},
		{"host CA", ssh.FingerprintSHA256(ca), Selection{OfferedKey: offered[1], CA: true}, nil},
		{"not offered", ssh.FingerprintSHA256(fixedKey(t, 4)), Selection{}, ErrFingerprintNotOffered},
		{"MD5", ssh.FingerprintLegacyMD5(k1), Selection{}, ErrBadFingerprint},
		{"no prefix", strings.TrimPrefix(ssh.FingerprintSHA256(k1), "SHA256:"), Selection{}, ErrBadFingerprint},
		{"lower-case prefix", "sha256:" + strings.TrimPrefix(ssh.FingerprintSHA256(k1), "SHA256:"), Selection{}, ErrBadFingerprint},
		{"padded", ssh.FingerprintSHA256(k1) + "=", Selection{}, ErrBadFingerprint},
		{"truncated", ssh.FingerprintSHA256(k1)[:20], Selection{}, ErrBadFingerprint},
		{"empty", "", Selection{}, ErrBadFingerprint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(offered, tt.fp)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Select: %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(describe(tt.want), describe(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// describe reduces a Selection to what identifies it.
func describe(s Selection) string {
	if s.Key == nil {
		return ""
	}
	return fmt.Sprintf("key %s cert %v CA %v", s.Fingerprint(), s.Cert != nil, s.CA)
}

func TestAddHostKey(t *testing.T) {
	t.Parallel()
	key := fixedKey(t, 9)
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	old := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fixedKey(t, 8))))
	// head and tail are around every target block below and must come
	// through byte for byte.
	head := "# airlock gateway\nstate_dir   =   \"/var/lib/airlock\"   # odd   spacing\n\ntarget \"other\" {\n\taddress = \"10.0.0.9:22\"\n\thost_keys = [\"" + old + "\"]\n}\n\n"
	tail := "\n// trailing comment\n"
	tests := []struct {
		name       string
		block      string
		want       string // the block after, "" when unchanged
		wantChange Change
	}{
		{
			"one element per line",
			"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\n    \"" + old + "\", # the old one\n  ]\n}\n",
			"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\n    \"" + old + "\", # the old one\n    \"" + k + "\",\n  ]\n}\n",
			Added,
		},
		{
			"one line",
			"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\"" + old + "\"]   # pinned 2026-01-01\n}\n",
			"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\"" + old + "\", \"" + k + "\"]   # pinned 2026-01-01\n}\n",
			Added,
		},
		{
			"empty list",
			"target \"box\" {\n  address   = \"10.0.0.1:22\"\n  host_keys = []\n}\n",
			"target \"box\" {\n  address   = \"10.0.0.1:22\"\n  host_keys = [\"" + k + "\"]\n}\n",
			Added,
		},
		{
			"no host_keys yet",
			"target \"box\" {\n    address = \"10.0.0.1:22\"\n\n    account \"deploy\" {\n      credential = \"deploy\"\n    }\n}\n",
			"target \"box\" {\n    address = \"10.0.0.1:22\"\n\n    account \"deploy\" {\n      credential = \"deploy\"\n    }\n    host_keys = [\"" + k + "\"]\n}\n",
			Added,
		},
		{
			"already pinned",
			"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\"" + k + " a comment\"]\n}\n",
			"",
			Unchanged,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(keysDir(t), "airlock.hcl")
			before := head + tt.block + tail
			writeFile(t, file, before, 0o640)
			got, err := AddHostKey(file, "box", key)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantChange {
				t.Errorf("change = %v, want %v", got, tt.wantChange)
			}
			want := before
			if tt.want != "" {
				want = head + tt.want + tail
			}
			if diff := cmp.Diff(want, readFile(t, file)); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode = %v, want 0640 kept", fi.Mode().Perm())
			}
		})
	}
}

func TestAddHostKeyRefuses(t *testing.T) {
	t.Parallel()
	key := fixedKey(t, 9)
	tests := []struct {
		name string
		src  string
		want error
	}{
		{"no such target", "target \"other\" {\n  address = \"x:22\"\n}\n", ErrTargetNotFound},
		{"target twice", "target \"box\" {\n  address = \"x:22\"\n}\ntarget \"box\" {\n  address = \"y:22\"\n}\n", ErrTargetNotFound},
		{"host_keys from a variable", "target \"box\" {\n  address = \"x:22\"\n  host_keys = local.keys\n}\n", ErrConfigNotLiteral},
		{"host_keys with an expression", "target \"box\" {\n  address = \"x:22\"\n  host_keys = [\"a\", upper(\"b\")]\n}\n", ErrConfigNotLiteral},
		{"one-line block", "target \"box\" { address = \"x:22\" }\n", ErrConfigNotLiteral},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(keysDir(t), "airlock.hcl")
			writeFile(t, file, tt.src, 0o640)
			if _, err := AddHostKey(file, "box", key); !errors.Is(err, tt.want) {
				t.Errorf("AddHostKey: %v, want %v", err, tt.want)
			}
			if got := readFile(t, file); got != tt.src {
				t.Errorf("refused edit changed the file:\n%s", got)
			}
		})
	}
}

func TestTargetAddress(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "airlock.hcl")
	writeFile(t, file, "target \"a\" {\n  address = \"10.0.0.1:2222\"\n}\ntarget \"b\" {\n  address = \"build.example.com\"\n}\ntarget \"c\" {\n  address = \"${x}:22\"\n}\ntarget \"d\" {\n}\n", 0o644)
	tests := []struct {
		target  string
		want    string
		wantErr error
	}{
		{"a", "10.0.0.1:2222", nil},
		{"b", "build.example.com:22", nil},
		{"c", "", ErrConfigNotLiteral},
		{"d", "", ErrConfigNotLiteral},
		{"e", "", ErrTargetNotFound},
	}
	for _, tt := range tests {
		got, err := TargetAddress(file, tt.target)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("TargetAddress(%s) = %q, %v; want %q, %v", tt.target, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestAppendKnownHosts(t *testing.T) {
	t.Parallel()
	key := fixedKey(t, 9)
	file := filepath.Join(keysDir(t), "known_hosts")
	writeFile(t, file, "# managed by airlock\nexample.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", 0o644)
	for i, want := range []Change{Added, Unchanged} {
		got, err := appendKnownHosts(file, "", "10.0.0.1:2222", key, false)
		if err != nil || got != want {
			t.Fatalf("call %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if got, err := appendKnownHosts(file, "", "10.0.0.1:22", key, false); err != nil || got != Added {
		t.Fatalf("port 22: %v, %v", got, err)
	}
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	want := "# managed by airlock\nexample.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n[10.0.0.1]:2222 " + k + "\n10.0.0.1 " + k + "\n"
	if diff := cmp.Diff(want, readFile(t, file)); diff != "" {
		t.Errorf("known_hosts (-want +got):\n%s", diff)
	}
}

func TestScanAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{ExtraHostKeys: []string{"ecdsa", "rsa"}, HostCertPrincipals: []string{"127.0.0.1"}})
	before := s.Accepted()
	got, err := Scan(context.Background(), s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, k := range got {
		lines = append(lines, k.String())
	}
	ed := ssh.FingerprintSHA256(s.HostKey)
	want := []string{
		"ssh-ed25519 " + ed,
		"ecdsa-sha2-nistp256 " + ssh.FingerprintSHA256(s.ExtraHostKeys["ecdsa"]),
		"ssh-rsa " + ssh.FingerprintSHA256(s.ExtraHostKeys["rsa"]),
		"ssh-ed25519 " + ed + " host certificate signed by CA ssh-ed25519 " + ssh.FingerprintSHA256(s.HostCA) + ", principals 127.0.0.1, valid until ",
	}
	if len(lines) != len(want) {
		t.Fatalf("scan found %d keys, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("key %d = %q, want prefix %q", i, lines[i], want[i])
		}
	}
	// Trusting nothing also means authenticating nothing.
	if s.Accepted() != before {
		t.Error("scan logged in")
	}
}

func TestScanRefusesUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Scan(ctx, "127.0.0.1:1"); err == nil {
		t.Error("scan of a closed port succeeded")
	}
	if _, err := Scan(ctx, "no-port"); err == nil {
		t.Error("scan of an address without a port succeeded")
	}
}

// pinConfig writes a gateway config with target "box" at addr and no
// host keys.
func pinConfig(t *testing.T, addr string) string {
	t.Helper()
	file := filepath.Join(keysDir(t), "airlock.hcl")
	writeFile(t, file, "target \"box\" {\n  address = \""+addr+"\"\n  default_account = \"deploy\"\n}\n", 0o640)
	return file
}

// trustedBy runs a command on s as its client key, trusting only hk.
func trustedBy(s *sshtest.SSHD, hk sshexec.HostKeys) (*sshexec.Result, error) {
	cfg := configFor(s, s.ClientSigner)
	cfg.HostKeys = hk
	return sshexec.Run(context.Background(), cfg, "true")
}

func TestPinAgainstSSHD(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{ExtraHostKeys: []string{"ecdsa"}, HostCertPrincipals: []string{"127.0.0.1"}})
	ed := ssh.FingerprintSHA256(s.HostKey)

	t.Run("into the config", func(t *testing.T) {
		t.Parallel()
		cfg := pinConfig(t, s.Addr)
		res, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ed})
		if err != nil {
			t.Fatal(err)
		}
		if res.Change != Added || res.File != cfg || res.Pinned.CA {
			t.Errorf("result %+v", res)
		}
		body, err := parseConfig([]byte(readFile(t, cfg)), cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := targetBlock(body, cfg, "box")
		keys, err := hostKeys(b, cfg)
		if err != nil || len(keys) != 1 {
			t.Fatalf("host_keys after pin: %v, %v", keys, err)
		}
		if r, err := trustedBy(s, sshexec.HostKeys{Pinned: keys}); err != nil || !r.Success() {
			t.Errorf("sshexec with the pinned key: %v", err)
		}
		again, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ed})
		if err != nil || again.Change != Unchanged {
			t.Errorf("pin again: %+v, %v; want unchanged", again, err)
		}
	})
	t.Run("a fingerprint the server did not offer", func(t *testing.T) {
		t.Parallel()
		cfg := pinConfig(t, s.Addr)
		before := readFile(t, cfg)
		_, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ssh.FingerprintSHA256(fixedKey(t, 1))})
		if !errors.Is(err, ErrFingerprintNotOffered) {
			t.Errorf("Pin: %v, want ErrFingerprintNotOffered", err)
		}
		if readFile(t, cfg) != before {
			t.Error("a refused pin changed the config")
		}
	})
	t.Run("into a known_hosts file", func(t *testing.T) {
		t.Parallel()
		cfg := pinConfig(t, s.Addr)
		kh := filepath.Join(filepath.Dir(cfg), "known_hosts")
		ecdsa := ssh.FingerprintSHA256(s.ExtraHostKeys["ecdsa"])
		res, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ecdsa, KnownHostsFile: kh})
		if err != nil || res.Change != Added || res.File != kh {
			t.Fatalf("Pin: %+v, %v", res, err)
		}
		if r, err := trustedBy(s, sshexec.HostKeys{KnownHostsFiles: []string{kh}}); err != nil || !r.Success() {
			t.Errorf("sshexec with the known_hosts file: %v", err)
		}
	})
	t.Run("the host CA", func(t *testing.T) {
		t.Parallel()
		cfg := pinConfig(t, s.Addr)
		ca := ssh.FingerprintSHA256(s.HostCA)
		if _, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ca}); !errors.Is(err, ErrCANeedsKnownHosts) {
			t.Errorf("CA into the config: %v, want ErrCANeedsKnownHosts", err)
		}
		kh := filepath.Join(filepath.Dir(cfg), "known_hosts")
		res, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ca, KnownHostsFile: kh})
		if err != nil || !res.Pinned.CA {
			t.Fatalf("Pin CA: %+v, %v", res, err)
		}
		if got := readFile(t, kh); !strings.HasPrefix(got, "@cert-authority [127.0.0.1]:") {
			t.Errorf("known_hosts = %q, want an @cert-authority line", got)
		}
		// Only the CA is trusted: the server's certificate is accepted.
		if r, err := trustedBy(s, sshexec.HostKeys{KnownHostsFiles: []string{kh}}); err != nil || !r.Success() {
			t.Errorf("sshexec trusting the host CA: %v", err)
		}
	})
}

// TestHostCAWrongPrincipal: a server whose certificate names another host
// is refused by Pin, and a CA trusted anyway does not make sshexec accept
// it.
func TestHostCAWrongPrincipal(t *testing.T) {
	t.Parallel()
	s := sshtest.NewSSHD(t, sshtest.Options{HostCertPrincipals: []string{"other.example"}})
	cfg := pinConfig(t, s.Addr)
	kh := filepath.Join(filepath.Dir(cfg), "known_hosts")
	_, err := Pin(context.Background(), PinOptions{ConfigFile: cfg, Target: "box", Fingerprint: ssh.FingerprintSHA256(s.HostCA), KnownHostsFile: kh})
	if !errors.Is(err, ErrHostCertInvalid) {
		t.Fatalf("Pin: %v, want ErrHostCertInvalid", err)
	}
	if _, err := os.Stat(kh); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused CA pin wrote the known_hosts file")
	}
	if _, err := appendKnownHosts(kh, "cert-authority", s.Addr, s.HostCA, false); err != nil {
		t.Fatal(err)
	}
	r, err := trustedBy(s, sshexec.HostKeys{KnownHostsFiles: []string{kh}})
	if err == nil || r.Outcome != sshexec.HostKeyUnknown && r.Outcome != sshexec.HostKeyMismatch {
		t.Errorf("sshexec against a certificate for another host: %v (%v), want a host key refusal", r.Outcome, err)
	}
}

// An address is read as a target's address in the configuration (and by
// hosts scan): a bare host gets port 22.
func TestSSHAddress(t *testing.T) {
	tests := []struct {
		in, want string // want "" for a refusal
	}{
		{"127.0.0.1", "127.0.0.1:22"},
		{"build-box", "build-box:22"},
		{"build-box:2222", "build-box:2222"},
		{"[::1]", "[::1]:22"},
		{"[::1]:2222", "[::1]:2222"},
		{"[fe80::1%eth0]", "[fe80::1%eth0]:22"},
		{"::1", ""},
		{"[build-box]", ""},
		{"[build-box]:22", ""},
		{"[127.0.0.1]:22", ""},
		{"[::1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := SSHAddress(tt.in)
		if (err != nil) != (tt.want == "") || got != tt.want {
			t.Errorf("SSHAddress(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// --replace makes the new key the target's only one, in host_keys and in
// a managed known_hosts file, and leaves everything else byte for byte.
func TestReplaceHostKeys(t *testing.T) {
	t.Parallel()
	key := fixedKey(t, 9)
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	old1 := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fixedKey(t, 8))))
	old2 := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(fixedKey(t, 7))))
	dir := keysDir(t)
	cfg := filepath.Join(dir, "airlock.hcl")
	other := "target \"other\" {\n  address = \"10.0.0.9:22\"\n  host_keys = [\"" + old1 + "\"]\n}\n"
	writeFile(t, cfg, "# pins\n"+other+"target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\n    \""+old1+"\",\n    \""+old2+"\", # rotated out\n  ] # keep me\n}\n", 0o640)
	for i, want := range []Change{Replaced, Unchanged} {
		if got, err := ReplaceHostKeys(cfg, "box", key); err != nil || got != want {
			t.Fatalf("call %d: %v, %v; want %v", i, got, err, want)
		}
	}
	want := "# pins\n" + other + "target \"box\" {\n  address = \"10.0.0.1:22\"\n  host_keys = [\"" + k + "\"] # keep me\n}\n"
	if diff := cmp.Diff(want, readFile(t, cfg)); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	kh := filepath.Join(dir, "known_hosts")
	shared := "10.0.0.1,10.0.0.2 " + old1
	writeFile(t, kh, "# managed\n10.0.0.1 "+old1+"\n"+shared+"\n[10.0.0.1]:2222 "+old2+"\n10.0.0.1 "+old2+"\n", 0o644)
	if got, err := appendKnownHosts(kh, "", "10.0.0.1:22", key, true); err != nil || got != Replaced {
		t.Fatalf("known_hosts: %v, %v", got, err)
	}
	want = "# managed\n" + shared + "\n[10.0.0.1]:2222 " + old2 + "\n10.0.0.1 " + k + "\n"
	if diff := cmp.Diff(want, readFile(t, kh)); diff != "" {
		t.Errorf("known_hosts (-want +got):\n%s", diff)
	}
}
