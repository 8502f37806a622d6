package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
	"github.com/airlockgw/airlock/gateway/redact"
	"golang.org/x/mod/sumdb/note"
)

// Exit codes of "airlock audit verify" (contract): intact, damage found,
// could not verify. The other audit verbs use 0, 1 (not found) and 2.
const (
	exitOK      = 0
	exitDamaged = 1
	exitFailed  = 2
)

const auditUsage = `usage: airlock audit VERB [flags] [args]

verbs:
  verify [--db FILE] [--key FILE] [--trusted-checkpoint FILE]... [--json]
      rehash and check the whole log; exit 0 intact, 1 damage found
      (the first bad seq and the kind are printed), 2 could not verify
  export [--db FILE] [--key FILE] [--after SEQ]
      every entry with seq > SEQ as JSON Lines on stdout; the log is
      verified first: damage is said on stderr and the exit status is 1
  show [--db FILE] [--key FILE] [--json] ACTION_ID
      every entry of one action; the log is verified first: entries it
      cannot vouch for are marked DAMAGED and the exit status is 1
  prove [--db FILE] [--key FILE] [--json] SEQ
      inclusion proof of entry SEQ in the first signed checkpoint covering it
  consistency [--db FILE] [--json] OLD NEW
      consistency proof that the tree of size OLD is a prefix of size NEW
  check-proof --key FILE [--checkpoint FILE] PROOF.json
      check a proof prove --json or consistency --json wrote, offline,
      against a signed checkpoint; exit 0 holds, 1 does not, 2 unchecked
  check-command [--db FILE] [--command-key FILE] [--command-file FILE] ACTION_ID
      check an original command (the file, or standard input) against the
      MAC recorded beside the action's redacted command; exit 0 it is the
      command that ran, 1 it is not, 2 unchecked

Every verb also takes --config FILE: the database is then the state
directory's audit.db. Without --db or --config the database is
$AIRLOCK_STATE_DIR/audit.db, else the state directory of $AIRLOCK_CONFIG or
./airlock.hcl when one exists, else ./audit.db. --key (the checkpoint
verifier key) defaults to keys/checkpoint.vkey next to the database. verify
also checks checkpoints.log next to the database when it exists, and every
--trusted-checkpoint file (a copy of checkpoints.log, or notes a witness
kept, stored away from this machine).
`

func init() {
	commands["audit"] = (&group{name: "audit", usage: auditUsage, verbs: map[string]verbFunc{
		"verify":        interruptible(auditVerify),
		"export":        interruptible(auditExport),
		"show":          interruptible(auditShow),
		"prove":         interruptible(auditProve),
		"consistency":   interruptible(auditConsistency),
		"check-proof":   interruptible(auditCheckProof),
		"check-command": interruptible(auditCheckCommand),
	}}).command("verify, export and prove the audit log")
}

// interruptible runs verb with a context that an interrupt cancels.
func interruptible(verb func(context.Context, []string, io.Writer, io.Writer) int) verbFunc {
	return func(args []string, stdout, stderr io.Writer) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return verb(ctx, args, stdout, stderr)
	}
}

// auditFlags are the flags the verbs share.
type auditFlags struct {
	fs      *flag.FlagSet
	db      string
	config  string
	key     string
	jsonOut bool

	// dbFrom says where db came from: "--db", the configuration file
	// whose state directory holds it, "$AIRLOCK_STATE_DIR", or "" for
	// the last resort, ./audit.db.
	dbFrom string

	// pg is set when the log is on PostgreSQL: --db postgres://…, or a
	// configuration with a storage block; pgPassword is the password
	// file for it. dir is the state directory whose keys and
	// checkpoints.log go with the log ("" for a --db URL).
	pg, pgPassword string
	dir            string
	pgdb           *sqldb.DB
}

// isPostgresURL reports whether --db names a PostgreSQL database.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// logDir is the directory whose keys/ and checkpoints.log go with the
// log: the SQLite file's, or a configuration's state directory.
func (f *auditFlags) logDir() string {
	if f.pg != "" {
		return f.dir
	}
	return filepath.Dir(f.db)
}

