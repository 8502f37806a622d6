package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/redact"
)

// investigatorsLog writes, into dir, what docs/investigators.md says an
// investigator holds: a log of 2000 entries with signed checkpoints of
// sizes 1000 and 2000 (the page's numbers), action act_1 whose command
// was stored redacted, the verifier key beside the database and in kept/,
// the command MAC key in kept/, the checkpoints as kept-checkpoints.log
// (witnessScript makes witness/notes.log of them), and the original
// command in cmd.txt. It returns the state directory the log was written
// in, where a gateway keeps it.
func investigatorsLog(t *testing.T, dir string) (stateDir string) {
	t.Helper()
	state := t.TempDir()
	o := auditchain.DefaultOptions(state)
	o.Origin = "investigators.test/log"
	o.CheckpointEvery, o.CheckpointInterval = -1, -1
	ctx := context.Background()
	key, err := redact.LoadOrCreateKey(filepath.Join(state, filepath.FromSlash(redact.KeyFile)))
	if err != nil {
		t.Fatal(err)
	}
	const original = "deploy --token AKIAIOSFODNN7EXAMPLE"
	mac := redact.MAC(key, original)
	n := 0
	for _, upTo := range []int{1000, 2000} { // Close signs a checkpoint of the size
		l, err := auditchain.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for ; n < upTo; n++ {
			e := auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: fmt.Sprintf("act-%d", n), RunID: "run-1",
				Fields: []auditchain.Field{auditchain.Str("command", fmt.Sprintf("echo %d", n))}}
			switch n {
			case 10:
				e = auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: "act_1", Fields: []auditchain.Field{
					auditchain.Str("command", "deploy --token [redacted:aws-access-key]"), auditchain.Bytes("command_hmac", mac[:]),
					auditchain.Str("redactions", "aws-access-key")}}
			case 11:
				e = auditchain.Entry{Kind: auditchain.KindActionFinished, ActionID: "act_1",
					Fields: []auditchain.Field{auditchain.Str("outcome", "exited"), auditchain.Int("exit_code", 0)}}
			}
			if _, err := l.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(o.Path, filepath.Join(dir, "audit.db"))
	copyFile(o.VerifierKeyPath, filepath.Join(dir, "checkpoint.vkey"))
	copyFile(o.VerifierKeyPath, filepath.Join(dir, "kept", "checkpoint.vkey"))
	copyFile(filepath.Join(state, filepath.FromSlash(redact.KeyFile)), filepath.Join(dir, "kept", "command-hmac"))
	copyFile(o.CheckpointLogPath, filepath.Join(dir, "kept-checkpoints.log"))
	data, err := os.ReadFile(o.CheckpointLogPath)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := auditchain.SplitNotes(data)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, nt := range notes {
		c, err := auditchain.ParseCheckpoint(string(nt[:strings.Index(string(nt), "\n\n")+1]))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, c.Size)
	}
	if fmt.Sprint(sizes) != "[1000 2000]" {
		t.Fatalf("checkpoint sizes %v, want [1000 2000] (the page's numbers)", sizes)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd.txt"), []byte(original+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return state
}

// The examples of docs/investigators.md run as written, with the airlock
// binary, against a log the test made; each must exit 0 (the shell runs
// with set -e) and print what the page says it prints. Those for the
// gateway's host get $AIRLOCK_CONFIG, as the page says to set it: a
// configuration whose state directory holds the log. Every sh block of
// the page is run.
func TestDocsInvestigators(t *testing.T) {
	const page = "docs/investigators.md"
	blocks := pageBlocks(t, page, 4)
	airlockBin, _ := binaries(t)
	dir := t.TempDir()
	state := investigatorsLog(t, dir)
	cfg := filepath.Join(t.TempDir(), "airlock.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir = %q\n", state)), 0o600); err != nil {
		t.Fatal(err)
	}
	witnessScript(t, page, len(blocks), filepath.Join(dir, "kept-checkpoints.log"), filepath.Join(dir, "witness"))
	sh := startDocShell(t, page, docEnv("PATH="+filepath.Dir(airlockBin)+":"+os.Getenv("PATH"), "AIRLOCK_CONFIG="+cfg))
	sh.send(fmt.Sprintf("cd %q\n", dir))
	ps := []placeholder{{regexp.MustCompile(`act_…`), func() string { return "act_1" }}}
	want := map[string][]string{
		"audit verify":                {"intact: 2000 entries; 2 checkpoints in the database and 2 kept outside verified"},
		"audit show":                  {"action.requested  run=\n", `command = "deploy --token [redacted:aws-access-key]"`, "action.finished  run=\n", "outcome = \"exited\""},
		"audit export":                {`{"seq":1201,`, `{"seq":1999,`},
		"--key checkpoint.vkey 1234 ": {"entry 1234 (leaf hash", "is in the tree of size 2000", "signed checkpoint:"},
		"audit check-proof":           {"holds: entry 1234", "using note #2 of witness/notes.log (2 in the file): tree size 2000", "holds: the tree of 1000"},
		"audit check-command":         {"action act_1: MATCH: this is the command it ran (outcome exited)"},
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		if b.Background {
			t.Fatalf("%s:%d: nothing on this page runs in the background", page, b.Line)
		}
		out := sh.run(b, fill(t, page, b, ps))
		for key, lines := range want {
			if !strings.Contains(b.Text, key) {
				continue
			}
			seen[key] = true
			for _, l := range lines {
				if !strings.Contains(out, l) {
					t.Errorf("%s:%d: the output lacks %q:\n%s", page, b.Line, l, out)
				}
			}
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("%s: no runnable block runs %q", page, key)
		}
	}
}

// witnessScript runs the page's witness script, the one sh block that is
// not a command to type, as the gateway would run it: once per checkpoint
// of the kept file, the signed note on its standard input. The witness
// mount it names is witnessDir: the page's examples read the notes.log the
// script wrote there (no blank line between notes). Every other sh
// block of the page must be runnable (runnable counts them).
func witnessScript(t *testing.T, page string, runnable int, kept, witnessDir string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), page))
	if err != nil {
		t.Fatal(err)
	}
	const mount = "/mnt/witness"
	var script string
	fences := 0
	for _, b := range strings.Split(string(src), "```sh\n")[1:] {
		fences++
		if body, _, _ := strings.Cut(b, "```"); strings.HasPrefix(body, "#!/bin/sh\n") {
			script = body
		}
	}
	if script == "" || !strings.Contains(script, mount+"/notes.log") {
		t.Fatalf("%s: no witness script appending to %s/notes.log", page, mount)
	}
	if fences != runnable+1 {
		t.Fatalf("%s: %d sh blocks, %d of them runnable: every block but the witness script must be marked runnable", page, fences, runnable)
	}
	file := filepath.Join(t.TempDir(), "push-checkpoint")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(script, mount, witnessDir)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(witnessDir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := auditchain.SplitNotes(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, nt := range notes {
		cmd := exec.Command(file)
		cmd.Stdin = bytes.NewReader(nt)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: the witness script: %v\n%s", page, err, out)
		}
	}
}
