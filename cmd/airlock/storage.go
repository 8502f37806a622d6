package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/engine"
)

func init() {
	commands["storage"] = (&group{name: "storage", usage: storageUsage, verbs: map[string]verbFunc{
		"migrate": storageMigrate,
	}}).command("bring the PostgreSQL storage to this version; move a SQLite state directory to it (operator)")
}

const storageUsage = `usage: airlock storage VERB [flags]

Without a storage block the gateway keeps its state in SQLite files in
state_dir; with one, in a PostgreSQL database its replicas share
(docs/high-availability.md).

verbs:
  migrate [--config FILE] [--to postgres://…] [--to-password-file FILE]
      apply this version's schema changes to the database (airlock serve
      does it at start too) and print each part's schema version
  migrate --from STATE_DIR [--to postgres://…] [--to-password-file FILE]
      move a SQLite gateway into an empty PostgreSQL database: the audit
      log is verified, copied entry for entry (the same bytes, seq numbers
      and checkpoints) and verified again from the database; the state
      (runs, approvals, reviewers, agent tokens) and the outputs are
      copied. Stop the gateway first. Then add the storage block to the
      configuration and keep STATE_DIR/keys: every replica needs a copy.

Without --to, the database is the configuration's storage block's.
`

func storageMigrate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock storage migrate", "airlock storage migrate [--config FILE] [--from STATE_DIR] [--to postgres://…] [--to-password-file FILE]", stderr)
	cfgPath := configFlag(fs)
	from := fs.String("from", "", "a SQLite gateway's state `DIR` to move into the database")
	to := fs.String("to", "", "the PostgreSQL database's `URL` (default: the configuration's storage block)")
	toPassword := fs.String("to-password-file", "", "`FILE` holding the password for --to (default: the storage block's password_file)")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	url, pwFile := *to, *toPassword
	if url == "" {
		cfg, ok := loadConfig(*cfgPath, stderr)
		if !ok {
			return exitFailed
		}
		if cfg.Storage == nil {
			return failf(stderr, "the configuration %s has no storage block: give the database with --to postgres://…", cfg.Path)
		}
		url, pwFile = cfg.Storage.Postgres, cmp.Or(pwFile, cfg.Storage.PasswordFile)
	}
	if err := sqldb.CheckURL(url); err != nil {
		return failf(stderr, "--to: %v", err)
	}
	db, err := sqldb.OpenPostgres(ctx, sqldb.PostgresOptions{URL: url, PasswordFile: pwFile, MaxConns: 4})
	if err != nil {
		return failf(stderr, "%v", err)
	}
	defer db.Close()
	if *from != "" {
		if err := moveStateDir(ctx, *from, db, stdout); err != nil {
			return failf(stderr, "%v", err)
		}
	}
	if err := engine.MigrateStorage(ctx, db); err != nil {
		return failf(stderr, "%v", err)
	}
	vs, err := db.Versions(ctx)
	if err != nil {
		return failf(stderr, "%v", err)
	}
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, vs[n]))
	}
	fmt.Fprintf(stdout, "%s: schema up to date (%s)\n", sqldb.Describe(url), strings.Join(parts, ", "))
	return exitOK
}

// moveStateDir copies a stopped SQLite gateway's state into db, verifying
// the audit log before and after.
func moveStateDir(ctx context.Context, dir string, db *sqldb.DB, stdout io.Writer) error {
	auditDB := filepath.Join(dir, "audit.db")
	if _, err := os.Stat(auditDB); err != nil {
		return fmt.Errorf("--from %s: no audit log there (%v)", dir, err)
	}
	// The running gateway holds this lock: never copy a log being written.
	lock, err := os.OpenFile(auditDB+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("a gateway runs on %s: stop it first", dir)
	}
	vkeyFile := filepath.Join(dir, "keys", "checkpoint.vkey")
	vkey, err := os.ReadFile(vkeyFile)
	if err != nil {
		return fmt.Errorf("the verifier key: %w", err)
	}
	key, err := auditchain.ParseVerifierKey(strings.TrimSpace(string(vkey)))
	if err != nil {
		return fmt.Errorf("%s: %w", vkeyFile, err)
	}
	var trusted []auditchain.TrustedNote
	if notes, err := auditchain.ReadTrustedNotes(filepath.Join(dir, "checkpoints.log")); err == nil {
		trusted = notes
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	before, err := auditchain.Verify(ctx, auditchain.VerifyOptions{Path: auditDB, Key: key, Trusted: trusted})
	if err != nil {
		return fmt.Errorf("verify %s: %w", auditDB, err)
	}
	if !before.Intact() {
		d := before.First()
		return fmt.Errorf("%s is damaged (%s at seq %d: %s): nothing was copied; run airlock audit verify", auditDB, d.Kind, d.Seq, d.Detail)
	}
	fmt.Fprintf(stdout, "verified %s: %s, %s\n", auditDB, count(int(before.Entries), "entry"), count(before.Checkpoints, "checkpoint"))
	n, err := auditchain.ImportSQLite(ctx, auditDB, db, strings.TrimSpace(string(vkey)))
	if err != nil {
		return err
	}
	after, err := auditchain.Verify(ctx, auditchain.VerifyOptions{DB: db, Key: key, Trusted: trusted})
	if err != nil {
		return fmt.Errorf("verify the copy: %w", err)
	}
	if !after.Intact() || after.Entries != before.Entries || after.Checkpoints != before.Checkpoints {
		return fmt.Errorf("the copy does not verify as the original did (%d entries, %d checkpoints, damage %+v): leave the storage block out and keep using %s", after.Entries, after.Checkpoints, after.First(), dir)
	}
	fmt.Fprintf(stdout, "copied the audit log: %s, verified again from the database\n", count(int(n), "entry"))
	if stateDB := filepath.Join(dir, "state.db"); exists(stateDB) {
		counts, err := approvals.ImportSQLite(ctx, stateDB, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "copied the state: %s, %s, %s, %s\n", count(int(counts["runs"]), "run"), count(int(counts["requests"]), "approval request"),
			count(int(counts["reviewers"]), "reviewer"), count(int(counts["agents"]), "agent token"))
	}
	if outDB := filepath.Join(dir, "outputs.db"); exists(outDB) {
		n, err := auditchain.ImportOutputs(ctx, outDB, db)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "copied the outputs: %s\n", count(int(n), "blob"))
	}
	fmt.Fprintf(stdout, "done: add the storage block to the configuration; keep %s (every replica needs a copy)\n", filepath.Join(dir, "keys"))
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
