package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/deploy/proctree"
	"github.com/airlockgw/airlock/deploy/testkit"
	"golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian's openssh-server puts sshd. sshd must be started
// with an absolute path: it re-executes itself for every connection.
const SSHDPath = "/usr/sbin/sshd"

// DefaultTestUser is the dedicated login account tests use when they run as
// root: its shell is /bin/sh, so commands do not pay for root's ~/.bashrc.
const DefaultTestUser = "airlock-test"

// Need stops tb when sshd is not installed: it fails under CI=true (where
// `make test` should have installed it) and skips elsewhere.
func Need(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(SSHDPath); err == nil {
		return
	}
	msg := "sshd not found at " + SSHDPath + "; run `make test-deps` (or apt-get install openssh-server)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// TestUser returns the account tests log in as: $AIRLOCK_TEST_USER if set,
// else DefaultTestUser when running as root (created with /bin/sh as its
// shell if missing), else the current user (sshd not running as root can
// only log in as the user running it).
func TestUser() (string, error) {
	if u := os.Getenv("AIRLOCK_TEST_USER"); u != "" && os.Geteuid() == 0 {
		return u, nil
	}
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return "", err
		}
		return u.Username, nil
	}
	testUserOnce.Do(func() { testUserErr = ensureTestUser(DefaultTestUser) })
	if testUserErr != nil {
		return "", testUserErr
	}
	return DefaultTestUser, nil
}

var (
	testUserOnce sync.Once
	testUserErr  error
)

// ensureTestUser creates the account if it is missing, with /bin/sh as its
// shell, and makes sure it is not locked: useradd leaves the password field
// "!", and sshd without PAM refuses locked accounts even for keys. "*"
// allows no password login yet does not lock.
func ensureTestUser(name string) error {
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", name).CombinedOutput()
		if err != nil {
			// Another test process may have created it meanwhile.
			if _, lerr := user.Lookup(name); lerr != nil {
				return fmt.Errorf("sshtest: useradd %s: %v: %s", name, err, out)
			}
		}
	}
	if out, err := exec.Command("usermod", "-p", "*", name).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: usermod -p '*' %s: %v: %s", name, err, out)
	}
	return nil
}

// SSHD is a real OpenSSH sshd on loopback. The harness listens on a port
// the kernel chose and starts `sshd -i` for every connection it accepts
// (sshd's inetd mode: no port is handed to sshd, so none can be taken
// from it); with Options.MaxStartups it runs one listening `sshd -D`
// instead. Either way the processes share one log, Log.
type SSHD struct {
	// Addr is "127.0.0.1:PORT" (Options.Host in place of 127.0.0.1 when
	// set).
	Addr string
	// User is the account to log in as.
	User string
	// Dir holds the server's files: sshd_config, host keys,
	// authorized_keys, the client key.
	Dir string
	// HostKey is the server's ed25519 host key.
	HostKey ssh.PublicKey
	// ClientSigner is an ed25519 key listed in authorized_keys;
	// ClientKeyFile is its private key in OpenSSH form.
	ClientSigner  ssh.Signer
	ClientKeyFile string
	// ExtraHostKeys holds the additional host keys of
	// Options.ExtraHostKeys, by the type given there.
	ExtraHostKeys map[string]ssh.PublicKey
	// HostCA is the CA that signed the host certificate, when
	// Options.HostCertPrincipals is set.
	HostCA ssh.PublicKey

	opts    Options
	cfgFile string
	// logFile is sshd's stderr. A file, not a pipe: session processes
	// inherit it, and a pipe would keep cmd.Wait waiting for them.
	logFile *os.File
	wg      sync.WaitGroup

	mu sync.Mutex
	// The inetd mode's listener and the `sshd -i` running for each
	// connection.
	ln       net.Listener
	sessions map[*exec.Cmd]struct{}
	closed   bool
	// The daemon mode's `sshd -D`, and the port it binds.
	cmd  *exec.Cmd
	done chan struct{}
	port int
}

