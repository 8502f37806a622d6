package classify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func line(s string) ShellForm { return ShellForm{LineForm, s} }
func cmd(s string) ShellForm  { return ShellForm{CommandForm, s} }

// shellFormCases are lines and the forms they have after the raw one.
var shellFormCases = []struct {
	name, line string
	want       []ShellForm
}{
	{"plain: the raw form is all", "terraform destroy", nil},
	{"double quotes", `"terraform" destroy`, []ShellForm{line("terraform destroy")}},
	{"single quotes", `'terraform' destroy`, []ShellForm{line("terraform destroy")}},
	{"a backslash outside quotes", `terra\form destroy`, []ShellForm{line("terraform destroy")}},
	{"a backslash in double quotes stays before most characters", `"terra\form" "de\$troy"`, []ShellForm{line(`terra\form de$troy`)}},
	{"ANSI-C quoting", `$'\x74erraform' $'destroy\0 -auto-approve'`, []ShellForm{line("terraform destroy")}},
	{"locale quoting", `$"terraform" destroy`, []ShellForm{line("terraform destroy")}},
	{"runs of blanks", "terraform  \t destroy", []ShellForm{line("terraform destroy")}},
	{"a line continuation", "terraform \\\n destroy", []ShellForm{line("terraform destroy")}},
	{"a list", "ls; terraform destroy", []ShellForm{cmd("ls"), cmd("terraform destroy")}},
	{"&& and quotes", "ls && 'terraform' destroy", []ShellForm{line("ls; terraform destroy"), cmd("ls"), cmd("terraform destroy")}},
	{"a pipeline", "cat plan |terraform destroy", []ShellForm{line("cat plan; terraform destroy"), cmd("cat plan"), cmd("terraform destroy")}},
	{"a subshell", "(cd /srv && terraform destroy)", []ShellForm{line("cd /srv; terraform destroy"), cmd("cd /srv"), cmd("terraform destroy")}},
	{"a command substitution, kept as written in its word", `echo "$(terraform destroy)"`,
		[]ShellForm{line(`echo "$(terraform destroy)"; terraform destroy`), cmd("terraform destroy")}},
	{"an expansion is kept as written", `"$TF" 'destroy'`, []ShellForm{line(`"$TF" destroy`)}},
	{"an assignment is not a word", "TF_LOG=debug terraform destroy", []ShellForm{line("terraform destroy")}},
	{"a trailing comment", "terraform destroy # see ticket", []ShellForm{line("terraform destroy")}},
	{"a comment is no command", "ls # ; terraform destroy", []ShellForm{line("ls")}},
	{"sh -c", "sh -c 'terraform destroy'", []ShellForm{line("sh -c terraform destroy"), cmd("terraform destroy")}},
	{"bash -c after options", `/bin/bash -e -o pipefail --norc -xc "ls; terraform destroy"`,
		[]ShellForm{line("/bin/bash -e -o pipefail --norc -xc ls; terraform destroy"), cmd("ls"), cmd("terraform destroy")}},
	{"nested sh -c", `bash -c "sh -c 'terraform destroy'"`,
		[]ShellForm{line("bash -c sh -c 'terraform destroy'"), cmd("sh -c terraform destroy"), cmd("terraform destroy")}},
	{"a script file is not a program string", "sh ./deploy.sh 'terraform destroy'", []ShellForm{line("sh ./deploy.sh terraform destroy")}},
	{"eval", `eval "terraform" destroy`, []ShellForm{line("eval terraform destroy"), cmd("terraform destroy")}},
	{"su -c", "su - deploy -c 'terraform destroy'", []ShellForm{line("su - deploy -c terraform destroy"), cmd("terraform destroy")}},
	{"a here-document is data", "cat <<EOF\nterraform destroy\nEOF", []ShellForm{line("cat")}},
	{"a here-document given to a shell is a program", "sh <<'EOF'\nls\nterraform destroy\nEOF",
		[]ShellForm{line("sh"), cmd("ls"), cmd("terraform destroy")}},
	{"an unquoted here-document, then the shell, remove backslashes", "bash -s <<EOF\nterra\\form \\$x destroy\nEOF",
		[]ShellForm{line("bash -s"), cmd("terraform $x destroy")}},
	{"a quoted here-document keeps them for the shell", "bash <<\\EOF\n'terraform\\$' destroy\nEOF",
		[]ShellForm{line("bash"), cmd(`terraform\$ destroy`)}},
	{"-s: the arguments after it are not a script file", "bash -s -- prod <<'EOF'\nterraform destroy\nEOF",
		[]ShellForm{line("bash -s -- prod"), cmd("terraform destroy")}},
	{"a script file does not read a here-document as its program", "bash ./x.sh <<'EOF'\nterraform destroy\nEOF", []ShellForm{line("bash ./x.sh")}},
	{"sh -c --", "sh -c -- 'terraform destroy'", []ShellForm{line("sh -c -- terraform destroy"), cmd("terraform destroy")}},
	{"a here-string given to a shell", `bash <<< "terraform destroy"`, []ShellForm{line("bash"), cmd("terraform destroy")}},
	{"env", "env TF_LOG=1 terraform  destroy", []ShellForm{line("env TF_LOG=1 terraform destroy"), cmd("terraform destroy")}},
	{"env -S", "env -S'terraform destroy'", []ShellForm{line("env -Sterraform destroy"), cmd("terraform destroy")}},
	{"wrappers in a row", "sudo -u deploy timeout -s KILL 5m nice -n 5 terraform destroy",
		[]ShellForm{cmd("timeout -s KILL 5m nice -n 5 terraform destroy"), cmd("nice -n 5 terraform destroy"), cmd("terraform destroy")}},
	{"sudo env", "sudo env TF_LOG=1 terraform destroy",
		[]ShellForm{cmd("env TF_LOG=1 terraform destroy"), cmd("terraform destroy")}},
	{"a wrapper and a shell", "sudo sh -c 'terraform destroy'",
		[]ShellForm{line("sudo sh -c terraform destroy"), cmd("sh -c terraform destroy"), cmd("terraform destroy")}},
	{"xargs", "echo x | xargs -I{} terraform destroy -target={}",
		[]ShellForm{line("echo x; xargs -I{} terraform destroy -target={}"), cmd("echo x"), cmd("xargs -I{} terraform destroy -target={}"), cmd("terraform destroy -target={}")}},
	{"the shell cannot parse it: the raw form only", "'terraform' destroy; (", nil},
	{"a string sh cannot parse is kept as written", `sh -c 'terraform destroy; ('`, []ShellForm{line("sh -c terraform destroy; ("), cmd("terraform destroy; (")}},
}