// open connects to the PostgreSQL database of the log (once).
func (f *auditFlags) open(ctx context.Context) (*sqldb.DB, error) {
	if f.pgdb == nil {
		db, err := sqldb.OpenPostgres(ctx, sqldb.PostgresOptions{URL: f.pg, PasswordFile: f.pgPassword, MaxConns: 4})
		if err != nil {
			return nil, err
		}
		f.pgdb = db
	}
	return f.pgdb, nil
}

// close closes what open opened.
func (f *auditFlags) close() {
	if f.pgdb != nil {
		f.pgdb.Close()
	}
}

// verifyOptions say where Verify reads the log.
func (f *auditFlags) verifyOptions(ctx context.Context) (auditchain.VerifyOptions, error) {
	if f.pg == "" {
		return auditchain.VerifyOptions{Path: f.db}, nil
	}
	db, err := f.open(ctx)
	return auditchain.VerifyOptions{DB: db}, err
}

// newAuditFlags makes the flags of verb name, whose positional arguments
// are args ("ACTION_ID").
func newAuditFlags(name, args string, stderr io.Writer, withKey, withJSON bool) *auditFlags {
	f := &auditFlags{fs: newFlagSet("airlock audit "+name, strings.TrimSpace("airlock audit "+name+" [flags] "+args), stderr)}
	f.fs.StringVar(&f.db, "db", "", "audit database `FILE`, or a postgres:// URL (default: the audit.db of --config's state directory, or its storage block's database, else $AIRLOCK_STATE_DIR/audit.db, else that of $AIRLOCK_CONFIG or ./airlock.hcl when it exists, else ./audit.db)")
	f.fs.StringVar(&f.pgPassword, "db-password-file", "", "`FILE` holding the password for a postgres:// --db (else libpq's own password file)")
	f.fs.StringVar(&f.config, "config", "", "gateway configuration `FILE`: use its state directory's audit.db")
	if withKey {
		f.fs.StringVar(&f.key, "key", "", "checkpoint verifier key `FILE` (default: keys/checkpoint.vkey next to the database)")
	}
	if withJSON {
		f.fs.BoolVar(&f.jsonOut, "json", false, "print JSON")
	}
	return f
}

// parse accepts flags before and after the positional arguments and
// checks their number. When it returns false the verb exits with code:
// 0 after printing the help that was asked for, else exitFailed.
func (f *auditFlags) parse(args []string, positional int, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	pos, code, ok = parseArgs(f.fs, args, stdout)
	if !ok {
		if code != 0 {
			code = exitFailed
		}
		return nil, code, false
	}
	if len(pos) != positional {
		fmt.Fprintf(stderr, "%s: want %s, got %d; run \"airlock audit help\"\n", f.fs.Name(), count(positional, "argument"), len(pos))
		return nil, exitFailed, false
	}
	if err := f.resolveDB(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", f.fs.Name(), err)
		return nil, exitFailed, false
	}
	return pos, exitOK, true
}

