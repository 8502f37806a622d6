package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/gatewaytest"
)

// An open pipe with nothing on it is not waited for (long), never read,
// and what arrives on it is never lost without a word.
func TestSilentStdinPipe(t *testing.T) {
	t.Parallel()
	d := gateway(t)
	t.Run("an open pipe with nothing coming does not hold the command", func(t *testing.T) {
		t.Parallel()
		pr, _ := silentPipe(t) // open, silent, for the whole call
		var out bytes.Buffer
		stderr, code := agentIn(t, d, pr, &out, "box", "--", "echo ran")
		if code != 0 || out.String() != "ran\n" || !strings.HasPrefix(withoutWaiting(stderr), "airlock-ssh: standard input had nothing on it for 100ms, so none was sent") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
		// -n says so: no note.
		out.Reset()
		stderr, code = agentIn(t, d, pr, &out, "-n", "box", "--", "echo ran")
		if code != 0 || out.String() != "ran\n" || withoutWaiting(stderr) != "" {
			t.Fatalf("-n: exit %d, stdout %q, stderr %q", code, out.String(), stderr)
		}
	})
	t.Run("the open pipe of the process that started it is not waited for", func(t *testing.T) {
		t.Parallel()
		pr, _ := silentPipe(t)
		// A shell that holds the pipe as its own standard input (an agent
		// harness's) starts airlock-ssh, which shares it.
		sh := exec.Command("sh", "-c", `"$@"; exit $?`, "sh", gatewaytest.Binary(t, "airlock-ssh"), "box", "--", "echo ran")
		sh.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.Socket)
		sh.Stdin = pr
		var out, errb bytes.Buffer
		sh.Stdout, sh.Stderr = &out, &errb
		if err := sh.Run(); err != nil || out.String() != "ran\n" || !strings.HasPrefix(withoutWaiting(errb.String()), "airlock-ssh: standard input is the pipe of the process that started airlock-ssh, with nothing on it, so none was sent") {
			t.Fatalf("%v, stdout %q, stderr %q", err, out.String(), errb.String())
		}
	})
	t.Run("input that comes too late is reported, and left unread", func(t *testing.T) {
		t.Parallel()
		pr, pw := silentPipe(t)
		outR, outW := io.Pipe()
		go func() {
			// Once the command runs, the input comes: too late.
			buf := make([]byte, 64)
			outR.Read(buf)
			pw.Write([]byte("late\n"))
			io.Copy(io.Discard, outR)
		}()
		stderr, code := agentIn(t, d, pr, outW, "box", "--", "echo started; sleep 5")
		outW.Close()
		if code != 255 || !strings.Contains(stderr, "standard input had nothing on it for 100ms when the action was requested, so none was sent; 5 bytes arrived on it later and were not sent (they are left unread)") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		// Nothing was taken from the pipe: the bytes are still there for
		// whoever reads it next.
		pw.Close()
		if rest, err := io.ReadAll(pr); err != nil || string(rest) != "late\n" {
			t.Fatalf("the pipe holds %q (%v) after the call; want the late input, unread", rest, err)
		}
	})
	t.Run("input that comes before the command starts cancels it", func(t *testing.T) {
		t.Parallel()
		pr, pw := silentPipe(t)
		const command = "cat # input that comes while a reviewer decides"
		held.Store(command, true)
		errR, errW := io.Pipe()
		go func() {
			// Once the agent is told it waits for a reviewer, the input
			// comes; then the reviewer approves.
			sc := bufio.NewScanner(errR)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "airlock-ssh: waiting for a reviewer") {
					pw.Write([]byte("late\n"))
					held.Delete(command)
				}
			}
		}()
		var out bytes.Buffer
		cmd := exec.Command(gatewaytest.Binary(t, "airlock-ssh"), "--exit-codes=detailed", "callbox", "--", command)
		cmd.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.Socket)
		cmd.Stdin, cmd.Stdout = pr, &out
		var errb gatewaytest.LockedBuffer
		cmd.Stderr = io.MultiWriter(errW, &errb)
		err := cmd.Run()
		errW.Close()
		// The action was cancelled at connecting: what the gateway
		// recorded is said as it is (the cancel and the dial race).
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != detailedInput || out.Len() != 0 ||
			!regexp.MustCompile(`5 bytes arrived on it before the command started \(they are left unread\), so airlock-ssh cancelled the action rather than run the command without them \(.*\): action act_\w+ ended \w+`).MatchString(errb.String()) {
			t.Fatalf("%v, stdout %q, stderr %q; want exit %d and the input's note", err, out.String(), errb.String(), detailedInput)
		}
		pw.Close()
		if rest, err := io.ReadAll(pr); err != nil || string(rest) != "late\n" {
			t.Fatalf("the pipe holds %q (%v) after the call; want the late input, unread", rest, err)
		}
	})
}

// silentPipe is a pipe open until the test ends, nothing written to it.
func silentPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestReadable: a pipe has something to read when it holds bytes or its
// writer is gone; an open silent one has not, and asking does not wait.
func TestReadable(t *testing.T) {
	r, w := silentPipe(t)
	fd := int(r.Fd())
	if got, err := readable(fd, 0); got || err != nil {
		t.Fatalf("an open silent pipe: readable = %v, %v; want false", got, err)
	}
	s := &silentInput{fd: fd}
	if n, open := s.arrived(); n != 0 || !open {
		t.Fatalf("an open silent pipe: arrived %d, open %v; want 0, open", n, open)
	}
	w.Write([]byte("abc"))
	if got, err := readable(fd, 0); !got || err != nil {
		t.Fatalf("a pipe with bytes: readable = %v, %v; want true", got, err)
	}
	if n, _ := s.arrived(); n != 3 {
		t.Fatalf("a pipe with 3 bytes: arrived %d", n)
	}
	// arrived counted them without reading them.
	if n, _ := s.arrived(); n != 3 {
		t.Fatalf("asked again: arrived %d, want the same 3", n)
	}
	r2, w2 := silentPipe(t)
	w2.Close()
	if got, err := readable(int(r2.Fd()), 0); !got || err != nil {
		t.Fatalf("a closed pipe: readable = %v, %v; want true", got, err)
	}
	if n, open := (&silentInput{fd: int(r2.Fd())}).arrived(); n != 0 || open {
		t.Fatalf("a closed empty pipe: arrived %d, open %v; want 0, closed", n, open)
	}
}
