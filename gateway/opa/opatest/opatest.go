// Package opatest runs a real Open Policy Agent server for tests: the
// opa command built from github.com/open-policy-agent/opa at a pinned
// version (once per machine, cached), serving the Rego policy a test
// gives it on a loopback port of its own.
package opatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockgw/airlock/deploy/testkit"
)

// Version is the OPA the tests run (.ci/test-deps builds the same one).
const Version = "v1.22.3"

// Module is what is built.
const Module = "github.com/open-policy-agent/opa"

// Binary returns the path of the opa command, building it when it is not
// there yet: `go install Module@Version` into a per-user cache directory,
// one build at a time across packages tested in parallel.
func Binary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() { binPath, binErr = build() })
	if binErr != nil {
		tb.Fatalf("opatest: %v", binErr)
	}
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Dir is where the opa command is kept: AIRLOCK_OPA_DIR, or the user's
// cache directory.
func Dir() (string, error) {
	if d := os.Getenv("AIRLOCK_OPA_DIR"); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "airlock-test", "opa-"+Version), nil
}

func build() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "opa")
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.Command("go", "install", Module+"@"+Version)
	// Outside this module, built for the machine, without the race
	// detector or the test's flags.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building opa (go install %s@%s): %v\n%s", Module, Version, err, out.Bytes())
	}
	return bin, nil
}

// Server is a running OPA server.
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL  string
	log  string
	stop func()
}

// Kill stops the server at once (an OPA that went away).
func (s *Server) Kill() { s.stop() }

// Log is what the server wrote.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// Start runs OPA serving the Rego policies (file name → source) on a
// free loopback port, until the test ends.
func Start(tb testing.TB, policies map[string]string) *Server {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	var files []string
	for name, src := range policies {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			tb.Fatal(err)
		}
		files = append(files, p)
	}
	// OPA cannot report a port it chose: it is given one, binds it
	// itself, and says when it is taken.
	var srv *Server
	_, err := testkit.OnPort(func(port int) (err error) {
		srv, err = start(tb, bin, files, filepath.Join(dir, "opa.log"), port)
		return err
	})
	if err != nil {
		tb.Fatalf("opatest: %v", err)
	}
	return srv
}

func start(tb testing.TB, bin string, files []string, logPath string, port int) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{URL: "http://" + addr, log: logPath}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string{"run", "--server", "--addr", addr, "--log-level", "error", "--disable-telemetry"}, files...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-exited
		})
	}
	s.stop = stop
	err = testkit.PollErr(testkit.Patience, func() error {
		select {
		case err := <-exited:
			exited <- err
			if testkit.PortInUse(s.Log()) {
				return testkit.Stop(fmt.Errorf("opa on port %d: %w", port, testkit.ErrPortInUse))
			}
			return testkit.Stop(fmt.Errorf("opa exited: %v\n%s", err, s.Log()))
		default:
		}
		// Ready when it serves this test's policy files: OPA has bound
		// the port, so what answers is this test's.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/policies", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("opa did not become ready on %s: %v\n%s", addr, err, s.Log())
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !servesAll(body, files) {
			return fmt.Errorf("opa on %s does not serve this test's policies yet: %s", addr, body)
		}
		return nil
	})
	if err != nil {
		stop()
		return nil, err
	}
	tb.Cleanup(stop)
	return s, nil
}

// servesAll reports whether the policy list body names every file.
func servesAll(body []byte, files []string) bool {
	for _, f := range files {
		// OPA names a policy by its path without the leading slash.
		if !bytes.Contains(body, []byte(`"id":"`+strings.TrimPrefix(f, "/")+`"`)) {
			return false
		}
	}
	return true
}
