package oracle

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// maxAccounts is how many oracle accounts exist: lines run on that many
// at once, each in its own home with its own sshd login.
const maxAccounts = 4

// accountPrefix names the accounts: airlock-oracle0, airlock-oracle1…
const accountPrefix = "airlock-oracle"

// lineTimeout bounds one line of TestOracle, from the start of its
// session to its end: a line that would run on (tail -f) is killed then.
const lineTimeout = 10 * time.Second

// account is one unprivileged login the corpus runs as. Its home is the
// scratch tree, made the fixture again before every line.
type account struct {
	name     string
	uid, gid int
	home     string
	// markers is a directory outside the home, owned by the account,
	// that the payload program also marks.
	markers string
	sshd    *sshtest.SSHD
	// timeout bounds each line.
	timeout time.Duration
	// conn is the connection lines run on; nil until the first line and
	// after one ended it.
	conn *conn
	// lock holds the account for this process (flock): the test and
	// each fuzzing worker take accounts no one else holds.
	lock *os.File
}

// needRoot stops tb unless the oracle can run: as root (it makes the
// accounts and resets their homes), with sshd. Like sshtest.Need, it
// fails under CI=true and skips elsewhere.
func needRoot(tb testing.TB) {
	tb.Helper()
	sshtest.Need(tb)
	if os.Geteuid() == 0 {
		return
	}
	msg := "the effect oracle runs as root: it makes the accounts " + accountPrefix + "0…" +
		strconv.Itoa(maxAccounts-1) + " and resets their homes (run `sudo go test ./gateway/classify/oracle/`)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// ensureAccount creates the account if it is missing, with /bin/bash as
// its shell (the classifier reads lines as bash does) and its own home,
// and makes sure it is not locked (sshd without PAM refuses a locked
// account even for keys; "*" allows no password yet does not lock).
func ensureAccount(name string) (*account, error) {
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/bash", name).CombinedOutput()
		if err != nil {
			// Another test process may have created it meanwhile.
			if _, lerr := user.Lookup(name); lerr != nil {
				return nil, fmt.Errorf("oracle: useradd %s: %v: %s", name, err, out)
			}
		}
	}
	if out, err := exec.Command("usermod", "-p", "*", "-s", "/bin/bash", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("oracle: usermod %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	a := &account{name: name, home: filepath.Clean(u.HomeDir), timeout: lineTimeout,
		markers: filepath.Join(os.TempDir(), name+"-markers")}
	if a.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, err
	}
	if a.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, err
	}
	if err := a.checkHome(); err != nil {
		return nil, err
	}
	return a, nil
}

// checkHome refuses to use a home the oracle must not empty: one that is
// not a directory of the account's own, or is the root or a system
// directory.
func (a *account) checkHome() error {
	fi, err := os.Lstat(a.home)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(a.home, 0o755); err != nil {
			return err
		}
		if err := os.Chown(a.home, a.uid, a.gid); err != nil {
			return err
		}
		fi, err = os.Lstat(a.home)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != a.uid || strings.Count(a.home, "/") < 2 || !strings.Contains(a.home, accountPrefix) {
		return fmt.Errorf("oracle: %s's home %s is not a directory of its own the oracle may empty", a.name, a.home)
	}
	return nil
}

// takeAccounts holds up to n free oracle accounts for tb, each with a
// running sshd that logs in as it; at least one, waiting (up to
// Patience) while other processes hold them all.
func takeAccounts(tb testing.TB, n int) []*account {
	tb.Helper()
	got, err := acquire(n)
	tb.Cleanup(func() {
		for _, a := range got {
			a.release()
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

// acquire takes up to n free oracle accounts, at least one, waiting up
// to Patience while other processes hold them all.
func acquire(n int) ([]*account, error) {
	var got []*account
	err := testkit.PollErr(testkit.Patience, func() error {
		for i := 0; i < maxAccounts && len(got) < n; i++ {
			a, err := tryAccount(accountPrefix + strconv.Itoa(i))
			if err != nil {
				return testkit.Stop(err)
			}
			if a != nil {
				got = append(got, a)
			}
		}
		if len(got) == 0 {
			return errAllHeld
		}
		return nil
	})
	return got, err
}

// errAllHeld says every oracle account is held by another process.
var errAllHeld = errors.New("oracle: every account is held by another process")

// tryAccount takes the named account if no other holder has it; nil
// when one does.
func tryAccount(name string) (*account, error) {
	lock, err := os.OpenFile(filepath.Join("/run/lock", name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	a, err := ensureAccount(name)
	if err == nil {
		a.lock = lock
		err = a.start()
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	return a, nil
}

// start gives the account its own sshd.
func (a *account) start() error {
	s, err := sshtest.StartSSHD(sshtest.Options{User: a.name})
	if err != nil {
		return err
	}
	a.sshd = s
	return nil
}

// release stops the account's processes and sshd, leaves its home empty
// and lets other processes take it.
func (a *account) release() {
	if a.conn != nil {
		a.conn.client.Close()
		a.conn = nil
	}
	if a.sshd != nil {
		a.sshd.Close()
	}
	a.killAll()
	a.clear()
	a.lock.Close()
}

// expand puts the account's home in place of @HOME@ in a corpus line:
// lines name the payload program by its absolute path.
func (a *account) expand(line string) string {
	return strings.ReplaceAll(line, homeMark, a.home)
}

// homeMark stands for the account's home in corpus lines.
const homeMark = "@HOME@"
