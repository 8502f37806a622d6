package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/redact"
	"github.com/airlockgw/airlock/sshexec/outcome"
)

func auditExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("export", "", stderr, true, false)
	after := f.fs.Int64("after", 0, "export entries with seq greater than `SEQ` (default: all)")
	if _, code, ok := f.parse(args, 0, stdout, stderr); !ok {
		return code
	}
	if !isSet(f.fs, "after") {
		*after = -1 // every entry, seq 0 included
	}
	r, code := openLog(ctx, f, "export", true, stderr)
	if code != exitOK {
		return code
	}
	defer r.Close()
	w := bufio.NewWriterSize(stdout, 64<<10)
	var line []byte
	for rec, err := range r.Entries(ctx, *after) {
		if err == nil {
			if line, err = rec.AppendJSON(line[:0]); err == nil {
				w.Write(line)
				err = w.WriteByte('\n')
			}
		}
		if err != nil {
			w.Flush()
			fmt.Fprintf(stderr, "airlock audit export: %v\n", err)
			return exitFailed
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "airlock audit export: %v\n", err)
		return exitFailed
	}
	return r.exitCode()
}

func auditShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("show", "ACTION_ID", stderr, true, true)
	pos, code, ok := f.parse(args, 1, stdout, stderr)
	if !ok {
		return code
	}
	r, code := openLog(ctx, f, "show", true, stderr)
	if code != exitOK {
		return code
	}
	defer r.Close()
	recs, err := r.ActionEntries(ctx, pos[0])
	if errors.Is(err, auditchain.ErrNotFound) {
		fmt.Fprintf(stderr, "airlock audit show: no entries for action %q\n", pos[0])
		return exitDamaged
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit show: %v\n", err)
		return exitFailed
	}
	for _, rec := range recs {
		if f.jsonOut {
			line, err := rec.MarshalJSON()
			if err != nil {
				fmt.Fprintf(stderr, "airlock audit show: %v\n", err)
				return exitFailed
			}
			fmt.Fprintf(stdout, "%s\n", line)
			continue
		}
		mark := ""
		if rec.Seq >= r.firstBad {
			mark = "  DAMAGED: not vouched for"
		}
		fmt.Fprintf(stdout, "%d  %s  %s  run=%s%s\n", rec.Seq, rec.Time.UTC().Format("2006-01-02T15:04:05.000000000Z"), rec.Kind, visible(rec.RunID), mark)
		for _, fl := range rec.Fields {
			fmt.Fprintf(stdout, "    %s = %s\n", fl.Name, valueText(fl.Value))
		}
	}
	return r.exitCode()
}

// visible is s as it is when it is printable ASCII (backslashes and quotes
// included), and Go-quoted with every other character escaped otherwise:
// control, bidi and format characters, look-alike spaces, invisible letters
// and invalid bytes never reach the terminal, and the quotes say the text
// is escaped. Reviewers decide on what it shows.
func visible(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.QuoteToASCII(v) // the rule of visible, always quoted
	case []byte:
		return hex.EncodeToString(v) // as export writes bytes
	default:
		return fmt.Sprint(v)
	}
}

