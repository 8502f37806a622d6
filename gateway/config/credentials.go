package config

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/deploy"
	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/sshexec"
)

// MaxSecretFile bounds what is read from a key, passphrase or secret
// file.
const MaxSecretFile = 1 << 20

// LoadSigner loads a credential's private key, checking the key file and
// the passphrase file (a trailing newline is not part of the passphrase).
// Errors name files and problems, never key material or passphrases.
func LoadSigner(c *Credential) (ssh.Signer, error) {
	return LoadSignerFor(c, -1)
}

// LoadSignerFor is LoadSigner with the files checked as secrets of
// account uid (-1: whoever runs this): `config check`, run by root,
// checks them for the user the gateway runs as (GatewayUser).
func LoadSignerFor(c *Credential, uid int) (ssh.Signer, error) {
	if c.CA {
		return nil, fmt.Errorf("credential %q uses the CA; it has no key file", c.Name)
	}
	pemBytes, err := securefile.ReadSecretFor(c.PrivateKeyFile, MaxSecretFile, uid)
	if err != nil {
		return nil, fmt.Errorf("credential %q: private_key_file: %w", c.Name, credentialFileError(c.PrivateKeyFile, err))
	}
	var pass approvals.Secret
	if c.PassphraseFile != "" {
		b, err := securefile.ReadSecretFor(c.PassphraseFile, MaxSecretFile, uid)
		if err != nil {
			return nil, fmt.Errorf("credential %q: passphrase_file: %w", c.Name, credentialFileError(c.PassphraseFile, err))
		}
		pass = approvals.NewSecret(string(bytes.TrimRight(b, "\r\n")))
	}
	s, err := sshexec.ParsePrivateKey(pemBytes, []byte(pass.Reveal()))
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("credential %q: %s is encrypted: set passphrase_file", c.Name, c.PrivateKeyFile)
		}
		return nil, fmt.Errorf("credential %q: %s: %w", c.Name, c.PrivateKeyFile, err)
	}
	return s, nil
}

// systemdCredentials is where systemd's LoadCredential= puts a service's
// secrets; they exist there only while the service runs, for it alone.
const systemdCredentials = "/run/credentials/"

// credentialFileError adds, for a file under /run/credentials/ that this
// process cannot read, where it comes from and where it can be checked.
func credentialFileError(file string, err error) error {
	if !strings.HasPrefix(file, systemdCredentials) || os.Getenv("CREDENTIALS_DIRECTORY") != "" ||
		!(errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
		return err
	}
	return fmt.Errorf("%w; it is a systemd credential (LoadCredential=), which exists only inside the service it is loaded for: "+
		"this check, run by hand, cannot read it; the unit's ExecStartPre runs it inside the service (systemctl restart airlock, then journalctl -u airlock)", err)
}

// GatewayUser is the account the gateway runs as, for checks run by
// someone else (root, before systemd starts the service as its user): the
// owner of state_dir, since the gateway refuses a state directory it does
// not own; before there is one, whoever runs the check.
func GatewayUser(cfg *Config) int {
	if fi, err := os.Stat(cfg.StateDir); err == nil {
		uid, _ := securefile.Owner(fi)
		return uid
	}
	return os.Geteuid()
}

// LoadCA loads the gateway CA that credential c (ca = true) signs with,
// from the state directory, with the checks of deploy.LoadCA. Its error
// says what to do: create the CA when there is none, fix the file when it
// is there but refused.
func LoadCA(cfg *Config, c *Credential) (ssh.Signer, error) {
	caFile := filepath.Join(cfg.StateDir, "keys", "ca")
	ca, err := deploy.LoadCA(caFile, nil)
	switch {
	case errors.Is(err, fs.ErrNotExist) && cfg.Storage != nil:
		return nil, fmt.Errorf("credential %q uses the gateway CA, and there is none here (%s). The replicas share one CA: copy %s and %s.pub from a replica that has it (airlock storage status shows its fingerprint); "+
			"only when no replica has one, create it with `airlock ca init --config %s` (it refuses when the replicas already share one)", c.Name, caFile, caFile, caFile, cfg.Path)
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("credential %q uses the gateway CA, and there is none yet (%s); create it with `airlock ca init --config %s`", c.Name, caFile, cfg.Path)
	case err != nil:
		return nil, fmt.Errorf("credential %q uses the gateway CA, which cannot be used: %v", c.Name, err)
	}
	return ca, nil
}

// LoadCertPool reads a PEM file of CA certificates (client_ca_file, an
// issuer's ca_file) into a pool; a file without one is an error.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// MinSecretLen is the shortest secret value a secret block may hold: each
// occurrence of the value in an output is replaced, and a shorter value
// would replace ordinary text.
const MinSecretLen = 6

// LoadSecretValue reads a secret block's value, checking its file like a
// key file. The value is the file's bytes as they are (a trailing newline
// included: it is what the command reads); errors name the file, never
// the value.
func LoadSecretValue(s *Secret) ([]byte, error) {
	return LoadSecretValueFor(s, -1)
}

// LoadSecretValueFor is LoadSecretValue with the file checked as a secret
// of account uid (-1: whoever runs this), as LoadSignerFor.
func LoadSecretValueFor(s *Secret, uid int) ([]byte, error) {
	file := s.File
	if s.SystemdCredential != "" {
		dir := os.Getenv("CREDENTIALS_DIRECTORY")
		if dir == "" {
			return nil, fmt.Errorf("secret %q: systemd_credential %q: $CREDENTIALS_DIRECTORY is not set; run the gateway as a systemd service with LoadCredential=%s:FILE", s.Name, s.SystemdCredential, s.SystemdCredential)
		}
		file = filepath.Join(dir, s.SystemdCredential)
	}
	b, err := securefile.ReadSecretFor(file, MaxSecretFile, uid)
	if err != nil {
		return nil, fmt.Errorf("secret %q: %w", s.Name, credentialFileError(file, err))
	}
	if n := len(bytes.TrimRight(b, "\r\n")); n < MinSecretLen {
		return nil, fmt.Errorf("secret %q: %s holds %d bytes (without its line end), fewer than %d: too short to be found and hidden in outputs", s.Name, file, n, MinSecretLen)
	}
	return b, nil
}
