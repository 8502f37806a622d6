package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"testing"

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

// NewFaultServerWithClient is NewFaultServer accepting the given client key
// instead of a key of its own.
func NewFaultServerWithClient(tb testing.TB, opts FaultOptions, client ssh.Signer) *FaultServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	host := NewKey()
	f := &FaultServer{
		Addr:         ln.Addr().String(),
		HostKey:      host.PublicKey(),
		ClientSigner: client,
		opts:         opts,
		ln:           ln,
		conns:        map[net.Conn]bool{},
		quit:         make(chan struct{}),
	}
	want := string(client.PublicKey().Marshal())
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == want {
				return &ssh.Permissions{}, nil
			}
			return nil, errUnknownKey
		},
	}
	cfg.AddHostKey(host)
	f.wg.Go(func() { f.accept(cfg) })
	tb.Cleanup(f.Close)
	return f
}
