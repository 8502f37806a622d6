package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockgw/airlock/auditchain"
	gocmp "github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/tlog"
)

// newAuditLog writes a small log into a fresh state dir and returns its
// options.
func newAuditLog(t *testing.T, n int) auditchain.Options {
	t.Helper()
	o := auditchain.DefaultOptions(t.TempDir())
	o.Origin = "cli.test/log"
	o.CheckpointEvery = 5
	o.CheckpointInterval = -1
	ctx := context.Background()
	l, err := auditchain.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		e := auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: fmt.Sprintf("act-%d", i%3), RunID: "run-1",
			Fields: []auditchain.Field{auditchain.Str("command", fmt.Sprintf("echo %d", i)), auditchain.Int("i", int64(i))}}
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return o
}

// Checkpoints and a key read next to the database prove nothing about the
// machine it came from: verify says so until copies kept elsewhere are
// given.
func TestAuditVerifySaysWhatItTrusted(t *testing.T) {
	o := newAuditLog(t, 12)
	code, out, _ := runCLI(t, "audit", "verify", "--db", o.Path)
	for _, want := range []string{"read next to it (checkpoints.log)", "verifier key was read next to the database"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("defaults: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	kept := filepath.Join(t.TempDir(), "kept")
	os.MkdirAll(kept, 0o700)
	ckpts, _ := os.ReadFile(o.CheckpointLogPath)
	vkey, _ := os.ReadFile(o.VerifierKeyPath)
	os.WriteFile(filepath.Join(kept, "checkpoints.log"), ckpts, 0o600)
	os.WriteFile(filepath.Join(kept, "checkpoint.vkey"), vkey, 0o600)
	code, out, _ = runCLI(t, "audit", "verify", "--db", o.Path, "--key", filepath.Join(kept, "checkpoint.vkey"),
		"--trusted-checkpoint", filepath.Join(kept, "checkpoints.log"))
	if code != exitOK || strings.Contains(out, "note:") {
		t.Errorf("with copies kept elsewhere: exit %d, output:\n%s", code, out)
	}
}

func TestAuditVerifyNotesClockSetBack(t *testing.T) {
	o := auditchain.DefaultOptions(t.TempDir())
	o.Origin = "cli.test/log"
	o.CheckpointInterval = -1
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	o.Now = func() time.Time { return now }
	ctx := context.Background()
	l, err := auditchain.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []time.Duration{0, time.Minute, -90 * time.Minute, time.Second, -time.Hour} {
		now = now.Add(step)
		if _, err := l.Append(ctx, auditchain.Entry{Kind: auditchain.KindActionRequested, ActionID: fmt.Sprintf("act-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "audit", "verify", "--db", o.Path)
	want := "note: 2 entries have a time earlier than the entry before (first at seq 2, by up to 1h30m0s)"
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("exit %d, output:\n%s\nwant a line with %q", code, out, want)
	}
	code, out, _ = runCLI(t, "audit", "verify", "--db", o.Path, "--json")
	var got struct {
		Status      string                  `json:"status"`
		TimeSetBack *auditchain.TimeSetBack `json:"time_set_back"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if wantJSON := (auditchain.TimeSetBack{Entries: 2, FirstSeq: 2, Largest: 90 * time.Minute}); got.Status != "intact" || got.TimeSetBack == nil || *got.TimeSetBack != wantJSON {
		t.Errorf("--json: status %q, time_set_back %+v; want intact, %+v", got.Status, got.TimeSetBack, wantJSON)
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

func editDB(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{`DROP TRIGGER entries_no_update`, stmt} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

type firstJSON struct {
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
}

type verifyJSON struct {
	Status    string     `json:"status"`
	First     *firstJSON `json:"first"`
	Entries   int64      `json:"entries"`
	Uncovered int64      `json:"uncovered"`
}

func TestAuditVerifyExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     func(o auditchain.Options) []string
		prepare  func(t *testing.T, o auditchain.Options)
		wantCode int
		want     verifyJSON // checked when the code is 0 or 1
	}{
		{
			name:     "intact",
			args:     func(o auditchain.Options) []string { return []string{"--db", o.Path} },
			wantCode: exitOK,
			want:     verifyJSON{Status: "intact", Entries: 14},
		},
		{
			name: "modified entry",
			args: func(o auditchain.Options) []string { return []string{"--db", o.Path} },
			prepare: func(t *testing.T, o auditchain.Options) {
				editDB(t, o.Path, `UPDATE entries SET chain = zeroblob(32) WHERE seq = 7`)
			},
			wantCode: exitDamaged,
			want:     verifyJSON{Status: "damaged", First: &firstJSON{7, "modified"}, Entries: 14, Uncovered: 9},
		},
		{
			name: "rolled back against a trusted copy",
			args: func(o auditchain.Options) []string {
				return []string{"--db", o.Path, "--trusted-checkpoint", filepath.Join(filepath.Dir(o.Path), "kept-elsewhere.log")}
			},
			prepare: func(t *testing.T, o auditchain.Options) {
				data, _ := os.ReadFile(o.CheckpointLogPath)
				os.WriteFile(filepath.Join(filepath.Dir(o.Path), "kept-elsewhere.log"), data, 0o644)
				os.Remove(o.CheckpointLogPath)
				db, _ := sql.Open("sqlite3", "file:"+o.Path)
				defer db.Close()
				for _, s := range []string{`DROP TRIGGER entries_no_delete`, `DROP TRIGGER checkpoints_no_delete`, `DROP TRIGGER tree_hashes_no_delete`,
					`DELETE FROM entries WHERE seq >= 10`, `DELETE FROM checkpoints WHERE size > 10`, `DELETE FROM tree_hashes WHERE idx >= 18`} {
					if _, err := db.Exec(s); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantCode: exitDamaged,
		},
		{
			name: "missing verifier key",
			args: func(o auditchain.Options) []string {
				return []string{"--db", o.Path, "--key", filepath.Join(t.TempDir(), "none.vkey")}
			},
			wantCode: exitFailed,
		},
		{
			name:     "missing database",
			args:     func(o auditchain.Options) []string { return []string{"--db", filepath.Join(t.TempDir(), "none.db")} },
			wantCode: exitFailed,
		},
		{
			name: "not a database",
			args: func(o auditchain.Options) []string { return []string{"--db", o.Path} },
			prepare: func(t *testing.T, o auditchain.Options) {
				os.Remove(o.Path + "-wal")
				os.Remove(o.Path + "-shm")
				os.WriteFile(o.Path, bytes.Repeat([]byte("not sqlite "), 100), 0o600)
			},
			wantCode: exitFailed,
		},
		{
			name:     "bad flag",
			args:     func(o auditchain.Options) []string { return []string{"--nope"} },
			wantCode: exitFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newAuditLog(t, 12)
			if tt.prepare != nil {
				tt.prepare(t, o)
			}
			args := append([]string{"audit", "verify"}, tt.args(o)...)
			code, _, stderr := runCLI(t, args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, stderr)
			}
			code, stdout, _ := runCLI(t, append(args, "--json")...)
			if code != tt.wantCode || code == exitFailed {
				return
			}
			var got verifyJSON
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("--json output: %v\n%s", err, stdout)
			}
			if tt.want.Status == "" {
				return
			}
			if diff := gocmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verify --json (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAuditVerifyPrintsFork(t *testing.T) {
	o := newAuditLog(t, 12)
	kept := filepath.Join(t.TempDir(), "kept.log")
	data, _ := os.ReadFile(o.CheckpointLogPath)
	os.WriteFile(kept, data, 0o644)
	// Rewrite the whole log with the same key, as a thief would.
	os.Remove(o.Path)
	os.Remove(o.Path + "-wal")
	os.Remove(o.Path + "-shm")
	os.Remove(o.CheckpointLogPath)
	ctx := context.Background()
	l, err := auditchain.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		l.Append(ctx, auditchain.Entry{Kind: auditchain.KindRunCreated, RunID: fmt.Sprint("forged-", i)})
	}
	l.Close(ctx)
	code, stdout, stderr := runCLI(t, "audit", "verify", "--db", o.Path, "--trusted-checkpoint", kept)
	if code != exitDamaged {
		t.Fatalf("exit %d, want 1; stderr %s", code, stderr)
	}
	for _, want := range []string{"FORK", "cli.test/log\n", "Consistency proof"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "— cli.test/log "); n != 2 {
		t.Errorf("output shows %d signed notes, want both:\n%s", n, stdout)
	}
}

func TestAuditExport(t *testing.T) {
	o := newAuditLog(t, 12)
	code, stdout, stderr := runCLI(t, "audit", "export", "--db", o.Path, "--after", "3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	want := int64(4)
	for sc.Scan() {
		var line struct {
			Seq       int64          `json:"seq"`
			Kind      string         `json:"kind"`
			Fields    map[string]any `json:"fields"`
			Leaf      []byte         `json:"leaf"`
			LeafHash  string         `json:"leaf_hash"`
			ChainHash string         `json:"chain_hash"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if line.Seq != want {
			t.Fatalf("seq %d, want %d", line.Seq, want)
		}
		e, err := auditchain.DecodeLeaf(line.Leaf)
		if err != nil || e.Seq != line.Seq || e.Kind.String() != line.Kind {
			t.Errorf("leaf of %d does not match the line: %+v, %v", line.Seq, e, err)
		}
		if lh, err := base64.StdEncoding.DecodeString(line.LeafHash); err != nil || len(lh) != 32 {
			t.Errorf("leaf hash not a base64 SHA-256 (as proofs write it): %q", line.LeafHash)
		}
		if ch, err := base64.StdEncoding.DecodeString(line.ChainHash); err != nil || len(ch) != 32 {
			t.Errorf("chain hash not a base64 SHA-256: %q", line.ChainHash)
		}
		want++
	}
	if want != 14 {
		t.Errorf("exported up to seq %d, want 13", want-1)
	}
}

func TestAuditShowProveConsistency(t *testing.T) {
	o := newAuditLog(t, 12)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{"show", []string{"show", "--db", o.Path, "act-1"}, exitOK, []string{"action.requested", `command = "echo 1"`, `command = "echo 10"`}},
		{"show flags after the argument", []string{"show", "act-2", "--db", o.Path}, exitOK, []string{`command = "echo 2"`}},
		{"show unknown action", []string{"show", "--db", o.Path, "nope"}, exitDamaged, nil},
		{"prove covered entry", []string{"prove", "--db", o.Path, "3"}, exitOK, []string{"entry 3", "signed checkpoint", "— cli.test/log"}},
		{"prove out of range", []string{"prove", "--db", o.Path, "99"}, exitDamaged, nil},
		{"prove bad seq", []string{"prove", "--db", o.Path, "x"}, exitFailed, nil},
		{"consistency", []string{"consistency", "--db", o.Path, "5", "14"}, exitOK, []string{"size 5", "size 14"}},
		{"consistency backwards", []string{"consistency", "--db", o.Path, "9", "5"}, exitFailed, nil},
		{"consistency missing argument", []string{"consistency", "--db", o.Path, "5"}, exitFailed, nil},
		{"unknown verb", []string{"frobnicate"}, exitFailed, nil},
		{"help", []string{"help"}, exitOK, []string{"verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"audit"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, stderr)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestAuditProveJSONChecks(t *testing.T) {
	o := newAuditLog(t, 12)
	code, stdout, stderr := runCLI(t, "audit", "prove", "--db", o.Path, "--json", "7")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p struct {
		Seq, Size  int64
		LeafHash   string `json:"leaf_hash"`
		Root       string
		Proof      []string
		Checkpoint string
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	v, err := auditchain.ReadVerifierKey(o.VerifierKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := auditchain.OpenCheckpoint([]byte(p.Checkpoint), v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != p.Size || c.Root.String() != p.Root || p.Size <= 7 {
		t.Errorf("proof for size %d root %s, checkpoint %+v", p.Size, p.Root, c)
	}
}

// A stored tree that no longer gives the root of the checkpoint covering
// the entry proves nothing: prove exits 1 and sends to verify.
func TestAuditProveRefusesATreeTheCheckpointContradicts(t *testing.T) {
	o := newAuditLog(t, 12)
	db, err := sql.Open("sqlite3", "file:"+o.Path)
	if err != nil {
		t.Fatal(err)
	}
	// The first checkpoint is of 5 entries; leaf 4 is in entry 0's proof
	// and in that tree's root.
	for _, s := range []string{`DROP TRIGGER tree_hashes_no_update`, `UPDATE tree_hashes SET hash = zeroblob(32) WHERE idx = ` + strconv.FormatInt(tlog.StoredHashIndex(0, 4), 10)} {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()
	code, stdout, stderr := runCLI(t, "audit", "prove", "--db", o.Path, "0")
	if code != exitDamaged || stdout != "" || !strings.Contains(stderr, "signed checkpoint of size 5; run airlock audit verify") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and the checkpoint it contradicts", code, stdout, stderr, exitDamaged)
	}
}

func TestAuditDefaultDBFromStateDir(t *testing.T) {
	o := newAuditLog(t, 3)
	t.Setenv("AIRLOCK_STATE_DIR", filepath.Dir(o.Path))
	if code, _, stderr := runCLI(t, "audit", "verify"); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// The per-verb help gives the --db default the resolution actually uses.
func TestAuditDBFlagHelp(t *testing.T) {
	for _, verb := range []string{"verify", "export", "show", "prove", "consistency"} {
		code, stdout, _ := runCLI(t, "audit", verb, "--help")
		if code != exitOK || strings.Contains(stdout, `(default "audit.db")`) || !strings.Contains(stdout, "--config's state directory") {
			t.Errorf("airlock audit %s --help: exit %d, the -db flag's default is not described as resolved:\n%s", verb, code, stdout)
		}
	}
}

// Without a database or a configuration, the verbs say what to pass.
func TestAuditNoDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("AIRLOCK_STATE_DIR", "")
	t.Setenv("AIRLOCK_CONFIG", "")
	for _, args := range [][]string{{"show", "act-1"}, {"verify"}, {"export"}} {
		code, _, stderr := runCLI(t, append([]string{"audit"}, args...)...)
		if code != exitFailed || !strings.Contains(stderr, "--db FILE") || !strings.Contains(stderr, "--config FILE") {
			t.Errorf("airlock audit %s: exit %d, stderr %q; want %d and what to pass", args[0], code, stderr, exitFailed)
		}
	}
}

// Text shows as it is when it is printable ASCII, and quoted with every
// other character escaped otherwise: nothing hidden reaches a reviewer's
// terminal.
func TestVisible(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`printf 'h\303\251'`, `printf 'h\303\251'`},
		{`echo "cafe" > /tmp/x && ls`, `echo "cafe" > /tmp/x && ls`},
		{`echo "café"`, `"echo \"caf\u00e9\""`},
		{"echo hidden", `"echo\u00a0hidden"`},
		{"ㅤ", `"\u3164"`},
		{"echo a\nb", `"echo a\nb"`},
		{"ls\t-l", `"ls\t-l"`},
		{"echo \x1b[31mred", `"echo \x1b[31mred"`},
		{"rm -rf /tmp/\u202egnp.exe", `"rm -rf /tmp/\u202egnp.exe"`},
		{"bad \xff byte", `"bad \xff byte"`},
	} {
		if got := visible(tt.in); got != tt.want {
			t.Errorf("visible(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// audit show prints field values as visible does, quoted: a look-alike
// space or a bidi override in a recorded command never reaches the
// terminal as it is.
func TestValueTextEscapesAllButASCII(t *testing.T) {
	for in, want := range map[string]string{
		"systemctl restart worker": `"systemctl restart worker"`,
		"rm\u00a0-rf /":            `"rm\u00a0-rf /"`,
		"ls \u202egnp":             `"ls \u202egnp"`,
	} {
		if got := valueText(in); got != want {
			t.Errorf("valueText(%q) = %s, want %s", in, got, want)
		}
	}
}

// show and export verify what they read: a forged entry comes out marked,
// with the damage on stderr and exit 1 — never a clean print with exit 0.
func TestAuditShowAndExportVerifyAsTheyRead(t *testing.T) {
	o := newAuditLog(t, 12)
	editDB(t, o.Path, `UPDATE entries SET chain = zeroblob(32) WHERE seq = 7`)
	code, out, errs := runCLI(t, "audit", "export", "--db", o.Path)
	if code != exitDamaged || !strings.Contains(errs, "DAMAGED") || strings.Count(out, "\n") != 14 {
		t.Errorf("export of a forged log: exit %d, %d lines, stderr %q", code, strings.Count(out, "\n"), errs)
	}
	code, out, errs = runCLI(t, "audit", "show", "--db", o.Path, "act-1")
	if code != exitDamaged || !strings.Contains(errs, "DAMAGED") || !strings.Contains(out, "DAMAGED: not vouched for") {
		t.Errorf("show of a forged log: exit %d: %s %s", code, out, errs)
	}
}

// A proof from prove --json or consistency --json checks offline, against a
// signed checkpoint and the kept key alone; a proof altered in any hash
// does not hold.
func TestAuditCheckProof(t *testing.T) {
	o := newAuditLog(t, 12)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	code, out, errs := runCLI(t, "audit", "prove", "--db", o.Path, "--json", "3")
	if code != exitOK {
		t.Fatalf("prove: %d %s", code, errs)
	}
	inclusion := write("inclusion.json", out)
	if code, out, errs := runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, inclusion); code != exitOK || !strings.Contains(out, "holds: entry 3") {
		t.Errorf("check-proof of an inclusion proof: exit %d: %s %s", code, out, errs)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	lh := p["leaf_hash"].(string)
	bad := []byte(lh)
	if bad[0] == 'A' {
		bad[0] = 'B'
	} else {
		bad[0] = 'A'
	}
	p["leaf_hash"] = string(bad)
	altered, _ := json.Marshal(p)
	if code, out, _ := runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, write("altered.json", string(altered))); code != exitDamaged || !strings.Contains(out, "DOES NOT HOLD") {
		t.Errorf("check-proof of an altered proof: exit %d: %s", code, out)
	}

	// Consistency, against a note of the newer size kept elsewhere.
	data, err := os.ReadFile(o.CheckpointLogPath)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := auditchain.SplitNotes(data)
	if err != nil || len(notes) < 2 {
		t.Fatalf("%d notes: %v", len(notes), err)
	}
	last := notes[len(notes)-1]
	c, err := auditchain.ParseCheckpoint(string(last[:strings.Index(string(last), "\n\n")+1]))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "audit", "consistency", "--db", o.Path, "--json", "5", strconv.FormatInt(c.Size, 10))
	if code != exitOK {
		t.Fatalf("consistency: %d %s", code, errs)
	}
	cons := write("consistency.json", out)
	kept := write("kept-note", string(last))
	if code, out, errs := runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, "--checkpoint", kept, cons); code != exitOK || !strings.Contains(out, "holds: the tree of 5") {
		t.Errorf("check-proof of a consistency proof: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "audit", "check-proof", "--key", o.VerifierKeyPath, cons); code != exitFailed || !strings.Contains(errs, "--checkpoint") {
		t.Errorf("a consistency proof without a checkpoint: exit %d: %s", code, errs)
	}
}
