package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/redact"
)

// The investigator's tools: check-proof against a witness file, a wrong
// key as its own verdict, check-command's wording, export's escaping.

// A witness keeps every note in one file, as checkpoints.log does:
// check-proof picks the note of the proof's size signed by the key, and
// says which it used.
func TestAuditCheckProofPicksTheNoteFromAWitnessFile(t *testing.T) {
	o := newAuditLog(t, 17)
	dir := t.TempDir()
	data, err := os.ReadFile(o.CheckpointLogPath)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := auditchain.SplitNotes(data)
	if err != nil || len(notes) < 3 {
		t.Fatalf("%d notes: %v", len(notes), err)
	}
	// As `cat >> notes.log` appends them: no blank line between.
	witness := filepath.Join(dir, "notes.log")
	if err := os.WriteFile(witness, bytes.Join(notes, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := auditchain.ParseCheckpoint(string(notes[1][:bytes.Index(notes[1], []byte("\n\n"))+1]))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "audit", "consistency", "--db", o.Path, "--json", "2", strconv.FormatInt(second.Size, 10))
	if code != exitOK {
		t.Fatalf("consistency: %d %s", code, errs)
	}
	proof := filepath.Join(dir, "proof.json")
	os.WriteFile(proof, []byte(out), 0o600)
	code, out, errs = runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, "--checkpoint", witness, proof)
	wantUsing := fmt.Sprintf("using note #2 of %s (%d in the file): tree size %d", witness, len(notes), second.Size)
	if code != exitOK || !strings.Contains(out, wantUsing) || !strings.Contains(out, "holds:") {
		t.Errorf("exit %d, want 0 and %q:\n%s%s", code, wantUsing, out, errs)
	}

	// A proof for a size no note has: it could not be checked, and the
	// sizes the file has are named.
	code, out, _ = runCLI(t, "audit", "consistency", "--db", o.Path, "--json", "2", "7")
	os.WriteFile(proof, []byte(out), 0o600)
	code, _, errs = runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, "--checkpoint", witness, proof)
	if code != exitFailed || !strings.Contains(errs, "no note in it is of tree size 7") {
		t.Errorf("a size no note has: exit %d, want %d:\n%s", code, exitFailed, errs)
	}

	// Another log's key: its own verdict.
	other := newAuditLog(t, 6)
	code, _, errs = runCLI(t, "audit", "check-proof", "--key", other.VerifierKeyPath, "--checkpoint", witness, proof)
	if code != exitWrongKey || !strings.Contains(errs, "did not sign this log") {
		t.Errorf("another key: exit %d, want %d:\n%s", code, exitWrongKey, errs)
	}
}