func auditProve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("prove", "SEQ", stderr, true, true)
	pos, code, ok := f.parse(args, 1, stdout, stderr)
	if !ok {
		return code
	}
	seq, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || seq < 0 {
		fmt.Fprintf(stderr, "airlock audit prove: SEQ %q is not a sequence number\n", pos[0])
		return exitFailed
	}
	r, code := openLog(ctx, f, "prove", false, stderr)
	if code != exitOK {
		return code
	}
	defer r.Close()
	// Without a key (none beside the log, and no --key) the proof is
	// unsigned.
	key, err := auditchain.ReadVerifierKey(f.keyPath())
	if err != nil && f.key != "" {
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitFailed
	}
	p, err := r.ProveSigned(ctx, seq, key)
	var mismatch *auditchain.CheckpointMismatchError
	switch {
	case errors.As(err, &mismatch):
		fmt.Fprintf(stderr, "airlock audit prove: the stored tree disagrees with the signed checkpoint of size %d; run airlock audit verify\n", mismatch.Size)
		return exitDamaged
	case errors.Is(err, auditchain.ErrNotFound):
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitDamaged
	case err != nil:
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitFailed
	}
	signed := p.Checkpoint
	if f.jsonOut {
		return writeJSON(stdout, stderr, struct {
			Seq        int64    `json:"seq"`
			Size       int64    `json:"size"`
			LeafHash   string   `json:"leaf_hash"`
			Root       string   `json:"root"`
			Proof      []string `json:"proof"`
			Checkpoint string   `json:"checkpoint,omitempty"`
		}{p.Seq, p.Size, p.LeafHash.String(), p.Root.String(), hashStrings(p.Proof), string(signed)})
	}
	fmt.Fprintf(stdout, "entry %d (leaf hash %s) is in the tree of size %d, root %s\n", p.Seq, p.LeafHash, p.Size, p.Root)
	if signed != nil {
		fmt.Fprintf(stdout, "signed checkpoint:\n\n%s\n", indent(string(signed)))
	} else {
		fmt.Fprintln(stdout, "no signed checkpoint covers this entry yet: the root above is not signed")
	}
	fmt.Fprintf(stdout, "inclusion proof (RFC 6962 audit path, %d hashes, base64):\n", len(p.Proof))
	for _, h := range p.Proof {
		fmt.Fprintf(stdout, "  %s\n", h)
	}
	return exitOK
}

func auditConsistency(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("consistency", "OLD NEW", stderr, false, true)
	pos, code, ok := f.parse(args, 2, stdout, stderr)
	if !ok {
		return code
	}
	var sizes [2]int64
	for i, s := range pos {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "airlock audit consistency: %q is not a tree size\n", s)
			return exitFailed
		}
		sizes[i] = n
	}
	if sizes[0] > sizes[1] {
		fmt.Fprintf(stderr, "airlock audit consistency: OLD (%d) is larger than NEW (%d): give the older, smaller tree first\n", sizes[0], sizes[1])
		return exitFailed
	}
	r, code := openLog(ctx, f, "consistency", false, stderr)
	if code != exitOK {
		return code
	}
	defer r.Close()
	p, err := r.ProveConsistency(ctx, sizes[0], sizes[1])
	if errors.Is(err, auditchain.ErrNotFound) {
		fmt.Fprintf(stderr, "airlock audit consistency: %v\n", err)
		return exitDamaged
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit consistency: %v\n", err)
		return exitFailed
	}
	if f.jsonOut {
		return writeJSON(stdout, stderr, struct {
			Old     int64    `json:"old"`
			New     int64    `json:"new"`
			OldRoot string   `json:"old_root"`
			NewRoot string   `json:"new_root"`
			Proof   []string `json:"proof"`
		}{p.Old, p.New, p.OldRoot.String(), p.NewRoot.String(), hashStrings(p.Proof)})
	}
	fmt.Fprintf(stdout, "the tree of size %d (root %s)\nis a prefix of the tree of size %d (root %s)\n", p.Old, p.OldRoot, p.New, p.NewRoot)
	fmt.Fprintf(stdout, "consistency proof (RFC 6962, %d hashes, base64):\n", len(p.Proof))
	for _, h := range p.Proof {
		fmt.Fprintf(stdout, "  %s\n", h)
	}
	return exitOK
}

