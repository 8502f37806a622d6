package classify

import (
	"os"
	"strings"
	"testing"
)

// TestNotProvedIsNotReadOnly: every form the outside review slipped past
// the old tables is now at least the class its effect needs. Each line
// is a spelling that writes a file, runs a program or changes the shell
// (the effect oracle runs such lines for real; these pin the verdicts).
func TestNotProvedIsNotReadOnly(t *testing.T) {
	for _, c := range notProved {
		if r := Classify(c.line); r.Class < c.min {
			t.Errorf("%q: %s (%s), want at least %s", c.line, r.Class, r.Reason(), c.min)
		}
	}
}

// notProved are the lines of TestNotProvedIsNotReadOnly, each with the
// least class its effect needs.
var notProved = []struct {
	line string
	min  Class
}{
	{"echo X >& out.txt", Destructive},
	{"echo X &> out.txt", Destructive},
	{"echo X >| out.txt", Destructive},
	{"echo X 1<> out.txt", Destructive},
	{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=x git log", Destructive},
	{"BASH_ENV=/tmp/x bash -c true", Destructive},
	{"LD_PRELOAD=/tmp/x.so cat f", Destructive},
	{"PATH=/tmp:$PATH ls", Destructive},
	{"sed --expression='1e touch m' f", Destructive},
	{"sed --expr='1e touch m' f", Destructive},
	{"sed -e 's/a/b/e' f", Destructive},
	{"sed -e 's/a/b/w out' f", Destructive},
	{"sed 'w out' f", Destructive},
	{"env -S'touch m'", Destructive},
	{"env --split-string='touch m'", Destructive},
	{"find . $'-delete'", Destructive},
	{"find . -name x -fprint out", Mutating},
	{"find . -newermt 2020-01-01 -delete", Destructive},
	{"curl -sSLo out.txt file:///etc/hostname", Mutating},
	{"curl -sSL --out out.txt file:///etc/hostname", Mutating},
	{"cp -tDIR f", Mutating},
	{"dd if=f of=a of=b", Mutating},
	{"sort -o out f", Mutating},
	{"sort -uo out f", Mutating},
	{"sort --out=out f", Mutating},
	{"sort --compress-program=touch f", Destructive},
	{"uniq in out", Mutating},
	{"date -s 2020-01-01", Privileged},
	{"date 010100002020", Privileged},
	{"tree -o out /", Mutating},
	{"tar --checkpoint-action=exec=touch -tf a.tar", Destructive},
	{"tar -tf a.tar --to-command=touch", Destructive},
	{"git log --output=out", Destructive},
	{"git diff -O/etc/passwd", Destructive},
	{"git ls-remote --upload-pack=touch x", Destructive},
	{"git grep -O x", Destructive},
	{"git --paginate log", Destructive},
	{"hash -p /tmp/x ls", Destructive},
	{"let 'a[$(touch m)]'", Destructive},
	{"printf -v 'a[$(touch m)]' x", Destructive},
	{"printf -vx y", Destructive},
	{"test -v 'a[$(touch m)]'", Destructive},
	{"[ -v 'a[$(touch m)]' ]", Destructive},
	{"[[ -v x ]]", Destructive},
	{"x='a[$(touch m)]'; echo $((x))", Destructive},
	{"echo $((y+1))", Destructive},
	{"[[ $x -eq 0 ]]", Destructive},
	{"echo ${!x}", Destructive},
	{"echo ${x@P}", Destructive},
	{"read 'a[$(touch m)]' <<< x", Destructive},
	{"mv f /dev/null", Destructive},
	{"cd /etc && echo x >> passwd", Forbidden},
	{"cd /etc; cd cron.d; cp job x", Forbidden},
	{"cd ~/.ssh && cat k >> authorized_keys", Forbidden},
	{"echo x >> ~/.ssh/rc", Forbidden},
	{"echo x >> .ssh/environment", Forbidden},
	{"cp unit ~/.config/systemd/user/", Forbidden},
	{"cp unit /etc/systemd/system/x.service", Forbidden},
	{"echo x > /etc/pam.d/sshd", Forbidden},
	{"echo x >> /etc/profile", Forbidden},
	{"echo x > /etc/ld.so.conf.d/x.conf", Forbidden},
	{"echo x > /etc/apt/apt.conf.d/99x", Forbidden},
	{"cp x /etc/update-motd.d/99x", Forbidden},
	{"echo x >> /etc/gitconfig", Forbidden},
	{"echo x > /proc/self/root/etc/cron.d/x", Forbidden},
	{"echo x > /etc/cron.d/$name", Forbidden},
	{"echo x > $HOME/.bashrc", Destructive},
	{"echo x > ~/../../etc/cron.d/x", Forbidden},
	{"cd .. && echo x > y", Destructive},
	{"cp passwd /etc/", Forbidden},
	{"sort *", Destructive},
	{"cat $f", Destructive},
	{"sort \"$f\"", Destructive},
	{"export X=1", Destructive},
	{"declare -n r=x", Destructive},
	{"x=1", Mutating},
	{"IFS=/", Destructive},
	{"alias ls='touch m'", Destructive},
	{"shopt -s expand_aliases", Destructive},
	{"set -a", Destructive},
	{"f() { touch m; }; f", Destructive},
	{"ls --colour=always --hyperlink=x | xargs sort", Destructive},
	{"xargs -I{} sort {} -o out", Destructive},
	{"echo a | xargs rm", Destructive},
	{"timeout 5 sort -o out f", Mutating},
	{"nice -n 5 sort -o out f", Mutating},
	{"env LC_ALL=C sort -o out f", Mutating},
	{"LC_ALL=C sort f", Mutating},
	{"sudo -u root cat /etc/shadow", Privileged},
	{"bash -ic 'ls'", Destructive},
	{"bash --rcfile x -c ls", Destructive},
	{"wget http://x/y", Mutating},
	{"wget -q -O out http://x/y", Mutating},
	{"curl -X POST http://x", Mutating},
	{"curl -K cfg http://x", Destructive},
	{"ss -K", Destructive},
	{"ip -batch cmds", Destructive},
	{"ip netns exec x sh", Privileged},
	{"sysctl -w a.b=1", Privileged},
	{"sysctl a.b=1", Privileged},
	{"dd if=/dev/zero of=/dev/sda", Destructive},
	{"echo x > /dev/sda", Destructive},
	{"cat f > /dev/fd/3/x", Destructive},
	{"ls {fd}>out", Destructive},
	{"kubectl --kubeconfig=/tmp/k get pods", Destructive},
	{"kubectl get pods --server=https://x", Destructive},
	{"docker -H ssh://x ps", Destructive},
	{"apt list -o APT::Update::Pre-Invoke::=x", Destructive},
	{"openssl x509 -in c -out d", Destructive},
	{"nohup sleep 30 </dev/null >/dev/null 2>&1 &", Mutating},
	{"setsid sleep 30", Mutating},
	{"(sleep 30 &)", Mutating},
	{"sleep 30 & disown", Mutating},
}

// TestProvedReadOnly: the everyday reading forms stay read_only, with
// the rule that proved them.
func TestProvedReadOnly(t *testing.T) {
	for _, line := range []string{
		"find /var/log -name '*.gz' -mtime +30",
		"find . -type f -exec grep -l x {} +",
		"sed -n '/error/p' /var/log/syslog",
		"sed -n '1,20p;$p' f",
		"sed 's|a|b|g; s/x/y/2' f",
		"git status --short",
		"git log --oneline -n 20",
		"git log -5 --format=%H",
		"git --no-pager diff --stat HEAD~1",
		"git branch -a",
		"git config --get user.name",
		"kubectl get pods -n kube-system -o wide",
		"kubectl logs -f deploy/x --tail=50",
		"docker ps -a --format '{{.Names}}'",
		"curl -fsS http://localhost/healthz -o /dev/null",
		"curl -s -o - http://x",
		"wget -qO- http://localhost/metrics",
		"tar -tzf a.tar.gz",
		"tar tvf a.tar",
		"systemctl status nginx --no-pager",
		"ip -br addr show",
		"sysctl -n net.ipv4.ip_forward",
		"echo $((1+2))",
		"cat /var/log/*.log",
		"for f in /var/log/*.log; do echo \"$f\"; done",
		"while read -r line; do echo \"$line\"; done < /etc/hosts",
		"test -f /etc/hosts && echo yes",
		"[[ -f /etc/hosts ]]",
		"printf '%s\\n' a b",
		"dd if=/etc/hosts bs=1 count=10",
		"dd if=f of=/dev/null",
		"set -euo pipefail; echo x",
		"command -v git",
		"xargs -0 echo",
		"openssl x509 -in cert.pem -noout -enddate",
		"ls 2>/dev/null >&2",
	} {
		if r := Classify(line); r.Class != ReadOnly {
			t.Errorf("%q: %s (%s), want read_only", line, r.Class, r.Reason())
		}
	}
}

// TestAbbreviations: a unique prefix of a long option is that option; a
// prefix of several is not proved.
func TestAbbreviations(t *testing.T) {
	g := compile(&model{names: "p", long: "output= outline verbose"})
	if o, _ := g.lookLong("outp"); o == nil || o.long != "output" {
		t.Errorf("--outp: %v", o)
	}
	if o, why := g.lookLong("out"); o != nil || !strings.Contains(why, "more than one") {
		t.Errorf("--out: %v %q", o, why)
	}
	if o, _ := g.lookLong("output"); o == nil {
		t.Error("--output exact")
	}
	if o, why := g.lookLong("x"); o != nil || !strings.Contains(why, "not an option") {
		t.Errorf("--x: %v %q", o, why)
	}
}

// TestSensitivePaths: the table's rows match the paths they name, in any
// home, and nothing else.
func TestSensitivePaths(t *testing.T) {
	for p, want := range map[string]Class{
		"/etc/cron.d/x": Forbidden, "/etc/crontab": Forbidden, "/home/a/.ssh/authorized_keys": Forbidden,
		"/~/.ssh/rc": Forbidden, "/root/.ssh/environment": Forbidden, "/etc/rc.local": Forbidden,
		"/~/.bashrc": Destructive, "/srv/app/.git/hooks/pre-commit": Destructive, "/etc/sudoers.d/a": Forbidden,
		"/srv/app/config.yml": 0, "/tmp/x": 0, "/etc/hosts": 0, "/~/notes.txt": 0, "/etc/passwdx": 0,
	} {
		if got, _ := sensitive(p); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
}

// TestWordForms: how expansions stand where options may.
func TestWordForms(t *testing.T) {
	for line, want := range map[string]Class{
		"diff <(ls a) <(ls b)":           Mutating,
		"cat /tmp/\"$(ls | head -1)\"":   ReadOnly,
		"cat \"$(ls | head -1)\"":        Destructive,
		"cat $\"-n\" f":                  Destructive,
		"a=([x]=1)":                      Destructive,
		"a=(x y)":                        Mutating,
		"echo $((${#x}+1))":              ReadOnly,
		"echo ${x:0:3} ${#a[@]} ${a[0]}": ReadOnly,
	} {
		if r := Classify(line); r.Class != want {
			t.Errorf("%q: %s (%s), want %s", line, r.Class, r.Reason(), want)
		}
	}
}

// TestDocsListTheTables: docs/classification.md names every row of the
// table of paths and every modelled program, so the page says what the
// code does.
func TestDocsListTheTables(t *testing.T) {
	b, err := os.ReadFile("../../docs/classification.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, r := range sensitivePaths {
		if !strings.Contains(doc, "`"+r.pattern+"`") {
			t.Errorf("docs/classification.md does not list the path %s", r.pattern)
		}
	}
	for _, p := range Programs() {
		for _, n := range p.Names {
			if !strings.Contains(doc, "`"+n+"`") {
				t.Errorf("docs/classification.md does not list the program %s", n)
			}
		}
	}
}
