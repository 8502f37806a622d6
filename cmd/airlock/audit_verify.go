package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockgw/airlock/auditchain"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func auditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("verify", "", stderr, true, true)
	var trustedFiles stringList
	f.fs.Var(&trustedFiles, "trusted-checkpoint", "`FILE` of signed checkpoints kept elsewhere (repeatable)")
	if _, code, ok := f.parse(args, 0, stdout, stderr); !ok {
		return code
	}
	if err := f.checkDB(); err != nil {
		fmt.Fprintf(stderr, "airlock audit verify: could not verify: %v\n", err)
		return exitFailed
	}
	defer f.close()
	key, err := f.verifierKey(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit verify: could not verify: %v; pass the verifier key with --key FILE\n", err)
		return exitFailed
	}
	var trusted []auditchain.TrustedNote
	outside := len(trustedFiles) > 0 // given, so perhaps kept elsewhere
	local := filepath.Join(f.logDir(), "checkpoints.log")
	if _, err := os.Stat(local); err == nil && f.logDir() != "" {
		trustedFiles = append(stringList{local}, trustedFiles...)
	}
	for _, path := range trustedFiles {
		ns, err := auditchain.ReadTrustedNotes(path)
		if err != nil {
			fmt.Fprintf(stderr, "airlock audit verify: could not verify: %v\n", err)
			return exitFailed
		}
		trusted = append(trusted, ns...)
	}
	rep, err := f.verify(ctx, key, trusted)
	if mm := (*auditchain.KeyMismatchError)(nil); errors.As(err, &mm) {
		return wrongKey(mm, f.jsonOut, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit verify: could not verify: %v\n", err)
		return exitFailed
	}
	code := exitOK
	if !rep.Intact() {
		code = exitDamaged
	}
	if f.jsonOut {
		out := struct {
			Status string             `json:"status"`
			First  *auditchain.Damage `json:"first,omitempty"`
			*auditchain.Report
		}{Status: "intact", Report: rep}
		if code != exitOK {
			out.Status, out.First = "damaged", rep.First()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "airlock audit verify: %v\n", err)
			return exitFailed
		}
		return code
	}
	if code == exitOK {
		fmt.Fprintf(stdout, "intact: %s; %s in the database and %d kept outside verified; %s not yet covered by a checkpoint\n",
			count(int(rep.Entries), "entry"), count(rep.Checkpoints, "checkpoint"), rep.TrustedCheckpoints, count(int(rep.Uncovered), "entry"))
		switch {
		case len(trusted) == 0:
			fmt.Fprintln(stdout, "note: no checkpoint kept outside the database was given; a rollback or a rewrite with the signing key would not show (see --trusted-checkpoint)")
		case !outside:
			fmt.Fprintln(stdout, "note: the only checkpoints kept outside the database were read next to it (checkpoints.log); they come from the same machine, so a rollback or a rewrite there would not show: pass --trusted-checkpoint with a copy kept elsewhere")
		}
		switch {
		case f.key == "" && f.keyPath() == "":
			fmt.Fprintln(stdout, "note: the verifier key was read from the database itself; pass --key with a copy you kept to rule out a replaced key")
		case f.key == "":
			fmt.Fprintln(stdout, "note: the verifier key was read next to the database; pass --key with a copy you kept to rule out a replaced key")
		}
		printTimeSetBack(stdout, rep.TimeSetBack)
		return code
	}
	first := rep.First()
	fmt.Fprintf(stdout, "DAMAGED: %s: %s (%s): %s\n", seqText(first.Seq, "first bad seq "), first.Kind, first.Source, first.Detail)
	for i := range rep.Damage {
		if d := &rep.Damage[i]; d != first {
			fmt.Fprintf(stdout, "also: %s: %s (%s): %s\n", seqText(d.Seq, "seq "), d.Kind, d.Source, d.Detail)
		}
	}
	fmt.Fprintf(stdout, "%s, %d verified before the first damaged entry; %d not covered by a checkpoint\n", count(int(rep.Entries), "entry"), rep.Verified, rep.Uncovered)
	if fk := rep.Fork; fk != nil {
		printFork(stdout, fk)
	}
	printTimeSetBack(stdout, rep.TimeSetBack)
	return code
}

// wrongKey reports a verifier key that signed none of the log's
// checkpoints: its own verdict, not damage.
func wrongKey(mm *auditchain.KeyMismatchError, jsonOut bool, stdout, stderr io.Writer) int {
	if jsonOut {
		if code := writeJSON(stdout, stderr, struct {
			Status     string   `json:"status"`
			KeyOrigin  string   `json:"key_origin"`
			LogOrigins []string `json:"log_origins"`
			Detail     string   `json:"detail"`
		}{"wrong_key", mm.KeyOrigin, mm.LogOrigins, mm.Error()}); code != exitOK {
			return code
		}
		return exitWrongKey
	}
	fmt.Fprintf(stdout, "WRONG KEY: %v\n", mm)
	return exitWrongKey
}

// printTimeSetBack explains entry times that go backwards: not damage, but
// an investigator must not read order from those times.
func printTimeSetBack(w io.Writer, t *auditchain.TimeSetBack) {
	if t == nil {
		return
	}
	fmt.Fprintf(w, "note: %s\n", t)
}

// seqText names where damage is: "first bad seq N", or the log as a
// whole when no entry is to blame.
func seqText(seq int64, prefix string) string {
	if seq < 0 {
		return "the log as a whole"
	}
	return prefix + strconv.FormatInt(seq, 10)
}

func printFork(w io.Writer, f *auditchain.Fork) {
	if f.LocalNote == "" {
		// One signed history, and entries that no longer give it: they
		// were rewritten after it was signed (nobody signed theirs).
		fmt.Fprintf(w, "\nREWRITTEN after a signed checkpoint: the checkpoint of size %d from %s says:\n\n%s\n", f.Size, f.Source, indent(f.TrustedNote))
		fmt.Fprintf(w, "The database's entries give root %s at size %d, and no checkpoint in the database signs that root: entries were changed after the checkpoint above was signed.\n", f.LocalRoot, f.Size)
		return
	}
	fmt.Fprintf(w, "\nFORK at tree size %d. The checkpoint from %s says:\n\n%s\n", f.Size, f.Source, indent(f.TrustedNote))
	fmt.Fprintf(w, "The database's entries give root %s at size %d.\n", f.LocalRoot, f.Size)
	fmt.Fprintf(w, "The database's own signed checkpoint (size %d) says:\n\n%s\n", f.LocalSize, indent(f.LocalNote))
	fmt.Fprintf(w, "Consistency proof that the database's tree of size %d (root %s) is a prefix of that checkpoint's tree (RFC 6962, base64):\n", f.Size, f.LocalRoot)
	for _, h := range f.Proof {
		fmt.Fprintf(w, "  %s\n", h)
	}
	fmt.Fprintln(w, "Both notes verify with the same key: the key signed two histories.")
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}
