package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
	"github.com/airlockgw/airlock/gateway/api"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/gatewaytest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// needRoot fails under CI and skips elsewhere: the test acts as another
// local user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root (it acts as another local user); CI runs as root")
	}
	t.Skip("needs root: it acts as another local user")
}

// otherUser is a local account other than the test's: the dedicated test
// account, with the gateway's socket open to it through its group.
type otherUser struct {
	name     string
	uid, gid int
	group    string
}

func lookupOther(t *testing.T) otherUser {
	t.Helper()
	name, err := sshtest.TestUser()
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return otherUser{name: name, uid: uid, gid: gid, group: g.Name}
}

// publicDir is a directory every local user may enter, removed at the
// end; the files put in it are theirs to run.
func publicDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "airlock-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSelfApprovalThroughSu: a member of the socket group who is also a
// reviewer asks through `su` (a root process between her agent and
// anything above it). The run is hers — requester and anchor of her uid,
// never su's root — and she cannot approve it herself: 403, and nothing
// runs.
func TestSelfApprovalThroughSu(t *testing.T) {
	t.Parallel()
	needRoot(t)
	other := lookupOther(t)
	s := sharedSSHD(t)
	key, accepted := ownClientKey(t, s)
	pub := publicDir(t)
	sock := filepath.Join(pub, "run", "airlock.sock")
	sshBin := filepath.Join(pub, "airlock-ssh")
	copyExecutable(t, gatewaytest.Binary(t, "airlock-ssh"), sshBin)
	g := startGateway(t, s, gwOptions{clientKey: key, mutate: func(c *config.Config) {
		c.Listen.Socket, c.Listen.SocketGroup = sock, other.group
	}})
	const herPassword = "her own correct horse battery"
	addReviewer(t, g.cfg, other.name, herPassword)

	agent := exec.Command("su", other.name, "-c", fmt.Sprintf("AIRLOCK_SOCKET=%s %s box-run -- touch %s/ran", sock, sshBin, pub))
	out := &gatewaytest.LockedBuffer{}
	agent.Stdout, agent.Stderr = out, out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()

	g.waitPending(1)
	pending, err := g.reviewer.Approvals(context.Background(), "pending")
	if err != nil {
		t.Fatal(err)
	}
	q := pending[0]
	if q.Requester != other.name || q.Run == nil || q.Run.Anchor == nil || q.Run.Anchor.UID != other.uid {
		t.Errorf("the card says requester %q, anchor %+v; want %s (uid %d), never su's root", q.Requester, q.Run, other.name, other.uid)
	}

	// She tries to approve her own agent.
	login, err := api.NewHTTPClient(g.base, "").Login(context.Background(), other.name, herPassword)
	if err != nil {
		t.Fatal(err)
	}
	her := api.NewHTTPClient(g.base, login.Token)
	_, err = her.Decide(context.Background(), q.ID, api.DecisionRequest{Decision: api.DecisionApprove, Digest: q.Digest})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("self-approval through su: %v, want 403", err)
	}

	// Another reviewer denies it; nothing ran.
	if _, err := g.reviewer.Decide(context.Background(), q.ID, api.DecisionRequest{Decision: api.DecisionDeny, Digest: q.Digest}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(testkit.Patience):
		agent.Process.Kill()
		t.Fatal("the agent did not end after the denial")
	}
	if _, err := os.Stat(filepath.Join(pub, "ran")); err == nil {
		t.Error("the command ran")
	}
	if n := accepted(); n != 0 {
		t.Errorf("sshd accepted %d logins for a self-approved attempt", n)
	}
	t.Logf("the agent said: %s", out.String())
}

// The documented non-root layout: the socket where it is by default,
// under the state directory, and socket_group naming another user's
// group. That user reaches the gateway (the state directory lets the
// group pass, 0710, never list); without socket_group it is told which
// directory stops it, and that it is not in its group.
func TestSocketGroupWithTheDefaultLayout(t *testing.T) {
	t.Parallel()
	needRoot(t)
	other := lookupOther(t)
	s := sharedSSHD(t)
	pub := publicDir(t)
	sshBin := filepath.Join(pub, "airlock-ssh")
	copyExecutable(t, gatewaytest.Binary(t, "airlock-ssh"), sshBin)
	asOther := func(sock string) string {
		t.Helper()
		out, _ := exec.Command("su", other.name, "-c", fmt.Sprintf("AIRLOCK_SOCKET=%s %s --action act_doesnotexist", sock, sshBin)).CombinedOutput()
		return string(out)
	}

	for _, withGroup := range []bool{true, false} {
		state := filepath.Join(pub, fmt.Sprintf("state-%v", withGroup))
		g := startGateway(t, s, gwOptions{mutate: func(c *config.Config) {
			c.StateDir = state
			c.Listen.Socket = filepath.Join(state, "run", "airlock.sock")
			if withGroup {
				c.Listen.SocketGroup = other.group
			}
		}})
		fi, err := os.Stat(state)
		if err != nil {
			t.Fatal(err)
		}
		out := asOther(g.cfg.Listen.Socket)
		if withGroup {
			if fi.Mode().Perm() != 0o710 {
				t.Errorf("the state directory is %04o, want 0710", fi.Mode().Perm())
			}
			if !strings.Contains(out, "act_doesnotexist") || strings.Contains(out, "control file") {
				t.Errorf("a member of socket_group through the default layout: %s", out)
			}
		} else {
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("the state directory without socket_group is %04o, want 0700", fi.Mode().Perm())
			}
			if !strings.Contains(out, "may not pass through "+state) || !strings.Contains(out, "not a member") || !strings.Contains(out, "socket_group") {
				t.Errorf("another user without socket_group is not told what stops it: %s", out)
			}
		}
		g.stop()
	}
}
