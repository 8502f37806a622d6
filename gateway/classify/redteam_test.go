package classify

import "testing"

// TestRedTeamForms: the forms a red team found rated too low, each with
// the least class its effect needs.
func TestRedTeamForms(t *testing.T) {
	for _, c := range []struct {
		line string
		min  Class
	}{
		{"echo pwned 3<a.txt >/dev/fd/3", Destructive},
		{"echo pwned 1<a.txt >/dev/stdout", Destructive},
		{"sort -o /dev/fd/3 b.txt 3<a.txt", Destructive},
		{"dd if=b.txt of=/dev/fd/3 3<a.txt", Destructive},
		{"echo x 3</etc/passwd >/dev/fd/3", Destructive},
		{"jobs -x touch m", Destructive},
		{"builtin jobs -x touch m", Destructive},
		{"nohup true 1</dev/ptmx", Destructive},
		{"setsid -w sleep 20", Mutating},
		{"true <(sleep 20)", Mutating},
		{"timeout 20 sleep 20; true", Mutating},
		{"sh -c '[[ x > a.txt ]]'", Destructive},
		{"dash -c '((1>2))'", Destructive},
		{"sed -n ':x;t x w out.txt' a.txt", Destructive},
		{"sed -n 't x w out.txt' a.txt", Destructive},
		{"kill -0 -s KILL 123", Destructive},
		{"kill -0 -n 9 123", Destructive},
		{"cat <<EOF\nEO\\\nF\ntouch m\nEOF", Destructive},
		{"printf x 3</dev/tcp/h/80 >&3", Destructive},
		{"mkdir -p .ssh && cd .ssh && echo x > ~+/rc", Forbidden},
		{"cd /etc && tee ~+/passwd", Forbidden},
		{"find .ssh/x -execdir tee rc \\;", Destructive},
		{"chroot / tee etc/passwd", Forbidden},
		{"pkexec tee /etc/passwd", Forbidden},
		{"runuser -u root -- tee /etc/passwd", Forbidden},
		{"sg adm -c 'tee /etc/passwd'", Forbidden},
		{"capsh -- -c 'tee /etc/passwd'", Forbidden},
		{"sysctl -w kernel.core_pattern='|/tmp/x'", Forbidden},
		{"rm /etc/passwd", Forbidden},
		{"unlink .ssh/authorized_keys", Forbidden},
		{"shred -u /etc/shadow", Forbidden},
		{"chown -R nobody /etc", Forbidden},
		{"chmod -R 777 ~", Forbidden},
		{"rm -rf ~/.ssh", Forbidden},
		{"cp -b --suffix=ward b.txt .for", Destructive},
		{"gunzip .forward.gz", Forbidden},
		{"tar -xf a.tar", Destructive},
		{"unzip a.zip", Destructive},
		{"ssh-keygen -f .ssh/authorized_keys", Forbidden},
		{"mktemp -p /etc/cron.d", Forbidden},
		{"mkdir t && cp a.txt t/rc && mv t .ssh", Forbidden},
		{"cp -r t .ssh", Forbidden},
		{"ln -s t .ssh", Forbidden},
		{"ln -s .ssh s && echo x > s/rc", Forbidden},
		{"ln -s /etc e; echo x >> e/passwd", Forbidden},
		{"systemctl enable x", Forbidden},
		{"systemctl --user enable x", Forbidden},
		{"tee g/.git <<< 'gitdir: /tmp'", Destructive},
		{"git --git-dir=g ls-remote localhost:x", Destructive},
		{"tar -tf host:a.tar", Destructive},
		{"curl gopher://h:25/x", Mutating},
		{"curl dict://h:6379/x", Mutating},
		{"cd ssh; tee sshd_config", Destructive},
	} {
		if r := Classify(c.line); r.Class < c.min {
			t.Errorf("%q: %s (%s), want at least %s", c.line, r.Class, r.Reason(), c.min)
		}
	}
}

// TestEveryProgramAnyArguments: every modelled program, wrapper and rule
// classifies no arguments, one, and odd ones without panicking.
func TestEveryProgramAnyArguments(t *testing.T) {
	names := []string{"env", "nice", "timeout", "xargs", "find", "watch", "sudo", "su", "sh", "git", "docker", "kubectl",
		"curl", "wget", "tar", "sed", "dd", "ip", "sysctl", "openssl", "systemctl", "service", "rm", "gzip", "ssh-keygen",
		"mktemp", "chroot", "runuser", "sg", "capsh", "apt", "kill", "read", "set", "printf", "test", "cd", "hash"}
	for _, p := range Programs() {
		names = append(names, p.Names...)
	}
	for _, n := range names {
		for _, args := range []string{"", " x", " -", " --", " -x", " x y z", " $x", " -- -x", " ''"} {
			line := n + args
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%q: panic %v", line, r)
					}
				}()
				Classify(line)
			}()
		}
	}
}
