package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockgw/airlock/deploy/pgtest"
	"github.com/airlockgw/airlock/deploy/sqldb"
)

func sharedKeysDB(t *testing.T) *sqldb.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.OpenPostgres(ctx, sqldb.PostgresOptions{URL: pgtest.Shared(t).NewDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := MigrateStorage(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Replicas starting at once on a brand-new database: exactly one makes
// the command MAC key and claims the database with it, in one
// transaction; every other is refused and makes no key.
func TestOneReplicaClaimsANewDatabase(t *testing.T) {
	db := sharedKeysDB(t)
	ctx := context.Background()
	dirs := make([]string, 4)
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i := range dirs {
		dirs[i] = t.TempDir()
		wg.Go(func() { errs[i] = claimSharedKeys(ctx, db, dirs[i], false) })
	}
	wg.Wait()
	var claimed []string
	for i, err := range errs {
		_, statErr := os.Stat(filepath.Join(dirs[i], "keys", "command-hmac"))
		switch {
		case err == nil && statErr == nil:
			claimed = append(claimed, dirs[i])
		case err != nil && os.IsNotExist(statErr) && strings.Contains(err.Error(), "never generate it here"):
		default:
			t.Errorf("replica %d: %v (its key file: %v)", i, err, statErr)
		}
	}
	if len(claimed) != 1 {
		t.Fatalf("%d replicas claimed the new database, want 1", len(claimed))
	}
	rec, err := RecordedKeys(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := StateKeys(claimed[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec[KeyCommandMAC] == "" || rec[KeyCommandMAC] != keys[0].Fingerprint {
		t.Errorf("recorded %v, the claimer holds %+v", rec, keys[0])
	}
}

// A database that holds an audit log and records no key (moved before
// keys were recorded): a replica without the command key makes none,
// and says how to record the right one.
func TestNoKeyMadeForADatabaseWithALog(t *testing.T) {
	db := sharedKeysDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE entries (seq BIGINT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO entries (seq) VALUES (0), (1)`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err := claimSharedKeys(ctx, db, dir, false)
	if err == nil || !strings.Contains(err.Error(), "holds 2 audit entries and records no command MAC key") || !strings.Contains(err.Error(), "airlock storage keys --from") {
		t.Fatalf("claim on a database with a log and no keys: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", "command-hmac")); !os.IsNotExist(err) {
		t.Errorf("a key was made: %v", err)
	}
}
