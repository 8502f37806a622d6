package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/sshexec"
)

// maxSecretFile bounds what is read from a key or passphrase file.
const maxSecretFile = 1 << 20

// FileModeError says a secret file (or its directory) may be read or
// written by someone other than the gateway user.
type FileModeError struct {
	Path string
	Mode fs.FileMode
	UID  uint32 // owner
	// Fix is the command that repairs it.
	Fix string
}

func (e *FileModeError) Error() string {
	return fmt.Sprintf("gateway: %s has mode %04o and owner uid %d: it must be readable by the gateway user only; run: %s",
		e.Path, e.Mode.Perm(), e.UID, e.Fix)
}

// CheckSecretFile refuses a file that is not a regular file owned by the
// current user (or root) with no group or world permissions, the rule for
// private keys, the CA key, the checkpoint signing key and passphrase files.
func CheckSecretFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("gateway: %s is not a regular file", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("gateway: %s: cannot read its owner", path)
	}
	me := uint32(os.Geteuid())
	switch {
	case fi.Mode().Perm()&0o077 != 0:
		return &FileModeError{Path: path, Mode: fi.Mode(), UID: st.Uid, Fix: "chmod 600 " + path}
	case st.Uid != me && st.Uid != 0:
		return &FileModeError{Path: path, Mode: fi.Mode(), UID: st.Uid, Fix: fmt.Sprintf("chown %d %s", me, path)}
	}
	return nil
}

// readSecretFile checks and reads a secret file.
func readSecretFile(path string) ([]byte, error) {
	if err := CheckSecretFile(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("gateway: read %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("gateway: %s is larger than %d bytes", path, maxSecretFile)
	}
	return b, nil
}

// LoadSigner loads a credential's private key, checking the key file and
// the passphrase file (a trailing newline is not part of the passphrase).
// Errors name files and problems, never key material or passphrases.
func LoadSigner(c *CredentialConfig) (ssh.Signer, error) {
	if c.CA {
		return nil, fmt.Errorf("gateway: credential %q uses the CA; it has no key file", c.Name)
	}
	pemBytes, err := readSecretFile(c.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: credential %q: %w", c.Name, err)
	}
	var pass approvals.Secret
	if c.PassphraseFile != "" {
		b, err := readSecretFile(c.PassphraseFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: credential %q: %w", c.Name, err)
		}
		pass = approvals.NewSecret(string(bytes.TrimRight(b, "\r\n")))
	}
	s, err := sshexec.ParsePrivateKey(pemBytes, []byte(pass.Reveal()))
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("gateway: credential %q: %s is encrypted: set passphrase_file", c.Name, c.PrivateKeyFile)
		}
		return nil, fmt.Errorf("gateway: credential %q: %s: %w", c.Name, c.PrivateKeyFile, err)
	}
	return s, nil
}

// LoadCA loads the gateway CA that credential c (ca = true) signs with,
// from the state directory, with the checks of deploy.LoadCA. Its error
// says what to do: create the CA when there is none, fix the file when it
// is there but refused.
func LoadCA(cfg *Config, c *CredentialConfig) (ssh.Signer, error) {
	caFile := filepath.Join(cfg.StateDir, "keys", "ca")
	ca, err := deploy.LoadCA(caFile, nil)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("gateway: credential %q uses the gateway CA, and there is none yet (%s); create it with `airlock ca init --config %s`", c.Name, caFile, cfg.Path)
	case err != nil:
		return nil, fmt.Errorf("gateway: credential %q uses the gateway CA, which cannot be used: %v", c.Name, err)
	}
	return ca, nil
}