func hashStrings[H ~[32]byte](hs []H) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "airlock audit: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// auditCheckCommand checks a command someone holds against the keyed
// hash recorded beside an action's redacted command.
func auditCheckCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("check-command", "ACTION_ID", stderr, true, false)
	macKey := f.fs.String("command-key", "", "the gateway's command MAC key `FILE` (default: keys/command-hmac next to the database)")
	cmdFile := f.fs.String("command-file", "", "read the original command from `FILE` (default: standard input)")
	pos, code, ok := f.parse(args, 1, stdout, stderr)
	if !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "airlock audit check-command: "+format+"\n", a...)
		return exitFailed
	}
	keyFile := cmp.Or(*macKey, filepath.Join(f.logDir(), filepath.FromSlash(redact.KeyFile)))
	key, err := redact.LoadKey(keyFile)
	if err != nil {
		return fail("%v; pass the key with --command-key FILE", err)
	}
	var in io.Reader = os.Stdin
	if *cmdFile != "" {
		file, err := os.Open(*cmdFile)
		if err != nil {
			return fail("%v", err)
		}
		defer file.Close()
		in = file
	}
	original, err := io.ReadAll(io.LimitReader(in, engine.MaxCommandLen+2))
	if err != nil {
		return fail("read the command: %v", err)
	}
	r, code := openLog(ctx, f, "check-command", true, stderr)
	if code != exitOK {
		return code
	}
	defer r.Close()
	recs, err := r.ActionEntries(ctx, pos[0])
	if err != nil {
		return fail("action %q: %v", pos[0], err)
	}
	for _, rec := range recs {
		if rec.Kind != auditchain.KindActionRequested {
			continue
		}
		if rec.Seq >= r.firstBad {
			return fail("entry %d (action.requested of %s) is past the first damage in the log: it cannot be vouched for", rec.Seq, pos[0])
		}
		var mac []byte
		var rules []string
		for _, fl := range rec.Fields {
			switch fl.Name {
			case "command_hmac":
				mac, _ = fl.Value.([]byte)
			case "redactions":
				if s, ok := fl.Value.(string); ok {
					rules = append(rules, s)
				}
			}
		}
		if mac == nil {
			return fail("action %s's command was stored as it was sent (nothing was redacted): compare it with `airlock audit show %s`", pos[0], pos[0])
		}
		// A command saved to a file usually ends in a newline it did not
		// have: try the bytes as they are, then without that one newline.
		for _, cand := range []string{string(original), strings.TrimSuffix(string(original), "\n")} {
			if redact.CheckMAC(key, cand, mac) {
				fmt.Fprintf(stdout, "action %s: MATCH: this is the command %s (entry %d records its MAC; redactions %s)\n", pos[0], commandFate(recs), rec.Seq, strings.Join(rules, " "))
				return exitOK
			}
		}
		fmt.Fprintf(stdout, "action %s: NO MATCH: this is not the command entry %d records\n", pos[0], rec.Seq)
		return exitDamaged
	}
	return fail("no action.requested entry for action %q", pos[0])
}

// commandFate says what became of an action's command, by the outcome its
// action.finished records: one that was rejected or denied never ran.
func commandFate(recs []auditchain.Record) string {
	name := ""
	for _, rec := range recs {
		if rec.Kind != auditchain.KindActionFinished {
			continue
		}
		for _, fl := range rec.Fields {
			if s, ok := fl.Value.(string); ok && fl.Name == "outcome" {
				name = s
			}
		}
	}
	o, err := outcome.ParseOutcome(name)
	switch {
	case name == "":
		return "it asked to run; no outcome is recorded for it (yet)"
	case err != nil:
		return fmt.Sprintf("it asked to run (outcome %s)", visible(name))
	}
	switch o {
	case outcome.Exited, outcome.Signaled, outcome.ExitMissing, outcome.TimedOut, outcome.ConnectionLost:
		return fmt.Sprintf("it ran (outcome %s)", o)
	case outcome.Cancelled, outcome.Interrupted, outcome.AuditUnavailable:
		return fmt.Sprintf("it asked to run; it may have run (outcome %s)", o)
	}
	return fmt.Sprintf("it asked to run; it never ran (outcome %s)", o)
}
