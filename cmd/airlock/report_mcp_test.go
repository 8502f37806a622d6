package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/gateway/mcp/mcptest"
	"github.com/airlockgw/airlock/sshexec/sshtest"
)

// The MCP path side by side with the peer an agent's user would pick
// instead: the official TypeScript client calling a tool that runs `true`
// over stdio, one call after another, against the same sshd.

type mcpPath struct {
	name, what string
	lat        []time.Duration
}

// measureMCP runs rounds of calls through `airlock mcp` (ssh_exec, a fresh
// connection per call) and, when AIRLOCK_BENCH_SSHMCP names ssh-mcp's
// build/index.js, through ssh-mcp (run-command; it keeps one connection
// open), taking turns.
func measureMCP(t *testing.T, d *daemon, s *sshtest.SSHD, rounds, perRound int) []mcpPath {
	airlock, _ := binaries(t)
	node := mcptest.Node(t)
	script := filepath.Join(mcptest.Dir(), "bench.mjs")
	type runner struct {
		path *mcpPath
		cmd  func() *exec.Cmd
		// approve: the run of each new `airlock mcp` waits for a reviewer.
		approve bool
	}
	paths := []*mcpPath{{name: "airlock mcp", what: "`airlock mcp`, tool `ssh_exec`: a fresh, strictly checked connection per call, through `airlock serve`"}}
	runners := []runner{{path: paths[0], approve: true, cmd: func() *exec.Cmd {
		c := exec.Command(node, script, fmt.Sprint(perRound), "ssh_exec", `{"target":"box","command":"true"}`, airlock, "mcp")
		c.Env = append(os.Environ(), "AIRLOCK_SOCKET="+d.socket)
		return c
	}}}
	if index := os.Getenv("AIRLOCK_BENCH_SSHMCP"); index != "" {
		home := sshMCPConfig(t, s)
		p := &mcpPath{name: "ssh-mcp", what: "ssh-mcp " + sshMCPVersion(index) + ", tool `run-command` (`approvalPolicy = \"auto\"`, host key pinned): one connection kept open for every call"}
		paths = append(paths, p)
		runners = append(runners, runner{path: p, cmd: func() *exec.Cmd {
			c := exec.Command(node, script, fmt.Sprint(perRound), "run-command", `{"command":"true"}`, node, index)
			c.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
				"XDG_STATE_HOME="+filepath.Join(home, ".state"), "XDG_DATA_HOME="+filepath.Join(home, ".data"))
			return c
		}})
	}
	for r := range rounds {
		for k := range runners {
			rn := runners[(k+r)%len(runners)]
			c := rn.cmd()
			c.Dir = mcptest.Dir()
			var out, errb bytes.Buffer
			c.Stdout, c.Stderr = &out, &errb
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if rn.approve {
				list := d.pending(1)
				if _, errs, code := d.cli("approvals", "approve", list[0].ID, "--ttl", "1h"); code != 0 {
					t.Fatalf("approve: %s", errs)
				}
			}
			if err := c.Wait(); err != nil {
				t.Fatalf("%s: %v\n%s\n%s", rn.path.name, err, out.String(), errb.String())
			}
			var res struct {
				Lat        []float64 `json:"lat_ms"`
				Errors     int       `json:"errors"`
				FirstError string    `json:"first_error"`
			}
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Errors > 0 {
				t.Fatalf("%s: %v, %d failed calls (%s): %s\n%s", rn.path.name, err, res.Errors, res.FirstError, out.String(), errb.String())
			}
			for _, ms := range res.Lat {
				rn.path.lat = append(rn.path.lat, time.Duration(ms*float64(time.Millisecond)))
			}
		}
	}
	var out []mcpPath
	for _, p := range paths {
		out = append(out, *p)
	}
	return out
}

// sshMCPConfig writes ssh-mcp's configuration for s under a fresh home:
// the sshd's client key, its host key pinned, commands allowed without a
// prompt (there is no one to ask; airlock's run is approved once, too).
func sshMCPConfig(t *testing.T, s *sshtest.SSHD) string {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "ssh-mcp")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(s.Addr, ":")
	cfg := fmt.Sprintf(`[defaults]
defaultProfile = "box"
approvalMode = "auto"

[[profiles]]
name = "box"
host = %q
port = %s
user = %q
auth = "key"
keyRef = %q
trustedHostKey = %q
role = "admin"
approvalPolicy = "auto"
`, host, port, s.User, s.ClientKeyFile, ssh.FingerprintSHA256(s.HostKey))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func sshMCPVersion(index string) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(index), "..", "package.json"))
	if err != nil {
		return "(version unknown)"
	}
	var pkg struct{ Version string }
	json.Unmarshal(b, &pkg)
	return pkg.Version
}

func (r *report) mcpMarkdown(b *strings.Builder) {
	if len(r.mcp) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Through MCP over stdio\n\n")
	fmt.Fprintf(b, "The official TypeScript SDK client (`gateway/mcp/testdata/node/bench.mjs`) starts each server over stdio,\n")
	fmt.Fprintf(b, "makes one call to warm up, then calls a tool that runs `true` on the same sshd, one call after another,\n")
	fmt.Fprintf(b, "in interleaved rounds. Latency is the client's, call to result, in ms.\n\n")
	for _, p := range r.mcp {
		fmt.Fprintf(b, "- **%s**: %s;\n", p.name, p.what)
	}
	fmt.Fprintf(b, "\n| path | calls | p50 | p95 | p99 | p50 ÷ airlock mcp |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	base := percentile(slices.Sorted(slices.Values(r.mcp[0].lat)), .5)
	for _, p := range r.mcp {
		sorted := slices.Sorted(slices.Values(p.lat))
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %.2f |\n", p.name, len(sorted), ms(percentile(sorted, .5)),
			ms(percentile(sorted, .95)), ms(percentile(sorted, .99)), ratio(percentile(sorted, .5), base))
	}
	if len(r.mcp) == 1 {
		fmt.Fprintf(b, "\nssh-mcp was not measured this time: `.ci/bench-report` installs it from npm and sets `AIRLOCK_BENCH_SSHMCP`.\n")
	}
}
