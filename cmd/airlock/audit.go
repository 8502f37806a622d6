package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"golang.org/x/mod/sumdb/note"
)

// Exit codes of "airlock audit verify" (contract): intact, damage found,
// could not verify; and, added to them, a verifier key that signed none of
// the log's checkpoints (not damage: the key is not this log's, or every
// checkpoint was re-signed). The other audit verbs use 0, 1 (not found)
// and 2; check-proof uses 3 as verify does.
const (
	exitOK       = 0
	exitDamaged  = 1
	exitFailed   = 2
	exitWrongKey = 3
)

const auditUsage = `usage: airlock audit VERB [flags] [args]

verbs:
  verify [--db FILE] [--key FILE] [--trusted-checkpoint FILE]... [--json]
      rehash and check the whole log; exit 0 intact, 1 damage found
      (the first bad seq and the kind are printed), 2 could not verify,
      3 the key signed none of the log's checkpoints (wrong key)
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
      against a signed checkpoint (--checkpoint: a note, or a file of
      notes such as a witness keeps: the one of the proof's size is used);
      exit 0 holds, 1 does not, 2 unchecked, 3 wrong key
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

// verify verifies the log with the verifier key and the checkpoints kept
// outside the database.
func (f *auditFlags) verify(ctx context.Context, key note.Verifier, trusted []auditchain.TrustedNote) (*auditchain.Report, error) {
	vo := auditchain.VerifyOptions{Path: f.db, Key: key, Trusted: trusted}
	if f.pg != "" {
		db, err := f.open(ctx)
		if err != nil {
			return nil, err
		}
		vo = auditchain.VerifyOptions{DB: db, Key: key, Trusted: trusted}
	}
	return auditchain.Verify(ctx, vo)
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

// auditLog is the log a verb reads from.
type auditLog struct {
	*auditchain.Reader
	f *auditFlags
	// firstBad is the first entry the verb must not vouch for (see
	// checkRead); math.MaxInt64 when the log was not verified.
	firstBad int64
}

// openLog opens the log for verb and, with verify, verifies it first
// (checkRead). What fails is said on stderr and code is the verb's exit
// status: exitWrongKey when the verifier key did not sign the log,
// exitFailed else. Close the log when code is exitOK.
func openLog(ctx context.Context, f *auditFlags, verb string, verify bool, stderr io.Writer) (l *auditLog, code int) {
	if err := f.checkDB(); err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
		return nil, exitFailed
	}
	var r *auditchain.Reader
	if f.pg != "" {
		db, err := f.open(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
			return nil, exitFailed
		}
		r = auditchain.NewReader(db)
	} else {
		var err error
		if r, err = auditchain.OpenReader(ctx, f.db); err != nil {
			fmt.Fprintf(stderr, "airlock audit %s: %v\n", verb, err)
			return nil, exitFailed
		}
	}
	l = &auditLog{Reader: r, f: f, firstBad: math.MaxInt64}
	if verify {
		if l.firstBad, code = checkRead(ctx, f, verb, stderr); code != exitOK {
			l.Close()
			return nil, code
		}
	}
	return l, exitOK
}

// exitCode is a verb's exit status once it printed what it read:
// exitDamaged when the log was found damaged, exitOK else.
func (l *auditLog) exitCode() int {
	if l.firstBad != math.MaxInt64 {
		return exitDamaged
	}
	return exitOK
}

// Close closes the reader and the connection the flags opened.
func (l *auditLog) Close() {
	l.f.close()
	l.Reader.Close()
}

// checkRead verifies the log before show or export print from it: the
// first entry they must not vouch for (math.MaxInt64 when the log is
// intact) and exitOK, or the exit status when verifying was not possible
// (said on stderr): exitWrongKey, said in one line naming both origins as
// verify says it, when the verifier key signed none of the log's
// checkpoints, exitFailed else. What is damaged is said on stderr; the
// verb still prints everything and exits non-zero.
func checkRead(ctx context.Context, f *auditFlags, verb string, stderr io.Writer) (firstBad int64, code int) {
	key, err := f.verifierKey(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: could not verify what it reads: %v; pass the verifier key with --key FILE\n", verb, err)
		return 0, exitFailed
	}
	rep, err := f.verify(ctx, key, nil)
	if mm := (*auditchain.KeyMismatchError)(nil); errors.As(err, &mm) {
		fmt.Fprintf(stderr, "airlock audit %s: WRONG KEY: %v\n", verb, mm)
		return 0, exitWrongKey
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock audit %s: could not verify what it reads: %v\n", verb, err)
		return 0, exitFailed
	}
	firstBad = rep.FirstUnvouched()
	if rep.Intact() {
		return firstBad, exitOK
	}
	first := rep.First()
	fmt.Fprintf(stderr, "airlock audit %s: the log is DAMAGED (%s: %s: %s); entries from seq %d on are marked and not vouched for; run airlock audit verify\n",
		verb, seqText(first.Seq, "first bad seq "), first.Kind, first.Detail, firstBad)
	return firstBad, exitOK
}
