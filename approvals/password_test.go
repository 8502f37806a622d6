package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestDefaultArgon2Hash(t *testing.T) {
	h := hashPassword([]byte("pw"), DefaultArgon2)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("default hash %q", h)
	}
	if !verifyPassword([]byte("pw"), h) || verifyPassword([]byte("pW"), h) {
		t.Error("default-parameter hash does not verify correctly")
	}
}

func FuzzParsePHC(f *testing.F) {
	f.Add(hashPassword([]byte("x"), cheapArgon))
	f.Add("$argon2id$v=19$m=0,t=0,p=0$$")
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := parsePHC(s)
		if err != nil {
			return
		}
		if p.MemoryKiB > maxArgonMemoryKiB || p.Time == 0 || p.Time > maxArgonTime || p.Threads == 0 || len(salt) < 8 || len(key) < 16 {
			t.Errorf("parsePHC(%q) accepted %+v salt %d key %d", s, p, len(salt), len(key))
		}
	})
}

// A hash made with other parameters (the earlier default) keeps verifying:
// parameters travel in the PHC string.
func TestOlderParametersStillVerify(t *testing.T) {
	h := hashPassword([]byte("an older password"), Argon2Params{Time: 3, MemoryKiB: 64 * 1024, Threads: 4})
	if !verifyPassword([]byte("an older password"), h) || verifyPassword([]byte("an older passworD"), h) {
		t.Error("a hash with other parameters does not verify correctly")
	}
}

// An unknown name is verified against the decoy (Verify refuses it
// whatever the result), and a verification waits for a place only as long
// as its context allows.
func TestPasswordsDecoyAndWait(t *testing.T) {
	pw := newPasswords(cheapArgon)
	if pw.verify(NewSecret("a password of a user"), "") {
		t.Error("a password verified against the decoy")
	}
	if !pw.verify(NewSecret("a password of a user"), pw.hash(NewSecret("a password of a user"))) {
		t.Error("a fresh hash does not verify")
	}
	// An SSO account's marker and a damaged row cost an argon2id
	// computation too, against the decoy: a refusal's timing does not
	// tell an SSO account from a wrong password.
	for _, stored := range []string{"", ssoHash, "$argon2id$damaged"} {
		if h, real := pw.against(stored); h != pw.dummy || real {
			t.Errorf("verify of %q computes against %q (real %v), want the decoy", stored, h, real)
		}
		if pw.verify(NewSecret(stored), stored) {
			t.Errorf("a password verified against %q", stored)
		}
	}
	if h := pw.hash(NewSecret("a password of a user")); func() bool { got, real := pw.against(h); return got != h || !real }() {
		t.Error("a password hash is not verified against itself")
	}
	var releases []func()
	for range maxConcurrentVerify {
		release, err := pw.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pw.acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire past the limit: %v, want context.Canceled", err)
	}
	for _, release := range releases {
		release()
	}
	release, err := pw.acquire(context.Background())
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	release()
}