// Options adjust an SSHD.
type Options struct {
	// Config lines are appended to the generated sshd_config. sshd takes
	// the first value of most keywords, so they cannot change one the
	// harness sets; the fields below do that.
	Config []string
	// StrictModes turns sshd's StrictModes on (the harness's files live
	// in a temporary directory, which it would refuse: name
	// AuthorizedKeysFiles elsewhere).
	StrictModes bool
	// AuthorizedKeysFiles, when set, are the AuthorizedKeysFile paths
	// instead of the harness's own file.
	AuthorizedKeysFiles []string
	// MaxStartups, for tests of a target that drops connections that
	// have not logged in yet, is sshd's limit on them. Only a listening
	// sshd has one: with it set, the harness runs `sshd -D` on a port
	// it picks (another when sshd says it is taken) instead of `sshd -i`
	// per connection.
	MaxStartups string
	// Host is the address to listen on; "" is 127.0.0.1. (A test that
	// calls StartSSHD in another network namespace names an address of
	// that namespace.)
	Host string
	// ExtraHostKeys are key types ("rsa", "ecdsa") for additional host
	// keys, offered after the ed25519 one; see SSHD.ExtraHostKeys.
	ExtraHostKeys []string
	// HostCertPrincipals, when set, makes a host CA, signs the ed25519
	// host key as a host certificate for these principals and serves it
	// (HostCertificate); see SSHD.HostCA.
	HostCertPrincipals []string
	// NetNS, when set, runs sshd in that network namespace: it listens
	// on the namespace's loopback, out of the test's reach but through
	// NetNS.Expose or another server in the namespace.
	NetNS *NetNS
	// User, when set, is the account to log in as instead of TestUser's:
	// an account the test made for itself (the harness only logs in as
	// it; sshd not running as root can log in as no one else).
	User string
}

