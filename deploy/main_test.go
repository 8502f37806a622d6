package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// shared is one real sshd for the package's tests. It trusts sharedCA
// (TrustedUserCAKeys) and exposes auth info to sessions. Tests add their
// own lines to its authorized_keys with InstallLine, each under its own
// airlock comment, and never change the server otherwise.
var (
	shared    *sshtest.SSHD
	sharedCA  ssh.Signer
	sharedErr error
	caDir     string
)

func TestMain(m *testing.M) {
	if _, err := os.Stat(sshtest.SSHDPath); err == nil {
		sharedErr = startShared()
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	if caDir != "" {
		os.RemoveAll(caDir)
	}
	os.Exit(code)
}

func startShared() error {
	var err error
	// Not t.TempDir: sshd must be able to read the CA line.
	if caDir, err = os.MkdirTemp("", "airlock-deploy-ca-"); err != nil {
		return err
	}
	if err := os.Chmod(caDir, 0o755); err != nil {
		return err
	}
	keyFile := filepath.Join(caDir, "keys", "ca")
	if _, _, err := InitCA(keyFile); err != nil {
		return err
	}
	if sharedCA, err = LoadCA(keyFile, nil); err != nil {
		return err
	}
	trusted := filepath.Join(caDir, "trusted_user_ca_keys")
	if err := os.WriteFile(trusted, []byte(CAPublicKeyLine(sharedCA.PublicKey())+"\n"), 0o644); err != nil {
		return err
	}
	shared, err = sshtest.StartSSHD(sshtest.Options{Config: []string{
		"TrustedUserCAKeys " + trusted,
		"ExposeAuthInfo yes",
	}})
	return err
}

func sharedSSHD(t *testing.T) *sshtest.SSHD {
	t.Helper()
	sshtest.Need(t)
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	shared.LogOnFailure(t)
	return shared
}

// authorize installs line into s's authorized_keys with InstallLine.
func authorize(t *testing.T, s *sshtest.SSHD, line string) {
	t.Helper()
	if _, err := InstallLine(s.AuthorizedKeysFile(), line); err != nil {
		t.Fatalf("InstallLine: %v", err)
	}
}

// dial connects to s as its user with signer, from localIP when set.
func dial(s *sshtest.SSHD, signer ssh.Signer, localIP string) (*ssh.Client, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	conn, err := d.Dial("tcp", s.Addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(conn, s.Addr, &ssh.ClientConfig{
		User:              s.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   ssh.FixedHostKey(s.CurrentHostKey()),
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// run runs command over a new connection with x/crypto/ssh and returns
// its combined output.
func run(s *sshtest.SSHD, signer ssh.Signer, localIP, command string) (string, error) {
	c, err := dial(s, signer, localIP)
	if err != nil {
		return "", err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(command)
	return string(out), err
}

// configFor is an sshexec config for s with the given signer.
func configFor(s *sshtest.SSHD, signer ssh.Signer) *sshexec.Config {
	return &sshexec.Config{
		Addr:     s.Addr,
		User:     s.User,
		Signers:  []ssh.Signer{signer},
		HostKeys: sshexec.HostKeys{Pinned: []ssh.PublicKey{s.CurrentHostKey()}},
		Timeout:  30 * time.Second,
	}
}

// uniq returns a name unique within the test run.
func uniq(t *testing.T, prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}
