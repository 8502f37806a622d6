package sshexec

import (
	"fmt"

	"golang.org/x/crypto/ssh"
)

// rsaSHA2 are the only signature algorithms an RSA key may use: ssh-rsa
// (SHA-1) is refused (RFC 8332).
var rsaSHA2 = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}

// ParsePrivateKey parses a private key in OpenSSH, PKCS#1, PKCS#8 or SEC 1
// PEM form. An encrypted key needs its passphrase; for an unencrypted key
// passphrase must be empty. Ed25519, ECDSA and RSA keys are supported; an
// RSA key's signer only ever uses SHA-2 signatures.
//
// When the key is encrypted and no passphrase is given, the error wraps
// *ssh.PassphraseMissingError. Errors never contain key material.
func ParsePrivateKey(pemBytes, passphrase []byte) (ssh.Signer, error) {
	var (
		s   ssh.Signer
		err error
	)
	if len(passphrase) == 0 {
		s, err = ssh.ParsePrivateKey(pemBytes)
	} else {
		s, err = ssh.ParsePrivateKeyWithPassphrase(pemBytes, passphrase)
	}
	if err != nil {
		return nil, fmt.Errorf("SSH private key: %w", err)
	}
	return strongSigner(s)
}

// strongSigner restricts an RSA signer to SHA-2 signature algorithms and
// returns every other signer as it is. An RSA signer that cannot be
// restricted is refused rather than allowed to sign with SHA-1.
func strongSigner(s ssh.Signer) (ssh.Signer, error) {
	if s.PublicKey().Type() != ssh.KeyAlgoRSA {
		return s, nil
	}
	as, ok := s.(ssh.AlgorithmSigner)
	if !ok {
		return nil, fmt.Errorf("SSH private key: its RSA signer cannot choose its signature algorithm, so it would sign with SHA-1")
	}
	m, err := ssh.NewSignerWithAlgorithms(as, rsaSHA2)
	if err != nil {
		return nil, fmt.Errorf("SSH private key: restrict its RSA signer to SHA-2: %w", err)
	}
	return m, nil
}
