package classify

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpus reads testdata/corpus.txt: expected class and command line.
func corpus(t testing.TB) (cmds []string, want []Class) {
	t.Helper()
	f, err := os.Open("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cl, cmd, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("corpus.txt:%d: no tab", n)
		}
		c, err := ParseClass(cl)
		if err != nil {
			t.Fatalf("corpus.txt:%d: %v", n, err)
		}
		if strings.HasPrefix(cmd, `"`) {
			if cmd, err = strconv.Unquote(cmd); err != nil {
				t.Fatalf("corpus.txt:%d: %v", n, err)
			}
		}
		cmds, want = append(cmds, cmd), append(want, c)
	}
	return cmds, want
}

// TestCorpus classifies every command line of the corpus (real command
// lines and the tricks for slipping past a first-word check) and wants
// exactly its class.
func TestCorpus(t *testing.T) {
	cmds, want := corpus(t)
	if len(cmds) < 200 {
		t.Fatalf("the corpus has %d command lines, want at least 200", len(cmds))
	}
	for i, cmd := range cmds {
		r := Classify(cmd)
		if r.Class != want[i] {
			t.Errorf("%q: %s (%s), want %s", cmd, r.Class, r.Reason(), want[i])
		}
		if len(r.Parts) == 0 && r.Class > ReadOnly {
			t.Errorf("%q: %s without a part that decided it", cmd, r.Class)
		}
	}
}

// The class of a line is the highest of its parts: whatever is put before
// or after a command, around it or inside it, the line is never lower.
func TestNeverLowerThanAPart(t *testing.T) {
	cmds, want := corpus(t)
	wraps := []string{"%s", "ls; %s", "%s; ls", "true && %s", "false || %s", "echo $( %s)", "(%s)", "{ %s; }", "sh -c %q", "bash -c %q", "%s | cat", "cat | %s", "if true; then %s; fi", "nice %s", "timeout 5 %s", "env A=1 %s"}
	for i, cmd := range cmds {
		for _, w := range wraps {
			line := strings.Replace(w, "%s", cmd, 1)
			if strings.Contains(w, "%q") {
				line = strings.Replace(w, "%q", strconv.Quote(cmd), 1)
				if strings.ContainsAny(cmd, "$`\\\"\n") {
					continue // Go quoting is not shell quoting for these
				}
			}
			if got := Classify(line).Class; got < want[i] {
				t.Errorf("%q is %s, lower than its part %q (%s)", line, got, cmd, want[i])
			}
		}
	}
}

func TestReasonNamesThePart(t *testing.T) {
	r := Classify("ls -la && sudo rm -rf /srv/cache")
	if r.Class != Privileged || !strings.Contains(r.Reason(), `"sudo rm -rf /srv/cache"`) || !strings.Contains(r.Reason(), "sudo") {
		t.Errorf("%s: %s", r.Class, r.Reason())
	}
	r = Classify("echo x >> /etc/sudoers.d/deploy")
	if r.Class != Forbidden || len(r.Parts) != 1 || r.Parts[0].Text != ">> /etc/sudoers.d/deploy" {
		t.Errorf("%+v", r)
	}
}

func TestClassNames(t *testing.T) {
	for c := ReadOnly; c <= Forbidden; c++ {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Class
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("%s does not round-trip: %v", c, err)
		}
	}
	if _, err := ParseClass("safe"); err == nil {
		t.Error("an unknown class parsed")
	}
}

// FuzzClassify: any input is classified without panicking, to a valid
// class, and a line is never classified lower than a command it holds.
func FuzzClassify(f *testing.F) {
	cmds, _ := corpus(f)
	for _, c := range cmds {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		r := Classify(cmd)
		if r.Class < ReadOnly || r.Class > Forbidden {
			t.Fatalf("%q: class %d", cmd, r.Class)
		}
		if len(r.Parts) > 0 && strings.HasPrefix(r.Parts[0].Rule, "the shell cannot parse it") || strings.HasSuffix(cmd, `\`) {
			return // not a command, or one the next line continues
		}
		for _, line := range []string{"true; " + cmd, "ls && " + cmd, "echo $( " + cmd + "\n)"} {
			if got := Classify(line).Class; got < r.Class {
				t.Fatalf("%q is %s, lower than its part %q (%s)", line, got, cmd, r.Class)
			}
		}
	})
}

func TestTransferClasses(t *testing.T) {
	for _, c := range []struct {
		dir, path string
		overwrite bool
		want      Class
	}{
		{"get", "/etc/shadow", false, ReadOnly},
		{"put", "/srv/app/config.yml", false, Mutating},
		{"put", "/srv/app/config.yml", true, Destructive},
		{"put", "/home/deploy/.ssh/authorized_keys", false, Forbidden},
		{"put", "/etc/cron.d/job", true, Forbidden},
		{"put", "/home/deploy/.bashrc", false, Destructive},
		{"put", "/srv/app/.git/hooks/post-merge", false, Destructive},
	} {
		if got := Transfer(c.dir, c.path, c.overwrite); got.Class != c.want || len(got.Parts) != 1 {
			t.Errorf("%s %s (overwrite %v): %s, want %s", c.dir, c.path, c.overwrite, got.Reason(), c.want)
		}
	}
}
