package engine

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/redact"
)

// The replicas of one database are one gateway: they hold the same keys.
// The database records each shared key's fingerprint (shared_keys), and a
// replica checks its own files against them before it uses any: a
// missing or different key is refused, saying which fingerprint it needs
// and which files to copy, and a replica never generates a key the
// database names. Only the first replica of a brand-new database (no
// key recorded, no audit entry) generates the command MAC key, and it
// records it in the transaction that claims the database; the audit log
// records its checkpoint key when it creates the log; the gateway CA is
// recorded by the first replica that has one (airlock ca init).

// Shared key names in shared_keys.
const (
	KeyCommandMAC = "command-hmac"
	KeyCheckpoint = "checkpoint"
	KeyCA         = "ca"
)

// SharedKey is one key the replicas share, as a state directory holds it.
type SharedKey struct {
	// Name is its name in shared_keys.
	Name string
	// Files are the files that hold it, under the state directory.
	Files []string
	// Fingerprint is its fingerprint; "" when the state directory has
	// none.
	Fingerprint string
}

// sharedKeyFiles are the files of each shared key, under the state
// directory: the first is the one whose absence means "no key here".
var sharedKeyFiles = map[string][]string{
	KeyCommandMAC: {redact.KeyFile},
	KeyCheckpoint: {"keys/checkpoint.key", "keys/checkpoint.vkey"},
	KeyCA:         {"keys/ca", "keys/ca.pub"},
}

// sharedKeyNames are the shared keys in the order they are reported.
var sharedKeyNames = []string{KeyCommandMAC, KeyCheckpoint, KeyCA}

// commandKeyFingerprint is the fingerprint of a command MAC key: a hash
// of the secret under a label, never the secret.
func commandKeyFingerprint(key []byte) string {
	sum := sha256.Sum256(append([]byte("airlock shared key fingerprint\x00"+KeyCommandMAC+"\x00"), key...))
	return hex.EncodeToString(sum[:16])
}

// StateKeys reads the shared keys a state directory holds, with their
// fingerprints (Fingerprint "" for a key it does not hold). A key file
// that is there but unreadable is an error.
func StateKeys(stateDir string) ([]SharedKey, error) {
	out := make([]SharedKey, 0, len(sharedKeyNames))
	for _, name := range sharedKeyNames {
		files := sharedKeyFiles[name]
		k := SharedKey{Name: name, Files: files}
		path := filepath.Join(stateDir, files[0])
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			out = append(out, k)
			continue
		}
		fp, err := fingerprintOf(stateDir, name)
		if err != nil {
			return nil, err
		}
		k.Fingerprint = fp
		out = append(out, k)
	}
	return out, nil
}

