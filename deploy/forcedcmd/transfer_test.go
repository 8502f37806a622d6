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
