package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"

	"golang.org/x/crypto/ssh"
)

// NewKeyFile writes a fresh ed25519 private key in OpenSSH form to file
// (mode 0600) and returns its signer, for a credential that several
// servers (sshd through Authorize, a FaultServer through
// NewFaultServerWithClient) accept.
func NewKeyFile(file string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "airlock-test")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}
