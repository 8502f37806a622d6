package forcedcmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuiltInTransfers: put publishes exactly the announced bytes under
// put_under (a short, long or different payload leaves nothing), never
// replaces without overwrite; get writes a regular file to standard
// output and refuses links. Each is one log record.
func TestBuiltInTransfers(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "in"), 0o755)
	pf := writePolicy(t, dir, "transfer {\n  put_under = [\"DIR/in\"]\n  get_under = [\"DIR/in\"]\n  max_size = \"1KiB\"\n}\n")
	data := []byte("hello, target\n")
	sum := sha256.Sum256(data)
	serveIn := func(command string, stdin []byte) (int, string, string, *Record) {
		var out, errOut bytes.Buffer
		rec := &recorder{}
		code := Serve(context.Background(), Options{PolicyFile: pf, Env: []string{"SSH_ORIGINAL_COMMAND=" + command},
			Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errOut, Log: rec, ownPolicy: true})
		return code, out.String(), errOut.String(), rec.only(t)
	}
	dest := filepath.Join(dir, "in", "a.txt")
	putCmd := fmt.Sprintf("put %s 0640 %d %x", dest, len(data), sum)
	if code, _, errOut, rec := serveIn(putCmd, data); code != 0 || rec.Verb != "put" || rec.Decision != Allow {
		t.Fatalf("put: %d %s %+v", code, errOut, rec)
	}
	if b, _ := os.ReadFile(dest); !bytes.Equal(b, data) {
		t.Fatalf("the file: %q", b)
	}
	if st, _ := os.Stat(dest); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if code, _, errOut, _ := serveIn(putCmd, data); code != ExitRefused || !strings.Contains(errOut, "exists") {
		t.Errorf("a put over the file: %d %s", code, errOut)
	}
	other := filepath.Join(dir, "in", "b.txt")
	for name, sent := range map[string][]byte{
		"short":     data[:3],
		"long":      append(append([]byte(nil), data...), 'x'),
		"different": bytes.ToUpper(data),
	} {
		code, _, errOut, _ := serveIn(fmt.Sprintf("put %s 0640 %d %x", other, len(data), sum), sent)
		if code != ExitRefused || !strings.Contains(errOut, "nothing was published") {
			t.Errorf("%s payload: %d %s", name, code, errOut)
		}
		if _, err := os.Stat(other); err == nil {
			t.Errorf("%s payload was published", name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "in", ".airlock-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	if code, out, errOut, rec := serveIn("get "+dest, nil); code != 0 || out != string(data) || rec.Verb != "get" {
		t.Errorf("get: %d %q %s", code, out, errOut)
	}
	os.Symlink(dest, filepath.Join(dir, "in", "link"))
	if code, out, _, _ := serveIn("get "+filepath.Join(dir, "in", "link"), nil); code != ExitRefused || out != "" {
		t.Errorf("get through a link: %d %q", code, out)
	}
	if code, _, errOut, _ := serveIn("get /etc/passwd", nil); code != ExitRefused || !strings.Contains(errOut, "allowed under") {
		t.Errorf("get outside get_under: %d %s", code, errOut)
	}
}

// TestTransfersFollowNoLinkBeneathTheRoot: beneath put_under and
// get_under no link is followed, even one that stays inside (a link
// there may be swapped at any time): a put into, or a get through, a
// directory link is refused with a reason and writes nothing; a root that
// is itself a link (the operator's) is followed. With openat2 and with
// the walk it falls back to.
func TestTransfersFollowNoLinkBeneathTheRoot(t *testing.T) {
	for _, mode := range []string{"", "walk"} {
		t.Run("resolve="+mode, func(t *testing.T) {
			defer func(old string) { resolveWith = old }(resolveWith)
			resolveWith = mode
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			real := filepath.Join(dir, "real")
			os.MkdirAll(filepath.Join(real, "sub"), 0o755)
			os.WriteFile(filepath.Join(real, "sub", "a.txt"), []byte("a\n"), 0o644)
			os.Symlink("sub", filepath.Join(real, "inner"))
			os.Symlink(real, filepath.Join(dir, "root"))
			pf := writePolicy(t, dir, "transfer {\n  put_under = [\"DIR/root\"]\n  get_under = [\"DIR/root\"]\n}\n")
			serve := func(command string, stdin []byte) (int, string, string) {
				var out, errOut bytes.Buffer
				code := Serve(context.Background(), Options{PolicyFile: pf, Env: []string{"SSH_ORIGINAL_COMMAND=" + command},
					Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errOut, Log: &recorder{}, ownPolicy: true})
				return code, out.String(), errOut.String()
			}
			root := filepath.Join(dir, "root")
			if code, out, errOut := serve("get "+filepath.Join(root, "sub", "a.txt"), nil); code != 0 || out != "a\n" {
				t.Errorf("get beneath a root that is a link: %d %q %s", code, out, errOut)
			}
			if code, out, errOut := serve("get "+filepath.Join(root, "inner", "a.txt"), nil); code != ExitRefused || out != "" || !strings.Contains(errOut, "symbolic link") {
				t.Errorf("get through a link beneath the root: %d %q %s", code, out, errOut)
			}
			data := []byte("b\n")
			put := fmt.Sprintf("put %s 0644 %d %x", filepath.Join(root, "inner", "b.txt"), len(data), sha256.Sum256(data))
			if code, _, errOut := serve(put, data); code != ExitRefused || !strings.Contains(errOut, "symbolic link") {
				t.Errorf("put through a link beneath the root: %d %s", code, errOut)
			}
			if _, err := os.Lstat(filepath.Join(real, "sub", "b.txt")); err == nil {
				t.Error("the put through a link was written")
			}
		})
	}
}