// fingerprintOf reads key name's fingerprint from the state directory.
// The checkpoint key and the CA are known by their public halves, as
// operators see them (the verifier key; ssh-keygen -lf ca.pub).
func fingerprintOf(stateDir, name string) (string, error) {
	switch name {
	case KeyCommandMAC:
		k, err := redact.LoadKey(filepath.Join(stateDir, redact.KeyFile))
		if err != nil {
			return "", err
		}
		return commandKeyFingerprint(k), nil
	case KeyCheckpoint:
		b, err := os.ReadFile(filepath.Join(stateDir, "keys/checkpoint.vkey"))
		if err != nil {
			return "", fmt.Errorf("the checkpoint key's verifier key: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	case KeyCA:
		b, err := os.ReadFile(filepath.Join(stateDir, "keys/ca.pub"))
		if err != nil {
			return "", fmt.Errorf("the gateway CA's public key: %w", err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			return "", fmt.Errorf("the gateway CA's public key %s: %w", filepath.Join(stateDir, "keys/ca.pub"), err)
		}
		return ssh.FingerprintSHA256(pub), nil
	}
	return "", fmt.Errorf("the shared database holds no key %q", name)
}

// sharedKeysLock serializes the claims and checks of the shared keys.
var sharedKeysLock = sqldb.LockKey("airlock shared keys")

// RecordedKeys returns the shared keys' fingerprints the database
// records, by name.
func RecordedKeys(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, fingerprint FROM shared_keys`)
	if err != nil {
		return nil, fmt.Errorf("storage: read the shared keys: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, fp string
		if err := rows.Scan(&n, &fp); err != nil {
			return nil, fmt.Errorf("storage: read the shared keys: %w", err)
		}
		out[n] = fp
	}
	return out, rows.Err()
}

// claimSharedKeys checks this replica's keys against those the database
// records, in one transaction under the keys' lock: a key the database
// names must be here and the same; a key it does not name yet is
// recorded from here. The command MAC key is generated only when the
// database is brand new (no key recorded, no audit entry), and recorded
// in the same transaction. usesCA says whether the configuration signs
// with the gateway CA (a replica that does not may lack it).
func claimSharedKeys(ctx context.Context, db *sqldb.DB, stateDir string, usesCA bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, sharedKeysLock); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	recorded, err := RecordedKeys(ctx, tx)
	if err != nil {
		return err
	}
	cmdFile := filepath.Join(stateDir, redact.KeyFile)
	if _, ok := recorded[KeyCommandMAC]; !ok && !exists(cmdFile) {
		entries, err := auditEntries(ctx, tx)
		if err != nil {
			return err
		}
		if len(recorded) > 0 || entries > 0 {
			return fmt.Errorf("the shared database holds %s and records no command MAC key, and this replica has none (%s): "+
				"a new key would not verify the redacted commands already in the log. Copy keys/command-hmac from the gateway whose state this is "+
				"and record it with airlock storage keys --from STATE_DIR (on that gateway's machine)", count(entries, "audit entry", "audit entries"), cmdFile)
		}
		// A brand-new database: this replica makes the key, and records
		// it below in this transaction.
		if _, err := redact.LoadOrCreateKey(cmdFile); err != nil {
			return err
		}
	}
	have, err := StateKeys(stateDir)
	if err != nil {
		return err
	}
	for _, k := range have {
		if k.Name == KeyCheckpoint {
			continue // the audit log checks and records its own key (auditchain)
		}
		if err := checkSharedKey(ctx, tx, stateDir, k, recorded[k.Name], usesCA || k.Name != KeyCA); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

// checkSharedKey checks the state directory's key k against the
// fingerprint the database records (want, "" for none): the same, or
// recorded now when there is none; needed says whether this replica
// cannot do without it.
func checkSharedKey(ctx context.Context, tx *sqldb.Tx, stateDir string, k SharedKey, want string, needed bool) error {
	switch {
	case want == "" && k.Fingerprint == "":
		return nil
	case want == "":
		_, err := tx.ExecContext(ctx, `INSERT INTO shared_keys (name, fingerprint) VALUES (?, ?)`, k.Name, k.Fingerprint)
		if err != nil {
			return fmt.Errorf("storage: record the key %s: %w", k.Name, err)
		}
		return nil
	case k.Fingerprint == "" && !needed:
		return nil
	case k.Fingerprint == "":
		return fmt.Errorf("the replicas share the key %s (fingerprint %s), which this replica does not have: copy %s from a running replica (airlock storage status lists the fingerprints) into %s; never generate it here, which would split %s",
			k.Name, want, filesText(stateDir, k.Files), stateDir, sharedKeyBinds(k.Name))
	case k.Fingerprint != want:
		return fmt.Errorf("this replica's key %s (fingerprint %s) is not the one the replicas share (fingerprint %s): replace %s with the files of a running replica whose key has fingerprint %s (airlock storage status lists them); keep this one aside until you know where it came from",
			k.Name, k.Fingerprint, want, filesText(stateDir, k.Files), want)
	}
	return nil
}

// RecordKeys records the fingerprints of the shared keys a state
// directory holds (airlock storage migrate, airlock storage keys): a
// key the database names already must be the same. It returns the keys
// recorded now.
func RecordKeys(ctx context.Context, db *sqldb.DB, stateDir string) ([]SharedKey, error) {
	have, err := StateKeys(stateDir)
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, sharedKeysLock); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	recorded, err := RecordedKeys(ctx, tx)
	if err != nil {
		return nil, err
	}
	var added []SharedKey
	for _, k := range have {
		if k.Fingerprint == "" {
			continue
		}
		if want, ok := recorded[k.Name]; ok && want != k.Fingerprint {
			return nil, fmt.Errorf("storage: the database records another key %s (fingerprint %s) than %s holds (%s): it belongs to another gateway; nothing was recorded",
				k.Name, want, stateDir, k.Fingerprint)
		} else if ok {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO shared_keys (name, fingerprint) VALUES (?, ?)`, k.Name, k.Fingerprint); err != nil {
			return nil, fmt.Errorf("storage: record the key %s: %w", k.Name, err)
		}
		added = append(added, k)
	}
	return added, tx.Commit()
}

// ClaimCA records a gateway CA made on this replica (airlock ca init with
// a storage block), or refuses it when the replicas already share
// another: the caller deletes the one it made then.
func ClaimCA(ctx context.Context, db *sqldb.DB, stateDir string) error {
	if err := db.Migrate(ctx, "replicas", replicaMigrations); err != nil {
		return err
	}
	_, err := RecordKeys(ctx, db, stateDir)
	return err
}

// SharedCA returns the fingerprint of the gateway CA the replicas share
// ("" when none is recorded).
func SharedCA(ctx context.Context, db *sqldb.DB) (string, error) {
	if err := db.Migrate(ctx, "replicas", replicaMigrations); err != nil {
		return "", err
	}
	rec, err := RecordedKeys(ctx, db)
	return rec[KeyCA], err
}

// auditEntries counts the shared audit log's entries (0 before the log's
// tables exist).
func auditEntries(ctx context.Context, tx *sqldb.Tx) (int, error) {
	var reg sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('entries')::text`).Scan(&reg); err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	if !reg.Valid {
		return 0, nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM entries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("storage: %w", err)
	}
	return n, nil
}

// sharedKeyBinds says what a shared key binds, for refusals.
func sharedKeyBinds(name string) string {
	return map[string]string{
		KeyCommandMAC: "the MACs of the redacted commands in the one audit log",
		KeyCheckpoint: "the signatures of the one audit log's checkpoints",
		KeyCA:         "the certificates targets trust",
	}[name]
}

// filesText names a key's files under the state directory.
func filesText(stateDir string, files []string) string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(stateDir, f)
	}
	return strings.Join(paths, " and ")
}

// usesGatewayCA reports whether a configuration signs with the gateway
// CA.
func usesGatewayCA(cfg *config.Config) bool {
	for _, c := range cfg.Credentials {
		if c.CA {
			return true
		}
	}
	return false
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