func TestShellForms(t *testing.T) {
	for _, c := range shellFormCases {
		t.Run(c.name, func(t *testing.T) {
			forms, complete := ShellForms(c.line)
			if !complete {
				t.Error("incomplete")
			}
			if len(forms) == 0 || forms[0] != (ShellForm{RawForm, c.line}) {
				t.Fatalf("the first form is not the raw line: %q", forms)
			}
			if diff := cmp.Diff(c.want, forms[1:], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%q (-want +got):\n%s", c.line, diff)
			}
		})
	}
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestShellFormsBounds: a line read only in part says so, whether it is
// nested too deep or padded with commands; within the bounds it is read
// to the end.
func TestShellFormsBounds(t *testing.T) {
	nested := func(n int) string {
		s := "terraform destroy"
		for range n {
			s = "sh -c " + shQuote(s)
		}
		return s
	}
	if forms, complete := ShellForms(nested(maxFormDepth)); !complete || forms[len(forms)-1] != cmd("terraform destroy") {
		t.Errorf("%d strings deep: complete %v, last form %q", maxFormDepth, complete, forms[len(forms)-1])
	}
	if _, complete := ShellForms(nested(maxFormDepth + 1)); complete {
		t.Errorf("%d strings deep: complete", maxFormDepth+1)
	}
	var padded strings.Builder
	for i := range maxForms {
		fmt.Fprintf(&padded, "true %d; ", i)
	}
	padded.WriteString("terraform destroy")
	forms, complete := ShellForms(padded.String())
	if complete || len(forms) > maxForms || forms[0].Text != padded.String() {
		t.Errorf("padded past %d forms: complete %v, %d forms", maxForms, complete, len(forms))
	}
}

// FuzzShellForms: any line has forms without panicking, the raw line
// first, each text once, within the bounds.
func FuzzShellForms(f *testing.F) {
	for _, c := range shellFormCases {
		f.Add(c.line)
	}
	f.Fuzz(func(t *testing.T, command string) {
		forms, _ := ShellForms(command)
		if len(forms) == 0 || forms[0] != (ShellForm{RawForm, command}) {
			t.Fatalf("%q: the first form is not the raw line: %q", command, forms)
		}
		if len(forms) > maxForms {
			t.Fatalf("%q: %d forms", command, len(forms))
		}
		seen := map[string]bool{}
		for _, fm := range forms {
			if seen[fm.Text] {
				t.Fatalf("%q: the form %q is there twice", command, fm.Text)
			}
			seen[fm.Text] = true
			if fm.Kind < RawForm || fm.Kind > CommandForm {
				t.Fatalf("%q: kind %d", command, fm.Kind)
			}
		}
	})
}
