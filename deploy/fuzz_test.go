package deploy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
)

// optDequote is sshd's opt_dequote (misc.c), ported: the value runs to the
// next unescaped double quote, and a backslash escapes only a double quote.
func optDequote(s string) (value, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	s = s[1:]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			return b.String(), s[i+1:], true
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '"':
			i++
		}
		b.WriteByte(s[i])
	}
	return "", "", false
}

// FuzzQuoteOption checks that every command quoteOption accepts is read
// back by sshd's dequoting exactly, as one line.
func FuzzQuoteOption(f *testing.F) {
	for _, s := range []string{"", "a", `a"b`, `a\b`, `a\"b`, `\\"`, `x\`, "a\nb", `"`, `\`, "日本", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		q, err := quoteOption(command)
		if err != nil {
			return
		}
		if strings.ContainsAny(q, "\n\r\x00") {
			t.Fatalf("quoted %q holds a line break or NUL", q)
		}
		got, rest, ok := optDequote(q)
		if !ok || rest != "" || got != command {
			t.Fatalf("sshd would read %q (rest %q, ok %v) from %s, want %q", got, rest, ok, q, command)
		}
	})
}

// FuzzEdit checks the installer's promise on any file content: lines that
// do not carry our comment come out byte for byte and in order, and
// exactly one line carries it after an install (none after a removal).
func FuzzEdit(f *testing.F) {
	f.Add([]byte(others), false)
	f.Add([]byte(others+line(f, 1, "box", "deploy")+"\n"), false)
	f.Add([]byte(line(f, 1, "box", "deploy")+"\r\n# x\n"+line(f, 2, "box", "deploy")), true)
	f.Add([]byte("no newline at the end"), false)
	f.Add([]byte("\n\n\n"), true)
	comment := "airlock:box/deploy"
	newLine := line(f, 3, "box", "deploy")
	f.Fuzz(func(t *testing.T, old []byte, remove bool) {
		want := newLine
		if remove {
			want = ""
		}
		out, change := edit(old, comment, want)
		if change == Unchanged && !bytes.Equal(out, old) {
			t.Fatal("unchanged but different")
		}
		keep := func(b []byte) (kept [][]byte, ours int) {
			lines := bytes.Split(b, []byte("\n"))
			if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
			for _, l := range lines {
				if carries(l, comment) {
					ours++
				} else {
					kept = append(kept, l)
				}
			}
			return kept, ours
		}
		before, _ := keep(old)
		after, ours := keep(out)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Fatalf("other lines changed (-want +got):\n%s", diff)
		}
		if wantOurs := map[bool]int{false: 1, true: 0}[remove]; ours != wantOurs {
			t.Fatalf("%d lines carry the comment, want %d:\n%q", ours, wantOurs, out)
		}
	})
}

// FuzzAddHostKey checks the config edit on any input: when it adds the
// key, the result is the input with one contiguous insertion, parses, and
// lists the key for the target.
func FuzzAddHostKey(f *testing.F) {
	for _, s := range []string{
		"target \"box\" {\n  address = \"x:22\"\n}\n",
		"target \"box\" {\n  host_keys = [\n    \"a\", # c\n  ]\n}\n",
		"target \"box\" {\n  host_keys = [\"a\"]\n}\n",
		"target \"box\" {\n  host_keys = []\n}\n",
		"target \"box\" { address = \"x\" }\n",
		"target \"box\" {\n  host_keys = [\"a\",]\n}\n",
	} {
		f.Add(s)
	}
	key := fixedKey(f, 9)
	k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	f.Fuzz(func(t *testing.T, src string) {
		out, change, err := addHostKey([]byte(src), "f.hcl", "box", key, k)
		if err != nil || change != Added {
			return
		}
		// One contiguous insertion.
		p := 0
		for p < len(src) && src[p] == out[p] {
			p++
		}
		if !strings.HasSuffix(string(out), src[p:]) {
			t.Fatalf("more than an insertion:\n%q\n->\n%q", src, out)
		}
		body, err := parseConfig(out, "f.hcl")
		if err != nil {
			return // AddHostKey refuses such a result and writes nothing
		}
		if b, err := targetBlock(body, "f.hcl", "box"); err == nil {
			if keys, err := hostKeys(b, "f.hcl"); err == nil && !containsKey(keys, key) {
				t.Fatalf("edit parsed but lacks the key:\n%s", out)
			}
		}
	})
}
