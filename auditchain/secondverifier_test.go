package auditchain

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The second verifier, deploy/verifier/airlock-verify.py, is written in
// Python from the formats docs/audit.md gives. On every case of the tamper
// catalogue and on intact logs it must reach Verify's verdict: intact,
// damaged with the same first damaged entry (or the log as a whole), or
// the key is not this log's.

const secondVerifier = "../deploy/verifier/airlock-verify.py"

// pythonWithEd25519 returns the executable of a Python 3 that has the
// cryptography package: the first python3 on PATH may be a build of its
// own without it, or a shim (pyenv's) that costs seconds per start.
func pythonWithEd25519(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import sys, cryptography.hazmat.primitives.asymmetric.ed25519; print(sys.executable)").Output()
		if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
			return exe
		}
	}
	msg := "no python3 with the cryptography package (install: apt-get install -y python3 python3-cryptography; make test-deps does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// A verdict is what both verifiers must agree on.
type verdict struct {
	Verdict string `json:"verdict"` // intact, damaged, key_mismatch
	First   *int64 `json:"first"`   // the first damaged entry; nil for the log as a whole
}

func (v verdict) String() string {
	if v.First == nil {
		return v.Verdict
	}
	return fmt.Sprintf("%s at %d", v.Verdict, *v.First)
}

// goVerdict reads Verify's report as the second verifier states its
// verdict: no checkpoint verified and every finding an unknown key is the
// wrong key, not damage.
func goVerdict(rep *Report) verdict {
	if rep.Intact() {
		return verdict{Verdict: "intact"}
	}
	wrongKey := rep.Checkpoints == 0
	for _, d := range rep.Damage {
		wrongKey = wrongKey && d.Kind == DamageUnknownKey
	}
	if wrongKey {
		return verdict{Verdict: "key_mismatch"}
	}
	v := verdict{Verdict: "damaged"}
	if f := rep.First(); f.Seq >= 0 {
		v.First = &f.Seq
	}
	return v
}

var verdictExit = map[string]int{"intact": 0, "damaged": 1, "key_mismatch": 3}

// runSecondVerifier runs the Python verifier on a log and returns its
// verdict, checking that its exit code says the same.
func runSecondVerifier(t *testing.T, py, db, vkey string, trusted ...string) verdict {
	t.Helper()
	args := []string{secondVerifier, "--json", "--key", vkey}
	for _, f := range trusted {
		args = append(args, "--trusted-checkpoint", f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, append(args, db)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", secondVerifier, err)
	}
	var got verdict
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%s exited %d: %v\nstdout: %s\nstderr: %s", secondVerifier, code, err, stdout.String(), stderr.String())
	}
	if want, ok := verdictExit[got.Verdict]; !ok || code != want {
		t.Errorf("verdict %s with exit code %d, want exit code %d\nstderr: %s", got, code, want, stderr.String())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("second verifier: %s", stdout.String())
	}
	return got
}

// checkAgree verifies the log of o with both verifiers and compares.
func checkAgree(t *testing.T, py string, o Options, vkeyPath string, trusted bool) {
	t.Helper()
	v, err := ReadVerifierKey(vkeyPath)
	if err != nil {
		t.Fatal(err)
	}
	var notes []TrustedNote
	var files []string
	if trusted {
		notes, files = trustedFile(t, o), []string{o.CheckpointLogPath}
	}
	rep := verify(t, o, v, notes...)
	want := goVerdict(rep)
	got := runSecondVerifier(t, py, o.Path, vkeyPath, files...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second verifier disagrees with Verify (-Verify +airlock-verify.py):\n%s\nVerify found: %+v", diff, rep.Damage)
	}
}

func TestSecondVerifierAgreesOnTheTamperCatalogue(t *testing.T) {
	py := pythonWithEd25519(t)
	for _, tt := range tamperCatalogue {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			o.CheckpointEvery = 10
			buildLog(t, o, catalogueAppends)
			tamperKeep(t, o.Path, !tt.dropTriggers, func(db *sql.DB) { tt.tamper(t, o, db) })
			checkAgree(t, py, o, o.VerifierKeyPath, tt.trusted)
		})
	}
}

func TestSecondVerifierAgreesOnIntactLogs(t *testing.T) {
	py := pythonWithEd25519(t)
	for _, n := range []int{0, 1, 2, 3, 7, 16, 33, 200} {
		for _, every := range []int{0, 4} {
			t.Run(fmt.Sprintf("%d entries, checkpoint every %d", n, every), func(t *testing.T) {
				o := testOptions(t)
				o.CheckpointEvery = every
				buildLog(t, o, n)
				checkAgree(t, py, o, o.VerifierKeyPath, n > 0)
				v, err := ReadVerifierKey(o.VerifierKeyPath)
				if err != nil {
					t.Fatal(err)
				}
				if rep := verify(t, o, v); !rep.Intact() {
					t.Errorf("Verify: %+v, want intact", rep.Damage) // both agreeing on damage would pass above
				}
			})
		}
	}
}