// A verifier key that signed none of the log's checkpoints is its own
// verdict and exit code, said once: not one unknown_key damage per
// checkpoint.
func TestAuditVerifyWrongKey(t *testing.T) {
	o := newAuditLog(t, 30)
	dir := t.TempDir()
	otherOrigin := auditchain.DefaultOptions(dir)
	otherOrigin.Origin = "other.test/log"
	sameOrigin := auditchain.DefaultOptions(t.TempDir())
	sameOrigin.Origin = o.Origin
	for _, tc := range []struct {
		name string
		o    auditchain.Options
		want []string
	}{
		{"another origin", otherOrigin, []string{"WRONG KEY: this key (origin other.test/log) did not sign this log (origin cli.test/log)"}},
		{"the same origin, another key", sameOrigin, []string{"WRONG KEY: this key (origin cli.test/log, key hash", "re-signed with another key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := auditchain.Open(context.Background(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			l.Close(context.Background())
			code, out, errs := runCLI(t, "audit", "verify", "--db", o.Path, "--key", tc.o.VerifierKeyPath)
			for _, want := range tc.want {
				if code != exitWrongKey || !strings.Contains(out, want) {
					t.Errorf("exit %d (want %d), output lacks %q:\n%s%s", code, exitWrongKey, want, out, errs)
				}
			}
			if strings.Contains(out, "DAMAGED") || strings.Count(out, "\n") != 1 {
				t.Errorf("want one line and no damage:\n%s", out)
			}
			code, out, _ = runCLI(t, "audit", "verify", "--db", o.Path, "--key", tc.o.VerifierKeyPath, "--json")
			var got struct {
				Status    string `json:"status"`
				KeyOrigin string `json:"key_origin"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitWrongKey || got.Status != "wrong_key" || got.KeyOrigin != tc.o.Origin {
				t.Errorf("--json: exit %d, %v: %s", code, err, out)
			}
			// The verbs that verify before they read say it as verify
			// does: exit 3, one line naming both origins, nothing printed.
			cmdFile := filepath.Join(dir, "cmd.txt")
			os.WriteFile(cmdFile, []byte("echo 1\n"), 0o600)
			macKey := filepath.Join(dir, "command-hmac")
			if _, err := redact.LoadOrCreateKey(macKey); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"show", "act-1"}, {"export"}, {"check-command", "--command-key", macKey, "--command-file", cmdFile, "act-1"},
			} {
				verb := args[0]
				args = append([]string{"audit", verb, "--db", o.Path, "--key", tc.o.VerifierKeyPath}, args[1:]...)
				code, out, errs := runCLI(t, args...)
				if code != exitWrongKey || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "airlock audit "+verb+": "+tc.want[0]) {
					t.Errorf("%s: exit %d (want %d), want one line with %q on stderr and nothing on stdout:\n%s%s", verb, code, exitWrongKey, tc.want[0], out, errs)
				}
			}
		})
	}
}

// check-command words its match by what became of the action: a rejected
// action's command never ran.
func TestAuditCheckCommandSaysWhetherItRan(t *testing.T) {
	for _, tc := range []struct{ outcome, want string }{
		{"exited", "MATCH: this is the command it ran (outcome exited)"},
		{"rejected", "MATCH: this is the command it asked to run; it never ran (outcome rejected)"},
		{"denied", "it never ran (outcome denied)"},
		{"interrupted", "it may have run (outcome interrupted)"},
		{"", "no outcome is recorded for it"},
	} {
		t.Run(cmp.Or(tc.outcome, "none"), func(t *testing.T) {
			o := auditchain.DefaultOptions(t.TempDir())
			o.Origin = "cli.test/log"
			ctx := context.Background()
			key, err := redact.LoadOrCreateKey(filepath.Join(filepath.Dir(o.Path), filepath.FromSlash(redact.KeyFile)))
			if err != nil {
				t.Fatal(err)
			}
			const original = "deploy --token AKIAIOSFODNN7EXAMPLE"
			mac := redact.MAC(key, original)
			l, err := auditchain.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			entries := []auditchain.Entry{{Kind: auditchain.KindActionRequested, ActionID: "act_1", Fields: []auditchain.Field{
				auditchain.Str("command", "deploy --token [redacted:aws-access-key]"), auditchain.Bytes("command_hmac", mac[:]),
				auditchain.Str("redactions", "aws-access-key")}}}
			if tc.outcome != "" {
				entries = append(entries, auditchain.Entry{Kind: auditchain.KindActionFinished, ActionID: "act_1",
					Fields: []auditchain.Field{auditchain.Str("outcome", tc.outcome)}})
			}
			for _, e := range entries {
				if _, err := l.Append(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			l.Close(ctx)
			file := filepath.Join(t.TempDir(), "cmd.txt")
			os.WriteFile(file, []byte(original+"\n"), 0o600)
			code, out, errs := runCLI(t, "audit", "check-command", "--db", o.Path, "--command-file", file, "act_1")
			if code != exitOK || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 0 and %q:\n%s%s", code, tc.want, out, errs)
			}
		})
	}
}

// export escapes what show escapes: its lines are ASCII, and a JSON
// parser reads the very strings that were logged.
func TestAuditExportEscapesBidi(t *testing.T) {
	o := auditchain.DefaultOptions(t.TempDir())
	o.Origin = "cli.test/log"
	ctx := context.Background()
	l, err := auditchain.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	const command = "echo \u202egnp.exe\u202c \U0001F600 caf\u00e9"
	if _, err := l.Append(ctx, auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: "act_1",
		Fields: []auditchain.Field{auditchain.Str("command", command)}}); err != nil {
		t.Fatal(err)
	}
	l.Close(ctx)
	code, out, errs := runCLI(t, "audit", "export", "--db", o.Path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for i := 0; i < len(out); i++ {
		if out[i] >= 0x80 {
			t.Fatalf("export printed a byte outside ASCII at %d:\n%s", i, out)
		}
	}
	if !strings.Contains(out, `echo \u202egnp.exe\u202c \ud83d\ude00 caf\u00e9`) {
		t.Errorf("export does not escape the command as expected:\n%s", out)
	}
	var line struct {
		Fields struct {
			Command string `json:"command"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &line); err != nil || line.Fields.Command != command {
		t.Errorf("decoded command %q (%v), want %q", line.Fields.Command, err, command)
	}
}