// resolveDB finds the database unless --db was given: the state directory
// of --config, else $AIRLOCK_STATE_DIR, else the state directory of
// $AIRLOCK_CONFIG or ./airlock.hcl when it exists, else ./audit.db.
func (f *auditFlags) resolveDB() error {
	if f.db != "" {
		f.dbFrom = "--db"
		if isPostgresURL(f.db) {
			f.pg = f.db
			return sqldb.CheckURL(f.pg)
		}
		return nil
	}
	path := f.config
	if path == "" {
		if dir := os.Getenv("AIRLOCK_STATE_DIR"); dir != "" {
			f.db, f.dbFrom = filepath.Join(dir, "audit.db"), "$AIRLOCK_STATE_DIR"
			return nil
		}
		path = config.Path("")
		if _, err := os.Stat(path); err != nil {
			f.db = "audit.db"
			return nil
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return explainConfig(err, f.config)
	}
	f.db, f.dbFrom = filepath.Join(cfg.StateDir, "audit.db"), cfg.Path
	if cfg.Storage != nil {
		f.pg, f.pgPassword, f.dir = cfg.Storage.Postgres, cfg.Storage.PasswordFile, cfg.StateDir
	}
	return nil
}

// checkDB reports a database that does not exist with where its path came
// from and what to pass instead.
func (f *auditFlags) checkDB() error {
	if f.pg != "" {
		return nil // the connection says
	}
	_, err := os.Stat(f.db)
	switch {
	case err == nil || !errors.Is(err, fs.ErrNotExist) || f.dbFrom == "--db":
		return err
	case f.dbFrom == "" && os.Getenv("AIRLOCK_CONFIG") != "":
		return fmt.Errorf("no audit database found: $AIRLOCK_CONFIG names no file and ./audit.db does not exist; pass --db FILE, or the gateway's configuration with --config FILE or $AIRLOCK_CONFIG")
	case f.dbFrom == "":
		return fmt.Errorf("no audit database found: no configuration was given and ./audit.db does not exist; pass --db FILE, or the gateway's configuration with --config FILE or $AIRLOCK_CONFIG")
	case f.dbFrom == "$AIRLOCK_STATE_DIR":
		return fmt.Errorf("%s (from $AIRLOCK_STATE_DIR) does not exist; pass --db FILE or --config FILE", f.db)
	}
	return fmt.Errorf("%s, in the state directory of %s, does not exist: has the gateway run with that configuration? Else pass --db FILE", f.db, f.dbFrom)
}

func (f *auditFlags) keyPath() string {
	if f.key != "" {
		return f.key
	}
	if f.pg != "" && f.dir == "" {
		return ""
	}
	return filepath.Join(f.logDir(), "keys", "checkpoint.vkey")
}

// verifierKey reads the checkpoint verifier key: --key, else the one
// beside the log, else (a postgres:// --db) the one the log's first
// replica recorded in the database, which proves as little as a key
// beside a file does.
func (f *auditFlags) verifierKey(ctx context.Context) (note.Verifier, error) {
	if p := f.keyPath(); p != "" {
		return auditchain.ReadVerifierKey(p)
	}
	db, err := f.open(ctx)
	if err != nil {
		return nil, err
	}
	return auditchain.RecordedVerifierKey(ctx, db)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
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
	vo, err := f.verifyOptions(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit verify: could not verify: %v\n", err)
		return exitFailed
	}
	vo.Key, vo.Trusted = key, trusted
	rep, err := auditchain.Verify(ctx, vo)
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

func openReader(ctx context.Context, f *auditFlags, verb string, stderr io.Writer) (*auditchain.Reader, bool) {
	if err := f.checkDB(); err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
		return nil, false
	}
	if f.pg != "" {
		db, err := f.open(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
			return nil, false
		}
		return auditchain.NewReader(db), true
	}
	r, err := auditchain.OpenReader(ctx, f.db)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
		return nil, false
	}
	return r, true
}

// checkRead verifies the log before show or export print from it: the
// first entry they must not vouch for (math.MaxInt64 when the log is
// intact), or false when verifying was not possible (said on stderr).
// What is damaged is said on stderr; the verb still prints everything and
// exits non-zero.
func checkRead(ctx context.Context, f *auditFlags, verb string, stderr io.Writer) (firstBad int64, ok bool) {
	key, err := f.verifierKey(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: could not verify what it reads: %v; pass the verifier key with --key FILE\n", verb, err)
		return 0, false
	}
	vo, err := f.verifyOptions(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: could not verify what it reads: %v\n", verb, err)
		return 0, false
	}
	vo.Key = key
	rep, err := auditchain.Verify(ctx, vo)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: could not verify what it reads: %v\n", verb, err)
		return 0, false
	}
	if rep.Intact() {
		return math.MaxInt64, true
	}
	first := rep.First()
	firstBad = first.Seq
	if firstBad < 0 {
		firstBad = 0 // damage to the log as a whole: nothing is vouched for
	}
	fmt.Fprintf(stderr, "airlock audit %s: the log is DAMAGED (%s: %s: %s); entries from seq %d on are marked and not vouched for; run airlock audit verify\n",
		verb, seqText(first.Seq, "first bad seq "), first.Kind, first.Detail, firstBad)
	return firstBad, true
}

func auditExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("export", "", stderr, true, false)
	after := f.fs.Int64("after", 0, "export entries with seq greater than `SEQ` (default: all)")
	if _, code, ok := f.parse(args, 0, stdout, stderr); !ok {
		return code
	}
	if !isSet(f.fs, "after") {
		*after = -1 // every entry, seq 0 included
	}
	r, ok := openReader(ctx, f, "export", stderr)
	if !ok {
		return exitFailed
	}
	defer r.Close()
	defer f.close()
	firstBad, ok := checkRead(ctx, f, "export", stderr)
	if !ok {
		return exitFailed
	}
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
	if firstBad != math.MaxInt64 {
		return exitDamaged
	}
	return exitOK
}

func auditShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newAuditFlags("show", "ACTION_ID", stderr, true, true)
	pos, code, ok := f.parse(args, 1, stdout, stderr)
	if !ok {
		return code
	}
	r, ok := openReader(ctx, f, "show", stderr)
	if !ok {
		return exitFailed
	}
	defer r.Close()
	defer f.close()
	firstBad, ok := checkRead(ctx, f, "show", stderr)
	if !ok {
		return exitFailed
	}
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
		if rec.Seq >= firstBad {
			mark = "  DAMAGED: not vouched for"
		}
		fmt.Fprintf(stdout, "%d  %s  %s  run=%s%s\n", rec.Seq, rec.Time.UTC().Format("2006-01-02T15:04:05.000000000Z"), rec.Kind, visible(rec.RunID), mark)
		for _, fl := range rec.Fields {
			fmt.Fprintf(stdout, "    %s = %s\n", fl.Name, valueText(fl.Value))
		}
	}
	if firstBad != math.MaxInt64 {
		return exitDamaged
	}
	return exitOK
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
	r, ok := openReader(ctx, f, "prove", stderr)
	if !ok {
		return exitFailed
	}
	defer r.Close()
	defer f.close()
	// The first checkpoint that covers seq and verifies with the key.
	var signed []byte
	var size int64
	if key, err := auditchain.ReadVerifierKey(f.keyPath()); err == nil {
		cps, err := r.Checkpoints(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
			return exitFailed
		}
		for _, sc := range cps {
			if c, err := auditchain.OpenCheckpoint(sc.Note, key); err == nil && c.Size > seq {
				signed, size = sc.Note, c.Size
				break
			}
		}
	} else if f.key != "" {
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitFailed
	}
	if signed == nil {
		if size, err = r.Size(ctx); err != nil {
			fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
			return exitFailed
		}
	}
	p, err := r.ProveInclusion(ctx, seq, size)
	if errors.Is(err, auditchain.ErrNotFound) {
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitDamaged
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit prove: %v\n", err)
		return exitFailed
	}
	if signed != nil {
		c, _ := auditchain.ParseCheckpoint(string(signed[:strings.Index(string(signed), "\n\n")+1]))
		if c.Root != p.Root {
			fmt.Fprintf(stderr, "airlock audit prove: the stored tree disagrees with the signed checkpoint of size %d; run airlock audit verify\n", size)
			return exitDamaged
		}
	}
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
	r, ok := openReader(ctx, f, "consistency", stderr)
	if !ok {
		return exitFailed
	}
	defer r.Close()
	defer f.close()
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
	r, ok := openReader(ctx, f, "check-command", stderr)
	if !ok {
		return exitFailed
	}
	defer r.Close()
	defer f.close()
	firstBad, ok := checkRead(ctx, f, "check-command", stderr)
	if !ok {
		return exitFailed
	}
	recs, err := r.ActionEntries(ctx, pos[0])
	if err != nil {
		return fail("action %q: %v", pos[0], err)
	}
	for _, rec := range recs {
		if rec.Kind != auditchain.KindActionRequested {
			continue
		}
		if rec.Seq >= firstBad {
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
				fmt.Fprintf(stdout, "action %s: MATCH: this is the command it ran (entry %d records its MAC; redactions %s)\n", pos[0], rec.Seq, strings.Join(rules, " "))
				return exitOK
			}
		}
		fmt.Fprintf(stdout, "action %s: NO MATCH: this is not the command entry %d records\n", pos[0], rec.Seq)
		return exitDamaged
	}
	return fail("no action.requested entry for action %q", pos[0])
}
