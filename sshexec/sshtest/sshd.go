package sshtest

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/proctree"
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

// SSHD is a real OpenSSH sshd listening on 127.0.0.1 at a free port.
type SSHD struct {
	// Addr is "127.0.0.1:PORT".
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

	opts Options
	mu   sync.Mutex
	cmd  *exec.Cmd
	// logFile is sshd's stderr. A file, not a pipe: session processes
	// inherit it, and a pipe would keep cmd.Wait waiting for them.
	logFile *os.File
	done    chan struct{}
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
	// MaxStartups replaces the harness's generous limit on unauthenticated
	// connections ("200:30:400"), for tests of a target that drops them.
	MaxStartups string
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
	u, err := TestUser()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: sshd reads authorized_keys as the login user, who
	// must be able to reach it.
	dir, err := safeTempDir("airlock-sshd-")
	if err != nil {
		return nil, err
	}
	s := &SSHD{User: u, Dir: dir, opts: opts}
	if err := s.setup(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port can be taken between probe and bind
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
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
	return s.Authorize(string(ssh.MarshalAuthorizedKey(s.ClientSigner.PublicKey())))
}

func (s *SSHD) newHostKey() error {
	k, err := GenerateKeyFile(filepath.Join(s.Dir, "host_ed25519"), "ed25519", "")
	if err != nil {
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *SSHD) start() error {
	port := 0
	if s.Addr != "" {
		_, p, _ := net.SplitHostPort(s.Addr)
		port, _ = strconv.Atoi(p)
	} else {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	keysFiles, strict := s.AuthorizedKeysFile(), "no"
	if len(s.opts.AuthorizedKeysFiles) > 0 {
		keysFiles = strings.Join(s.opts.AuthorizedKeysFiles, " ")
	}
	if s.opts.StrictModes {
		strict = "yes"
	}
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PrintMotd no
PrintLastLog no
LogLevel VERBOSE
MaxStartups %s
MaxSessions 10
Subsystem sftp internal-sftp
`, port, filepath.Join(s.Dir, "host_ed25519"), filepath.Join(s.Dir, "sshd.pid"), keysFiles, strict, cmp.Or(s.opts.MaxStartups, "200:30:400"))
	if len(s.opts.HostCertPrincipals) > 0 {
		cfg += "HostCertificate " + filepath.Join(s.Dir, "host_ed25519-cert.pub") + "\n"
	}
	for _, typ := range s.opts.ExtraHostKeys {
		cfg += "HostKey " + filepath.Join(s.Dir, "host_"+typ) + "\n"
	}
	cfg += strings.Join(s.opts.Config, "\n") + "\n"
	cfgFile := filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(SSHDPath, "-t", "-f", cfgFile).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: sshd -t: %v: %s", err, out)
	}
	if s.logFile == nil {
		f, err := os.OpenFile(filepath.Join(s.Dir, "sshd.log"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		s.logFile = f
	}
	logStart := len(s.Log())
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", cfgFile)
	if s.opts.NetNS != nil {
		cmd = exec.Command("nsenter", "--net="+s.opts.NetNS.Path, SSHDPath, "-D", "-e", "-f", cfgFile)
	}
	cmd.Stderr = s.logFile
	cmd.Stdout = s.logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshtest: start sshd: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("sshtest: sshd exited at start: %s", s.Log())
		default:
		}
		if strings.Contains(s.Log()[logStart:], fmt.Sprintf("Server listening on 127.0.0.1 port %d", port)) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("sshtest: sshd did not start listening: %s", s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.done, s.Addr = cmd, done, addr
	s.mu.Unlock()
	return nil
}

// Pid is the listening sshd's process id.
func (s *SSHD) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// stop ends the listening sshd (SIGTERM, then SIGKILL after 5 s). sshd's
// per-connection children carry on until their connections end.
func (s *SSHD) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// RotateHostKey gives the server a new host key and restarts it on the same
// address.
func (s *SSHD) RotateHostKey() error {
	s.stop()
	if err := s.newHostKey(); err != nil {
		return err
	}
	return s.start()
}

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

// Close stops sshd and every session process it started, and removes its
// files.
func (s *SSHD) Close() error {
	pid := 0
	s.mu.Lock()
	if s.cmd != nil {
		pid = s.cmd.Process.Pid
	}
	s.mu.Unlock()
	var kids []int
	if pid != 0 {
		kids = Descendants(pid)
	}
	s.stop()
	for _, k := range kids {
		syscall.Kill(k, syscall.SIGKILL)
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
	return os.RemoveAll(s.Dir)
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

// WaitLog waits up to timeout for substr to appear in the log.
func (s *SSHD) WaitLog(substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(s.Log(), substr) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// SessionProcesses returns the pids of sshd's per-connection processes
// (every descendant of the listener whose command is sshd).
func (s *SSHD) SessionProcesses() []int {
	var out []int
	table, _ := proctree.Table()
	for _, p := range proctree.Descendants(table, s.Pid()) {
		if p.Comm == "sshd" {
			out = append(out, p.PID)
		}
	}
	return out
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
