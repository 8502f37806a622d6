// Package pgtest runs throwaway PostgreSQL clusters for tests: initdb and
// pg_ctl from the distribution's packages (.ci/test-deps installs them), in
// a temporary directory, listening on loopback TCP and on a Unix socket in
// that directory, and stopped when the test ends. Nothing assumes a server
// that is already running.
//
// PostgreSQL refuses to run as root: as root, the cluster runs as the test
// account ($AIRLOCK_TEST_USER, else airlock-test, which .ci/test-deps
// creates), which then owns the directory.
package pgtest

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// Version is the PostgreSQL major version the clusters run ("" when
// none is installed).
func Version() string {
	if b := Bin(); b != "" {
		return filepath.Base(filepath.Dir(b))
	}
	return ""
}

// InstallCommand is what installs the server when it is missing.
const InstallCommand = "apt-get install -y postgresql (or run .ci/test-deps as root)"

// A Cluster is one running PostgreSQL server.
type Cluster struct {
	// Dir holds the data directory (data/) and the socket; Host and Port
	// are its loopback TCP address; User is the superuser's name, who
	// connects without a password from this host.
	Dir  string
	Host string
	Port int
	User string

	bin  string
	cred *syscall.Credential
	log  string
}

// Bin returns the directory of initdb and pg_ctl: the newest
// /usr/lib/postgresql/N/bin, else where PATH finds initdb; "" when there is
// none.
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real)
		}
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises and starts a cluster for t, stopped when t ends. Under
// CI=true a missing server fails the test; elsewhere it skips it.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := start(t.TempDir())
	if errors.Is(err, errNoServer) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v; install it with: %s", err, InstallCommand)
		}
		t.Skipf("pgtest: %v; install it with: %s", err, InstallCommand)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("pgtest: stopping: %v", err)
		}
	})
	return c
}

var errNoServer = errors.New("no PostgreSQL server (initdb, pg_ctl) on this machine")

