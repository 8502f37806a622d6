package sshexec_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/sshexec"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// transferBenchSize is the file each iteration moves (AIRLOCK_BENCH_FILE
// overrides, in MiB).
func transferBenchSize() int64 {
	if v := os.Getenv("AIRLOCK_BENCH_FILE_MIB"); v != "" {
		var n int64
		fmt.Sscan(v, &n)
		if n > 0 {
			return n << 20
		}
	}
	return 256 << 20
}

// BenchmarkTransfer compares, side by side against the same sshd and
// account, a put and a get of one file (256 MiB) through sshexec.Put and
// Get (fresh connection, temporary file, digest, publish) and through the
// OpenSSH scp and sftp clients. b.SetBytes makes the MB/s column the
// throughput. See docs/benchmarks.md.
func BenchmarkTransfer(b *testing.B) {
	s := benchSSHD(b)
	size := transferBenchSize()
	src := filepath.Join(b.TempDir(), "payload")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	dir := sshtest.WritableDir(b)
	remote := filepath.Join(dir, "payload")
	// The file the gets read, put once.
	seed, _ := os.Open(src)
	if res, err := sshexec.Put(context.Background(), configFor(s), sshexec.PutFile{Path: filepath.Join(dir, "seed"), Mode: 0o644, Data: seed, Size: size, SHA256: sum}); err != nil || !res.Success() {
		b.Fatalf("seed: %v %+v", err, res)
	}
	seed.Close()
	openssh := opensshTransfer(b, s)

	for _, r := range []struct {
		name string
		put  func() error
		get  func() error
	}{
		{"sshexec", func() error {
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			defer in.Close()
			res, err := sshexec.Put(context.Background(), configFor(s), sshexec.PutFile{Path: remote, Mode: 0o644, Overwrite: true, Data: in, Size: size, SHA256: sum})
			if err == nil && !res.Success() {
				err = fmt.Errorf("%v %s", res.Outcome, res.Detail)
			}
			return err
		}, func() error {
			res, err := sshexec.Get(context.Background(), configFor(s), sshexec.GetFile{Path: filepath.Join(dir, "seed"), MaxSize: size, Out: io.Discard})
			if err == nil && !res.Success() {
				err = fmt.Errorf("%v %s", res.Outcome, res.Detail)
			}
			return err
		}},
		{"scp", func() error { return openssh("scp", src, "REMOTE:"+remote) },
			func() error { return openssh("scp", "REMOTE:"+filepath.Join(dir, "seed"), "/dev/null") }},
		{"sftp", func() error { return openssh("sftp", "put "+src+" "+remote) },
			func() error { return openssh("sftp", "get "+filepath.Join(dir, "seed")+" /dev/null") }},
	} {
		b.Run("dir=put/impl="+r.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := r.put(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("dir=get/impl="+r.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := r.get(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// opensshTransfer runs scp (args: source, destination, REMOTE: standing
// for the account on the sshd) or sftp (args: one batch command) with the
// same pinned key, key file and no multiplexing.
func opensshTransfer(b *testing.B, s *sshtest.SSHD) func(tool string, args ...string) error {
	kh := filepath.Join(b.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(s.KnownHostsLine()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(s.Addr, ":")
	common := []string{"-F", "/dev/null", "-i", s.ClientKeyFile,
		"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + kh,
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"}
	return func(tool string, args ...string) error {
		var cmd *exec.Cmd
		switch tool {
		case "scp":
			argv := append([]string{"-q", "-P", port}, common...)
			for _, a := range args {
				argv = append(argv, strings.Replace(a, "REMOTE:", s.User+"@"+host+":", 1))
			}
			cmd = exec.Command("scp", argv...)
		default:
			argv := append(append([]string{"-q", "-P", port, "-b", "-"}, common...), s.User+"@"+host)
			cmd = exec.Command("sftp", argv...)
			cmd.Stdin = bytes.NewBufferString(strings.Join(args, "\n") + "\n")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", tool, err, out)
		}
		return nil
	}
}