// StartSSHD starts an sshd and waits until it accepts connections.
func StartSSHD(opts Options) (*SSHD, error) {
	if _, err := os.Stat(SSHDPath); err != nil {
		return nil, fmt.Errorf("sshtest: %s: %w", SSHDPath, err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: privilege separation directory: %w", err)
		}
	}
	u := opts.User
	if u == "" {
		var err error
		if u, err = TestUser(); err != nil {
			return nil, err
		}
	}
	// Not t.TempDir: sshd reads authorized_keys as the login user, who
	// must be able to reach it.
	dir, err := safeTempDir("airlock-sshd-")
	if err != nil {
		return nil, err
	}
	s := &SSHD{User: u, Dir: dir, opts: opts, sessions: map[*exec.Cmd]struct{}{}}
	if err := s.setup(); err != nil {
		if s.logFile != nil {
			s.logFile.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	if opts.MaxStartups != "" {
		_, err = testkit.OnPort(s.startDaemon)
	} else {
		err = s.listen()
	}
	if err != nil {
		s.logFile.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// safeBase is where the harness makes its directories: a path sshd's
// StrictModes accepts (the system's temporary directory, world-writable,
// is refused), that the login user can reach: /var/lib/airlock-sshtest
// for root, the user's cache directory otherwise.
func safeBase() (string, error) {
	base := "/var/lib/airlock-sshtest"
	if os.Geteuid() != 0 {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(c, "airlock-sshtest")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	return base, os.Chmod(base, 0o755)
}

// safeTempDir makes a new directory (mode 0755) under safeBase.
func safeTempDir(prefix string) (string, error) {
	base, err := safeBase()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// WritableDir is a new, empty directory under SafeDir that the sshd's
// login user (another account) may write: for files a test moves there.
func WritableDir(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(SafeDir(tb), "files")
	if err := os.Mkdir(dir, 0o777); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// SafeDir is a new directory, removed when the test ends, where sshd's
// StrictModes accepts an authorized_keys file (and so where airlock's
// deploy install does): not under the world-writable temporary directory.
func SafeDir(tb testing.TB) string {
	tb.Helper()
	dir, err := safeTempDir("airlock-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// NewSSHD starts an sshd for one test and stops it when the test ends; when
// the test failed, sshd's log is printed.
func NewSSHD(tb testing.TB, opts Options) *SSHD {
	tb.Helper()
	Need(tb)
	s, err := StartSSHD(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	s.LogOnFailure(tb)
	return s
}

// LogOnFailure prints sshd's log at the end of tb if tb failed.
func (s *SSHD) LogOnFailure(tb testing.TB) {
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("sshd log (%s):\n%s", s.Addr, s.Log())
		}
	})
}

func (s *SSHD) setup() error {
	if err := s.newHostKey(); err != nil {
		return err
	}
	s.ExtraHostKeys = map[string]ssh.PublicKey{}
	for _, typ := range s.opts.ExtraHostKeys {
		k, err := GenerateKeyFile(filepath.Join(s.Dir, "host_"+typ), typ, "")
		if err != nil {
			return err
		}
		s.ExtraHostKeys[typ] = k
	}
	if len(s.opts.HostCertPrincipals) > 0 {
		ca := filepath.Join(s.Dir, "host_ca")
		k, err := GenerateKeyFile(ca, "ed25519", "")
		if err != nil {
			return err
		}
		s.HostCA = k
		out, err := exec.Command("ssh-keygen", "-q", "-s", ca, "-h", "-I", "airlock-test-host",
			"-n", strings.Join(s.opts.HostCertPrincipals, ","), "-V", "-5m:+1h",
			filepath.Join(s.Dir, "host_ed25519.pub")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sshtest: sign host key: %v: %s", err, out)
		}
	}
	s.ClientKeyFile = filepath.Join(s.Dir, "client_ed25519")
	if _, err := GenerateKeyFile(s.ClientKeyFile, "ed25519", ""); err != nil {
		return err
	}
	pemBytes, err := os.ReadFile(s.ClientKeyFile)
	if err != nil {
		return err
	}
	if s.ClientSigner, err = ssh.ParsePrivateKey(pemBytes); err != nil {
		return err
	}
	if s.logFile, err = os.OpenFile(filepath.Join(s.Dir, "sshd.log"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600); err != nil {
		return err
	}
	return s.Authorize(string(ssh.MarshalAuthorizedKey(s.ClientSigner.PublicKey())))
}

// newHostKey makes a new ed25519 host key and puts it in place by
// renaming, so that an sshd starting meanwhile reads the old key or the
// new one, never a missing or half-written file.
func (s *SSHD) newHostKey() error {
	file := filepath.Join(s.Dir, "host_ed25519")
	k, err := GenerateKeyFile(file+".new", "ed25519", "")
	if err != nil {
		return err
	}
	if err := os.Rename(file+".new.pub", file+".pub"); err != nil {
		return err
	}
	if err := os.Rename(file+".new", file); err != nil {
		return err
	}
	s.mu.Lock()
	s.HostKey = k
	s.mu.Unlock()
	return nil
}

// GenerateKeyFile runs ssh-keygen to write a new private key of the given
// type ("ed25519", "ecdsa", "rsa") to file (and file.pub), encrypted when
// passphrase is not empty, and returns its public key.
func GenerateKeyFile(file, typ, passphrase string) (ssh.PublicKey, error) {
	os.Remove(file)
	os.Remove(file + ".pub")
	out, err := exec.Command("ssh-keygen", "-q", "-t", typ, "-N", passphrase, "-C", "airlock-test", "-f", file).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("sshtest: ssh-keygen -t %s: %v: %s", typ, err, out)
	}
	pub, err := os.ReadFile(file + ".pub")
	if err != nil {
		return nil, err
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	return k, err
}

// Authorize appends an authorized_keys line (a newline is added if
// missing).
func (s *SSHD) Authorize(line string) error {
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// AuthorizedKeysFile is the path of the server's authorized_keys file.
func (s *SSHD) AuthorizedKeysFile() string { return filepath.Join(s.Dir, "authorized_keys") }

// CurrentHostKey returns the host key the server presents now.
func (s *SSHD) CurrentHostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.HostKey
}

// KnownHostsLine returns a known_hosts line for the current host key,
// "[127.0.0.1]:PORT ssh-ed25519 AAAA…".
func (s *SSHD) KnownHostsLine() string {
	return KnownHostsLine(s.Addr, s.CurrentHostKey())
}

// KnownHostsLine formats a known_hosts line for addr ("host:port").
func KnownHostsLine(addr string, key ssh.PublicKey) string {
	host, port, _ := net.SplitHostPort(addr)
	name := host
	if port != "22" {
		name = "[" + host + "]:" + port
	}
	return name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// Log returns everything sshd has logged so far.
func (s *SSHD) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
	return string(b)
}

// Accepted counts "Accepted publickey for USER" lines in the log: one per
// authenticated connection.
func (s *SSHD) Accepted() int {
	return strings.Count(s.Log(), "Accepted publickey for "+s.User+" ")
}

// Descendants returns the pids of every descendant of pid, read from
// /proc.
func Descendants(pid int) []int {
	table, _ := proctree.Table()
	var out []int
	for _, p := range proctree.Descendants(table, pid) {
		out = append(out, p.PID)
	}
	return out
}

// ProcessAlive reports whether a process with this pid exists (and is not
// a zombie).
func ProcessAlive(pid int) bool { return proctree.Alive(pid) }

// NewKey returns a fresh ed25519 signer, for keys a server does not know.
func NewKey() ssh.Signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		panic(err)
	}
	return s
}