func start(tmp string) (*Cluster, error) {
	bin := Bin()
	if bin == "" {
		return nil, errNoServer
	}
	c := &Cluster{Dir: filepath.Join(tmp, "pg"), Host: "127.0.0.1", bin: bin}
	if err := os.Mkdir(c.Dir, 0o700); err != nil {
		return nil, err
	}
	me, err := user.Current()
	if err != nil {
		return nil, err
	}
	c.User = me.Username
	if os.Geteuid() == 0 {
		u, err := user.Lookup(cmp.Or(os.Getenv("AIRLOCK_TEST_USER"), "airlock-test"))
		if err != nil {
			return nil, fmt.Errorf("pgtest: PostgreSQL does not run as root, and the test account is missing (run .ci/test-deps as root): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred, c.User = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, u.Username
		// The account must reach its directory: the test's temporary
		// directories are root's, 0700; they may be passed through
		// (0711), not read.
		if err := os.Chown(c.Dir, uid, gid); err != nil {
			return nil, err
		}
		top := filepath.Clean(os.TempDir())
		for d := filepath.Dir(c.Dir); strings.HasPrefix(d, top+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(c.Dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", c.User, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, out)
	}
	// 127.0.0.2 too: a test can cut one client off by its address
	// (loopback holds all of 127/8 on Linux). The port is Start's.
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1,127.0.0.2'\nunix_socket_directories = '%s'\nfsync = on\nmax_connections = 200\n", c.Dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	f.WriteString(conf)
	f.Close()
	c.log = filepath.Join(c.Dir, "server.log")
	// PostgreSQL cannot report a port it chose: it is given one, binds
	// it itself, and says when it is taken.
	if _, err := testkit.OnPort(func(port int) error { c.Port = port; return c.Start() }); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts the server again after Stop (or for the first time) on
// c.Port. When the port is taken (on either loopback address) it fails
// with an error that wraps testkit.ErrPortInUse.
func (c *Cluster) Start() error {
	logStart := len(c.Log())
	out, err := c.run("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-l", c.log, "-o", "-p "+strconv.Itoa(c.Port), "-w", "-t", "60", "start")
	log := c.Log()[logStart:]
	if testkit.PortInUse(log) {
		// With one of its two addresses taken the server starts on the
		// other alone: not the server tests expect.
		if err == nil {
			c.Stop()
		}
		return fmt.Errorf("pgtest: port %d: %w: %s", c.Port, testkit.ErrPortInUse, log)
	}
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl start: %v: %s\n%s", err, out, c.Log())
	}
	return nil
}

// Stop stops the server (fast shutdown: open connections are cut).
func (c *Cluster) Stop() error {
	if out, err := c.run("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		if strings.Contains(string(out), "Is server running?") {
			return nil
		}
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Log is the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// DSN is a connection URL for database db over loopback TCP.
func (c *Cluster) DSN(db string) string {
	return c.DSNVia(c.Host, db)
}

// AltHost is the server's second loopback address.
const AltHost = "127.0.0.2"

// DSNVia is DSN through host, one of the server's loopback addresses
// (Host or AltHost): a test cuts off the clients of one.
func (c *Cluster) DSNVia(host, db string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", c.User, net.JoinHostPort(host, strconv.Itoa(c.Port)), db)
}

// CreateDatabase creates a database and returns its DSN.
func (c *Cluster) CreateDatabase(name string) (string, error) {
	if out, err := c.run("createdb", "-h", c.Dir, "-p", strconv.Itoa(c.Port), "-U", c.User, name); err != nil {
		return "", fmt.Errorf("pgtest: createdb %s: %v: %s", name, err, out)
	}
	return c.DSN(name), nil
}

// AddPasswordRole creates a login role that must give password over
// TCP (SCRAM; everyone else is trusted) and owns a new database of its
// name, and returns that database's DSN, without the password.
func (c *Cluster) AddPasswordRole(role, password string) (string, error) {
	if strings.ContainsAny(role+password, "'\"\\\n") {
		return "", errors.New("pgtest: role and password must not need quoting")
	}
	sql := fmt.Sprintf("SET password_encryption = 'scram-sha-256'; CREATE ROLE %s LOGIN PASSWORD '%s';", role, password)
	if out, err := c.run("psql", "-h", c.Dir, "-p", strconv.Itoa(c.Port), "-U", c.User, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql); err != nil {
		return "", fmt.Errorf("pgtest: create role: %v: %s", err, out)
	}
	if out, err := c.run("createdb", "-h", c.Dir, "-p", strconv.Itoa(c.Port), "-U", c.User, "-O", role, role); err != nil {
		return "", fmt.Errorf("pgtest: createdb %s: %v: %s", role, err, out)
	}
	hba := filepath.Join(c.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(line), old...), 0o600); err != nil {
		return "", err
	}
	if out, err := c.run("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "reload"); err != nil {
		return "", fmt.Errorf("pgtest: reload: %v: %s", err, out)
	}
	// The server reloads on a signal: wait until it asks for the password.
	err = testkit.PollErr(testkit.Patience, func() error {
		out, err := c.run("psql", "-w", "-h", c.Host, "-p", strconv.Itoa(c.Port), "-U", role, "-d", role, "-c", "SELECT 1")
		if err != nil && strings.Contains(string(out), "password") {
			return nil
		}
		return fmt.Errorf("pgtest: the server does not ask %s for a password after reload: %s", role, out)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", role, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), role), nil
}

func (c *Cluster) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, tool), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
		return out, err
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		return out, fmt.Errorf("%s did not finish in 3 minutes", tool)
	}
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
	dir  string
	n    atomic.Int64
}

// Shared returns the package's one cluster, started on first use (tests
// create a database each: NewDatabase). Call StopShared from TestMain
// after m.Run. Under CI=true a missing server fails the test; elsewhere
// it skips it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "airlock-pg-")
		if shared.err == nil {
			shared.c, shared.err = start(shared.dir)
		}
	})
	if errors.Is(shared.err, errNoServer) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v; install it with: %s", shared.err, InstallCommand)
		}
		t.Skipf("pgtest: %v; install it with: %s", shared.err, InstallCommand)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// StopShared stops the shared cluster, if one was started, and removes
// its directory.
func StopShared() {
	if shared.c != nil {
		shared.c.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// NewDatabase creates a database of its own for t and returns its DSN.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	dsn, err := c.CreateDatabase(fmt.Sprintf("t%d_%d", os.Getpid(), shared.n.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}
