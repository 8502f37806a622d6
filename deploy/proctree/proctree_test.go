package proctree

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/airlockgw/airlock/deploy/testkit"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c) 9) S 17 4240 4240 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1 2 3 4 5\n"
	p, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Proc{PID: 4242, PPID: 17, PGID: 4240, State: 'S', StartTime: 987654, Comm: "a) b (c) 9", UID: -1}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	for _, bad := range []string{"", "x (a) S 1", "12 a) S 1 1", "12 (a) S one 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", "12 (a) S 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) = nil error", bad)
		}
	}
}

func TestDescendants(t *testing.T) {
	table := []Proc{{PID: 1}, {PID: 10, PPID: 1}, {PID: 11, PPID: 10}, {PID: 12, PPID: 11}, {PID: 13, PPID: 10}, {PID: 20, PPID: 1}}
	var got []int
	for _, p := range Descendants(table, 10) {
		got = append(got, p.PID)
	}
	if !slices.Equal(got, []int{11, 13, 12}) {
		t.Errorf("descendants of 10: %v", got)
	}
	if d := Descendants(table, 12); len(d) != 0 {
		t.Errorf("descendants of a leaf: %v", d)
	}
}

// A real process tree: a shell in its own group with a child; Table shows
// both under the shell and in its group, and Running turns false once the
// shell has been killed and reaped.
func TestTableSeesARealTree(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer syscall.Kill(-pid, syscall.SIGKILL)
	var under []Proc
	testkit.Eventually(t, func() bool {
		table, err := Table()
		if err != nil {
			t.Fatal(err)
		}
		under = Descendants(table, pid)
		return len(under) > 0
	}, "the shell's child never appeared")
	table, _ := Table()
	if g := Group(table, pid); len(g) < 2 {
		t.Errorf("group %d: %v", pid, g)
	}
	if under[0].UID != os.Geteuid() || under[0].PGID != pid {
		t.Errorf("child %+v", under[0])
	}
	self, err := Read(pid)
	if err != nil || !Running(self) || !Alive(pid) {
		t.Fatalf("the shell: %+v %v", self, err)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	cmd.Wait()
	if Running(self) || Alive(pid) {
		t.Error("a killed and reaped shell still runs")
	}
	// The child went with the group, and (reparented) is reaped by init;
	// until then it is a zombie, which does not run.
	testkit.Eventually(t, func() bool { return !Running(under[0]) }, "the killed group's child still runs")
}