// A key that did not sign the log is its own verdict for the second
// verifier: of the same name (a key generated again), or of another.
func TestSecondVerifierAgreesOnTheWrongKey(t *testing.T) {
	py := pythonWithEd25519(t)
	o := testOptions(t)
	o.CheckpointEvery = 10
	buildLog(t, o, catalogueAppends)
	for _, name := range []string{o.Origin, "other.test/log"} {
		t.Run(name, func(t *testing.T) {
			_, vkey, err := note.GenerateKey(rand.Reader, name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "other.vkey")
			if err := os.WriteFile(path, []byte(vkey+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			v, err := ReadVerifierKey(path)
			if err != nil {
				t.Fatal(err)
			}
			var mismatch *KeyMismatchError
			if _, err := Verify(context.Background(), VerifyOptions{Path: o.Path, Key: v}); !errors.As(err, &mismatch) {
				t.Errorf("Verify: %v, want a key mismatch", err)
			}
			if got := runSecondVerifier(t, py, o.Path, path); got.Verdict != "key_mismatch" {
				t.Errorf("verdict %s, want key_mismatch", got)
			}
		})
	}
}

// The program's own usage errors and unusable inputs exit 2, as
// `airlock audit verify` does when it could not verify.
func TestSecondVerifierCouldNotVerify(t *testing.T) {
	py := pythonWithEd25519(t)
	o := testOptions(t)
	buildLog(t, o, 3)
	bad := filepath.Join(t.TempDir(), "bad.vkey")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no such database":      {"--key", o.VerifierKeyPath, filepath.Join(t.TempDir(), "audit.db")},
		"not a verifier key":    {"--key", bad, o.Path},
		"not a checkpoint file": {"--key", o.VerifierKeyPath, "--trusted-checkpoint", bad, o.Path},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr strings.Builder
			cmd := exec.Command(py, append([]string{secondVerifier}, args...)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("exit: %v, want exit code 2\nstderr: %s", err, stderr.String())
			}
		})
	}
}

// The worked example of docs/audit.md ("Verifying without airlock") is
// what the log computes: the verifier key of the Ed25519 key whose seed is
// 32 bytes of 0x2a, the leaf, leaf hash and chain of the example entry at
// seq 0, and a checkpoint signed over it and the same entry at seq 1.
func TestSecondVerifierDocExample(t *testing.T) {
	const (
		vkey     = "airlock/example/K4QZ7MXJ2A+83aa4310+ARl/ayPhbIUyxqvIOPrNXqeJvgx2spIDNAOb+os9No1h"
		leaf0    = "01000000000000000001020304050607080972756e2e656e6465640001610002726e00040162030101640400000001ff016e02ffffffffffffffff0173010000000178"
		leafHash = "8f41e2caed5250797adc5a601ab29a5c6fd61a0dad59d161630f07f688b702ed"
		chain0   = "d83084fca8cd46f0e71fcd7242066eb5ced792370143c47c823e463acdcaedc2"
		ckpt     = "airlock/example/K4QZ7MXJ2A\n2\ndpBDnDpr+93gk80ZRtVfrM+uhsH5r1ird9Ubier6GAs=\n\n" +
			"— airlock/example/K4QZ7MXJ2A g6pDEIQesy7H63C2i9J6GbJmqBiLqeSQq9R0Y9Yrx1C0nGzthLvD2FM2qYi9d/h0tW7u86FZfS7GAcMSZSk75JRh/Q0=\n"
	)
	e := Entry{Seq: 0, Time: time.Unix(0, 0x0102030405060708), Kind: KindRunEnded, ActionID: "a", RunID: "rn",
		Fields: []Field{Str("s", "x"), Int("n", -1), Bytes("d", []byte{0xff}), Bool("b", true)}}
	leaf, err := EncodeLeaf(e)
	if err != nil {
		t.Fatal(err)
	}
	lh, c := tlog.RecordHash(leaf), ChainHash(chainGenesis, leaf)
	got := []string{hex.EncodeToString(leaf), hex.EncodeToString(lh[:]), hex.EncodeToString(c[:])}
	if diff := cmp.Diff([]string{leaf0, leafHash, chain0}, got); diff != "" {
		t.Errorf("leaf, leaf hash, chain (-doc +computed):\n%s", diff)
	}
	e.Seq = 1
	leaf1, err := EncodeLeaf(e)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseVerifierKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := OpenCheckpoint([]byte(ckpt), v)
	if err != nil {
		t.Fatal(err)
	}
	if want := tlog.NodeHash(lh, tlog.RecordHash(leaf1)); cp.Size != 2 || cp.Root != want {
		t.Errorf("checkpoint %d %s, want 2 %s", cp.Size, cp.Root, want)
	}
	doc, err := os.ReadFile("../docs/audit.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{vkey, leafHash, chain0, ckpt} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/audit.md does not show %q", s)
		}
	}
}
