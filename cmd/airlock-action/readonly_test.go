package main

import (
	"bytes"
	"context"
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

	"golang.org/x/sys/unix"

	"github.com/airlockgw/airlock/deploy/policy"
	"github.com/airlockgw/airlock/sshexec"
)

// TestReadOnlyThroughSSHD: a request the gateway marks read-only, served
// by a real sshd to an account that is not root (so airlock-action makes
// a user namespace as well as a mount namespace): a verb that writes
// fails with EROFS and leaves nothing, one that reads runs, the program
// holds no capability and has no_new_privs, and the log line says
// read_only.
func TestReadOnlyThroughSSHD(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	file := filepath.Join(e.dir, "data", fmt.Sprintf("read-only-%d", time.Now().UnixNano()))
	res, err := sshexec.Run(context.Background(), e.config(e.key), policy.MarkReadOnly("touch "+file))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != sshexec.Exited || res.ExitCode != 1 || !bytes.Contains(res.Stderr, []byte("Read-only file system")) {
		t.Errorf("marked touch: %v exit %d, stderr %q; want touch's exit 1 with EROFS", res.Outcome, res.ExitCode, res.Stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the marked touch wrote %s: %v", file, err)
	}
	res, err = sshexec.Run(context.Background(), e.config(e.key), policy.MarkReadOnly("echo confined"))
	if err != nil || !res.Success() || string(res.Stdout) != "confined\n" {
		t.Errorf("marked echo: %v %+v", err, res)
	}
	// No capability, none to gain.
	res, err = sshexec.Run(context.Background(), e.config(e.key), policy.MarkReadOnly("privileges"))
	wantPrivileges := "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Success() || string(res.Stdout) != wantPrivileges {
		t.Errorf("marked privileges: %v, stdout %q, want %q", res.Outcome, res.Stdout, wantPrivileges)
	}
	want := `decision=allow read_only=true verb="touch" args=["` + file + `"] exit=1`
	if log := e.logText(t); !strings.Contains(log, want) {
		t.Errorf("no log line with %q:\n%s", want, log)
	}
}

// TestReadOnlyRefusedWithoutNamespaces: where the account may not make a
// user namespace (here a real limit: max_user_namespaces = 0 in the
// namespace airlock-action runs in), a marked request is refused with
// exit 126 and one line saying why, and nothing runs; the same request
// unmarked runs as before.
func TestReadOnlyRefusedWithoutNamespaces(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, err := user.Lookup(e.sshd.User)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	file := filepath.Join(e.dir, "data", fmt.Sprintf("no-namespaces-%d", time.Now().UnixNano()))
	serve := func(command string) (int, string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" --policy "$1"`, e.bin, e.policy)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "SSH_ORIGINAL_COMMAND=" + command}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// A user namespace of the account's own, in which it may set
		// the limit (CAP_SYS_RESOURCE there) but is no one else.
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
			AmbientCaps: []uintptr{unix.CAP_SYS_RESOURCE},
		}
		if os.Geteuid() != uid {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		}
		err := cmd.Run()
		if cmd.ProcessState == nil {
			t.Fatalf("run: %v", err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	code, stderr := serve(policy.MarkReadOnly("touch " + file))
	if code != 126 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "airlock-action: refused: read-only enforcement failed, so nothing ran: ") {
		t.Errorf("marked: exit %d, stderr %q; want 126 and one refusal line", code, stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the marked touch ran unconfined: %v", err)
	}
	if code, stderr := serve("touch " + file); code != 0 {
		t.Errorf("unmarked: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the unmarked touch did not run: %v", err)
	}
}
