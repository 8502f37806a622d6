package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// BenchmarkPipedStdin is one whole call of the built airlock-ssh (`box --
// true` through the package's gateway and real sshd, the run approved),
// by what its standard input is. $AIRLOCK_SSH_BASELINE names another
// airlock-ssh binary (an earlier build) to measure beside it in the same
// run:
//
//	go build -o /tmp/airlock-ssh-before ./cmd/airlock-ssh   # at the earlier commit
//	AIRLOCK_SSH_BASELINE=/tmp/airlock-ssh-before go test -run '^$' -bench PipedStdin -benchtime 10x -count 6 ./cmd/airlock-ssh > stdin.txt
//	benchstat -col /build stdin.txt
func BenchmarkPipedStdin(b *testing.B) {
	d := gateway(b)
	type build struct{ name, path string }
	bins := []build{{"build=now", gatewaytest.Binary(b, "airlock-ssh")}}
	if p := os.Getenv("AIRLOCK_SSH_BASELINE"); p != "" {
		bins = append([]build{{"build=baseline", p}}, bins...) // benchstat's base column
	}
	for _, bin := range bins {
		for _, in := range []struct {
			name string
			args []string
			// stdin gives the call's standard input, and a function to
			// call once the call is done.
			stdin func(b *testing.B) (*os.File, func())
			// shell: started by a shell that has the same standard
			// input (an agent harness's `sh -c`).
			shell bool
		}{
			{"stdin=-n", []string{"-n"}, openSilentPipe, false},
			{"stdin=closed-empty-pipe", nil, closedPipe(""), false},
			{"stdin=pipe-with-4KiB", nil, closedPipe(strings.Repeat("x", 4<<10)), false},
			{"stdin=open-silent-pipe", nil, openSilentPipe, false},
			{"stdin=sh-c,-n", []string{"-n"}, openSilentPipe, true},
			{"stdin=sh-c,open-silent-pipe", nil, openSilentPipe, true},
		} {
			b.Run(bin.name+"/"+in.name, func(b *testing.B) {
				for b.Loop() {
					f, done := in.stdin(b)
					argv := append([]string{bin.path}, append(in.args, "box", "--", "true")...)
					if in.shell {
						argv = append([]string{"sh", "-c", `"$@"; exit $?`, "sh"}, argv...)
					}
					cmd := exec.Command(argv[0], argv[1:]...)
					cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.Socket)
					cmd.Stdin = f
					out, err := cmd.CombinedOutput()
					done()
					if err != nil {
						b.Fatalf("%v: %s", err, out)
					}
				}
			})
		}
	}
}

// openSilentPipe is a pipe whose writing end stays open, with nothing
// written, until the call is done: an agent harness's standard input.
func openSilentPipe(b *testing.B) (*os.File, func()) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	return r, func() { r.Close(); w.Close() }
}

// closedPipe is a pipe holding s, its writing end closed: `printf s |
// airlock-ssh …`.
func closedPipe(s string) func(b *testing.B) (*os.File, func()) {
	return func(b *testing.B) (*os.File, func()) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		w.WriteString(s)
		w.Close()
		return r, func() { r.Close() }
	}
}
