package redact

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockgw/airlock/deploy/securefile"
)

// KeyFile is where, under the state directory, the key of the command
// MACs lives.
const KeyFile = "keys/command-hmac"

// LoadOrCreateKey reads the MAC key at path, making one (32 random bytes,
// base64, mode 0600) when there is none.
func LoadOrCreateKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("command MAC key directory: %w", err)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		var k [32]byte
		rand.Read(k[:])
		if err := securefile.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k[:])+"\n"), securefile.WriteOptions{Mode: 0o600, UID: -1, GID: -1}); err != nil {
			return nil, fmt.Errorf("create the command MAC key: %w", err)
		}
	}
	return LoadKey(path)
}

// LoadKey reads the MAC key at path, checked like every secret file.
func LoadKey(path string) ([]byte, error) {
	b, err := securefile.ReadSecret(path, 1<<10)
	if err != nil {
		return nil, fmt.Errorf("command MAC key: %w", err)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) < 32 {
		return nil, fmt.Errorf("%s is not a command MAC key (32 bytes, base64)", path)
	}
	return k, nil
}
