package forcedcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/deploy/policy"
)

// readOnlyPolicy has a verb that writes, one that reads, one that runs
// through sudo, and a transfer block.
const readOnlyPolicy = `
verb "touch" {
  argv = ["/usr/bin/touch", "--", "{file}"]
  param "file" { path_under = "DIR" }
  env  = ["` + breakSetattr + `"]
}
verb "cat" {
  argv = ["/bin/cat", "--", "{file}"]
  param "file" { path_under = "DIR" }
}
verb "as-nobody" {
  argv   = ["/bin/echo", "hello"]
  run_as = "nobody"
}
transfer {
  get_under = ["DIR"]
}
`

// TestServeReadOnly: a request marked read-only runs its verb with every
// mount read-only: a write fails with EROFS and leaves nothing, a read
// works; unmarked, the same request writes. A verb that needs sudo, and
// a transfer, are refused when marked; a mark written anywhere but at
// the very start is no mark, and names no verb.
func TestServeReadOnly(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pf := writePolicy(t, dir, readOnlyPolicy)
	readable := filepath.Join(dir, "readable")
	if err := os.WriteFile(readable, []byte("content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marked := func(cmd string) []string { return []string{"SSH_ORIGINAL_COMMAND=" + policy.MarkReadOnly(cmd)} }

	written := filepath.Join(dir, "written")
	got, rec := serve(t, pf, marked("touch "+written))
	if got.Exit != 1 || !strings.Contains(got.Stderr, "Read-only file system") || rec.Decision != Allow || !rec.ReadOnly {
		t.Errorf("marked touch: %+v, %+v; want touch's exit 1 with EROFS", got, rec)
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Errorf("the marked touch wrote %s: %v", written, err)
	}
	if !strings.Contains(rec.String(), "decision=allow read_only=true verb=\"touch\"") {
		t.Errorf("log line %q does not say read_only", rec)
	}

	if got, rec := serve(t, pf, marked("cat "+readable)); got.Exit != 0 || got.Stdout != "content\n" || !rec.ReadOnly {
		t.Errorf("marked cat: %+v, %+v", got, rec)
	}

	if got, rec := serve(t, pf, []string{"SSH_ORIGINAL_COMMAND=touch " + written}); got.Exit != 0 || rec.ReadOnly {
		t.Errorf("unmarked touch: %+v, %+v", got, rec)
	}
	if _, err := os.Stat(written); err != nil {
		t.Errorf("the unmarked touch did not write: %v", err)
	}

	other := filepath.Join(dir, "other")
	for _, command := range []string{
		policy.MarkReadOnly("as-nobody"),
		policy.MarkReadOnly("get " + readable),
		" @read-only touch " + other,
		"'@read-only' touch " + other,
		"@read-only\ttouch " + other,
		policy.MarkReadOnly(policy.MarkReadOnly("touch " + other)),
	} {
		got, rec := serve(t, pf, []string{"SSH_ORIGINAL_COMMAND=" + command})
		if got.Exit != ExitRefused || got.Stdout != "" || rec.Decision != Refuse || !strings.HasPrefix(got.Stderr, "airlock-action: refused: ") {
			t.Errorf("%q: %+v, %+v; want refused", command, got, rec)
		}
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a misplaced mark ran the verb: %v", err)
	}
}

// TestServeReadOnlyFailsClosed: when the kernel refuses to make the
// mounts read-only (here mount_setattr, as before Linux 5.12), the marked
// request is refused, says why on one line, and nothing runs.
func TestServeReadOnlyFailsClosed(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pf := writePolicy(t, dir, readOnlyPolicy)
	written := filepath.Join(dir, "written")
	var stdout, stderr bytes.Buffer
	rec := &recorder{}
	code := Serve(context.Background(), Options{PolicyFile: pf, Stdout: &stdout, Stderr: &stderr, Log: rec, ownPolicy: true,
		Env: []string{"SSH_ORIGINAL_COMMAND=" + policy.MarkReadOnly("touch "+written), breakSetattr + "=1"}})
	r := rec.only(t)
	if code != ExitRefused || r.Decision != Refuse || !r.ReadOnly || !strings.Contains(r.Reason, "mount_setattr") {
		t.Errorf("exit %d, record %+v; want a refusal naming mount_setattr", code, r)
	}
	if stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "airlock-action: refused: read-only enforcement failed, so nothing ran: ") {
		t.Errorf("stdout %q, stderr %q; want one refusal line", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(written); !os.IsNotExist(err) {
		t.Errorf("the verb ran unconfined: %v", err)
	}
}

// TestAllReadOnly: the check after mount_setattr finds a writable mount.
func TestAllReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ro := "22 1 8:1 / / ro,relatime shared:1 - ext4 /dev/sda1 rw\n"
	rw := "23 22 0:5 / /tmp rw,nosuid - tmpfs tmpfs rw\n"
	for _, tt := range []struct {
		name, text string
		ok         bool
	}{
		{"every mount read-only", ro, true},
		{"one writable", ro + rw, false},
		{"none", "", false},
		{"garbage", "22 1\n", false},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
		os.WriteFile(f, []byte(tt.text), 0o644)
		if err := allReadOnly(f); (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestExplainReadOnly: --explain says a marked request runs read-only,
// and refuses what a mark cannot run.
func TestExplainReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol, err := policy.Load(writePolicy(t, dir, readOnlyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := Explain(pol, policy.MarkReadOnly("cat "+filepath.Join(dir, "f")), &out); code != 0 || !strings.Contains(out.String(), "marked:  @read-only") {
		t.Errorf("marked cat: exit %d\n%s", code, out.String())
	}
	for _, command := range []string{policy.MarkReadOnly("as-nobody"), policy.MarkReadOnly("get " + filepath.Join(dir, "f"))} {
		out.Reset()
		if code := Explain(pol, command, &out); code != ExitRefused {
			t.Errorf("%q: exit %d\n%s", command, code, out.String())
		}
	}
}
