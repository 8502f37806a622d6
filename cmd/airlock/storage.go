package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/engine"
)

func init() {
	commands["storage"] = (&group{name: "storage", usage: storageUsage, verbs: map[string]verbFunc{
		"migrate": storageMigrate,
		"keys":    storageKeys,
		"status":  storageStatus,
	}}).command("the PostgreSQL storage: migrate it, move a SQLite state directory to it, record the shared keys, show the replicas (operator)")
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
      copied, and the fingerprints of STATE_DIR/keys recorded as the keys
      every replica must hold. Stop the gateway first. Then add the
      storage block to the configuration and copy STATE_DIR/keys to every
      replica before it starts: one without them is refused.
  keys --from STATE_DIR [--config FILE] [--to postgres://…]
      record the fingerprints of the keys in STATE_DIR/keys as the shared
      ones, for a database moved before they were recorded; a key the
      database records already must be the same
  status [--config FILE] [--json]
      the replicas (lease, configuration digest), those whose configuration
      differs from the majority's, the shared keys and the schema versions;
      exit 0 when no live replica drifts, 1 when some do, 2 when the
      database could not be read

Without --to, the database is the configuration's storage block's.
`

func storageMigrate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock storage migrate", "airlock storage migrate [--config FILE] [--from STATE_DIR] [--to postgres://…] [--to-password-file FILE]", stderr)
	cfgPath := configFlag(fs)
	from := fs.String("from", "", "a SQLite gateway's state `DIR` to move into the database")
	to := databaseFlags(fs)
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, url, code := to.open(*cfgPath, stderr)
	if db == nil {
		return code
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
	fmt.Fprintf(stdout, "%s: schema up to date (%s)\n", url, strings.Join(parts, ", "))
	return exitOK
}

// databaseFlag is --to and --to-password-file.
type databaseFlag struct{ url, passwordFile *string }

// databaseFlags defines --to and --to-password-file on fs.
func databaseFlags(fs *flag.FlagSet) databaseFlag {
	return databaseFlag{
		url:          fs.String("to", "", "the PostgreSQL database's `URL` (default: the configuration's storage block)"),
		passwordFile: fs.String("to-password-file", "", "`FILE` holding the password for --to (default: the storage block's password_file)"),
	}
}

// open opens the database of --to (with --to-password-file), or else of
// the configuration's storage block, and says which (without its
// password); nil and the exit code when it cannot, said on stderr.
func (d databaseFlag) open(cfgPath string, stderr io.Writer) (*sqldb.DB, string, int) {
	url, pwFile := *d.url, *d.passwordFile
	if url == "" {
		cfg, ok := loadConfig(cfgPath, stderr)
		if !ok {
			return nil, "", exitFailed
		}
		if cfg.Storage == nil {
			return nil, "", failf(stderr, "the configuration %s has no storage block: give the database with --to postgres://…", cfg.Path)
		}
		url, pwFile = cfg.Storage.Postgres, cmp.Or(pwFile, cfg.Storage.PasswordFile)
	}
	if err := sqldb.CheckURL(url); err != nil {
		return nil, "", failf(stderr, "--to: %v", err)
	}
	db, err := sqldb.OpenPostgres(context.Background(), sqldb.PostgresOptions{URL: url, PasswordFile: pwFile, MaxConns: 4})
	if err != nil {
		return nil, "", failf(stderr, "%v", err)
	}
	return db, sqldb.Describe(url), exitOK
}

// moveStateDir copies a stopped SQLite gateway's state into db
// (engine.MoveStateDir), saying what each step did.
func moveStateDir(ctx context.Context, dir string, db *sqldb.DB, stdout io.Writer) error {
	auditDB := filepath.Join(dir, "audit.db")
	err := engine.MoveStateDir(ctx, dir, db, func(p engine.MoveProgress) {
		switch p.Step {
		case engine.MoveVerified:
			fmt.Fprintf(stdout, "verified %s: %s, %s\n", auditDB, count(int(p.Entries), "entry"), count(p.Checkpoints, "checkpoint"))
		case engine.MoveLog:
			fmt.Fprintf(stdout, "copied the audit log: %s, verified again from the database\n", count(int(p.Entries), "entry"))
		case engine.MoveState:
			fmt.Fprintf(stdout, "copied the state: %s, %s, %s, %s\n", count(int(p.State["runs"]), "run"), count(int(p.State["requests"]), "approval request"),
				count(int(p.State["reviewers"]), "reviewer"), count(int(p.State["agents"]), "agent token"))
		case engine.MoveOutputs:
			fmt.Fprintf(stdout, "copied the outputs: %s\n", count(int(p.Blobs), "blob"))
		}
	})
	if err != nil {
		return err
	}
	if err := recordKeys(ctx, dir, db, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "done: add the storage block to the configuration; copy %s to every replica before it starts\n", filepath.Join(dir, "keys"))
	return nil
}

// recordKeys records the fingerprints of dir's keys as the shared ones
// and says which.
func recordKeys(ctx context.Context, dir string, db *sqldb.DB, stdout io.Writer) error {
	if err := engine.MigrateStorage(ctx, db); err != nil {
		return err
	}
	added, err := engine.RecordKeys(ctx, db, dir)
	if err != nil {
		return err
	}
	if len(added) == 0 {
		fmt.Fprintf(stdout, "the database records the keys of %s already\n", filepath.Join(dir, "keys"))
	}
	for _, k := range added {
		fmt.Fprintf(stdout, "recorded the shared key %s: %s (%s)\n", k.Name, k.Fingerprint, strings.Join(k.Files, ", "))
	}
	return nil
}

// storageKeys is airlock storage keys --from STATE_DIR.
func storageKeys(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock storage keys", "airlock storage keys --from STATE_DIR [--config FILE] [--to postgres://…] [--to-password-file FILE]", stderr)
	cfgPath := configFlag(fs)
	from := fs.String("from", "", "the state `DIR` whose keys the replicas share (required)")
	to := databaseFlags(fs)
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	if *from == "" {
		return usageErrorf(stderr, "give the state directory whose keys the replicas share: --from STATE_DIR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, _, code := to.open(*cfgPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	if err := recordKeys(ctx, *from, db, stdout); err != nil {
		return failf(stderr, "%v", err)
	}
	return exitOK
}
