package deploy

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// fixedKey is a deterministic ed25519 public key for golden files.
func fixedKey(t testing.TB, seed byte) ssh.PublicKey {
	t.Helper()
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat(string([]byte{seed}), ed25519.SeedSize)))
	k, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAuthorizedKeysLineGolden(t *testing.T) {
	key := fixedKey(t, 1)
	tests := []struct {
		name string
		opts LineOptions
	}{
		{"plain", LineOptions{Target: "build-box", Account: "deploy"}},
		{"forced airlock-action", LineOptions{Target: "build-box", Account: "deploy", Command: "/usr/local/bin/airlock-action --policy /etc/airlock/action.hcl"}},
		{"from a network", LineOptions{Target: "build-box", Account: "deploy", Command: "/usr/local/bin/airlock-action", From: "10.0.0.0/24,!10.0.0.13,gw-*.example.com"}},
		{"legacy options", LineOptions{Target: "old-box", Account: "ops", Command: "/usr/local/bin/airlock-action", Legacy: true}},
		{"quotes and backslashes", LineOptions{Target: "t", Account: "a", Command: `printf '%s\n' "a \"quoted\" word" 'back\slash'`}},
		{"gateway CA for one account", LineOptions{Target: "build-box", Account: "deploy", Command: "/usr/local/bin/airlock-action", CertAuthority: true}},
		{"jump host", LineOptions{Target: "bastion", Account: "jump", JumpTo: []string{"10.0.0.5:22", "db-2.internal:2222", "[2001:db8::5]:22"}, From: "203.0.113.7"}},
	}
	var b strings.Builder
	for _, tt := range tests {
		line, err := AuthorizedKeysLine(key, tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if strings.ContainsAny(line, "\n\r") {
			t.Fatalf("%s: line %q is more than one line", tt.name, line)
		}
		if _, err := ParseAirlockLine(line); err != nil {
			t.Errorf("%s: the line does not parse back: %v", tt.name, err)
		}
		b.WriteString("# " + tt.name + "\n" + line + "\n")
	}
	golden := filepath.Join("testdata", "authorized_keys.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("authorized_keys lines (-want +got):\n%s", diff)
	}
}

func TestAuthorizedKeysLineRefuses(t *testing.T) {
	key := fixedKey(t, 1)
	cert := &ssh.Certificate{Key: key, CertType: ssh.UserCert, SignatureKey: fixedKey(t, 2)}
	tests := []struct {
		name string
		key  ssh.PublicKey
		opts LineOptions
		want error
	}{
		{"no key", nil, LineOptions{Target: "t", Account: "a"}, ErrInvalidKey},
		{"jump host with a command", key, LineOptions{Target: "t", Account: "a", JumpTo: []string{"10.0.0.5:22"}, Command: "/bin/sh"}, ErrInvalidJumpTo},
		{"jump host legacy", key, LineOptions{Target: "t", Account: "a", JumpTo: []string{"10.0.0.5:22"}, Legacy: true}, ErrInvalidJumpTo},
		{"jump to no port", key, LineOptions{Target: "t", Account: "a", JumpTo: []string{"10.0.0.5"}}, ErrInvalidJumpTo},
		{"jump to a quote", key, LineOptions{Target: "t", Account: "a", JumpTo: []string{`10.0.0.5:22",command="/bin/sh`}}, ErrInvalidJumpTo},
		{"jump to a space", key, LineOptions{Target: "t", Account: "a", JumpTo: []string{"a b:22"}}, ErrInvalidJumpTo},
		{"certificate", cert, LineOptions{Target: "t", Account: "a"}, ErrInvalidKey},
		{"no target", key, LineOptions{Account: "a"}, ErrInvalidName},
		{"no account", key, LineOptions{Target: "t"}, ErrInvalidName},
		{"slash in target", key, LineOptions{Target: "a/b", Account: "a"}, ErrInvalidName},
		{"space in account", key, LineOptions{Target: "t", Account: "a b"}, ErrInvalidName},
		{"quote in account", key, LineOptions{Target: "t", Account: `a"`}, ErrInvalidName},
		{"newline in command", key, LineOptions{Target: "t", Account: "a", Command: "true\nssh-ed25519 AAAA attacker"}, ErrInvalidCommand},
		{"carriage return in command", key, LineOptions{Target: "t", Account: "a", Command: "true\r"}, ErrInvalidCommand},
		{"NUL in command", key, LineOptions{Target: "t", Account: "a", Command: "true\x00x"}, ErrInvalidCommand},
		{"escape in command", key, LineOptions{Target: "t", Account: "a", Command: "echo \x1b[2J"}, ErrInvalidCommand},
		{"trailing backslash", key, LineOptions{Target: "t", Account: "a", Command: `echo \`}, ErrInvalidCommand},
		{"invalid UTF-8", key, LineOptions{Target: "t", Account: "a", Command: "echo \xff"}, ErrInvalidCommand},
		{"from with host bits", key, LineOptions{Target: "t", Account: "a", From: "10.0.0.1/8"}, ErrInvalidFrom},
		{"from with a quote", key, LineOptions{Target: "t", Account: "a", From: `10.0.0.1",command="sh`}, ErrInvalidFrom},
		{"from with a space", key, LineOptions{Target: "t", Account: "a", From: "10.0.0.1 x"}, ErrInvalidFrom},
		{"from with an empty entry", key, LineOptions{Target: "t", Account: "a", From: "10.0.0.1,"}, ErrInvalidFrom},
		{"from with a bad CIDR", key, LineOptions{Target: "t", Account: "a", From: "10.0.0.0/33"}, ErrInvalidFrom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line, err := AuthorizedKeysLine(tt.key, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %q, %v; want error %v", line, err, tt.want)
			}
		})
	}
}

// TestAuthorizedKeysLineOptionsParse checks the options as x/crypto's own
// authorized_keys parser sees them: one option each, quoting intact.
func TestAuthorizedKeysLineOptionsParse(t *testing.T) {
	line, err := AuthorizedKeysLine(fixedKey(t, 1), LineOptions{Target: "t", Account: "a", From: "127.0.0.1", Legacy: true, Command: `echo "x,y" \z`})
	if err != nil {
		t.Fatal(err)
	}
	_, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"restrict", "no-port-forwarding", "no-agent-forwarding", "no-X11-forwarding", "no-pty", "no-user-rc", `from="127.0.0.1"`, `command="echo \"x,y\" \z"`}
	if diff := cmp.Diff(want, options); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if comment != "airlock:t/a" {
		t.Errorf("comment = %q, want airlock:t/a", comment)
	}
}
