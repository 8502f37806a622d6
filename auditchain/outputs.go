package auditchain

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/deploy/sqldb"
)

// DefaultMaxBlob is the output store's default per-blob cap (8 MiB, the
// gateway's default output buffer).
const DefaultMaxBlob = 8 << 20

// An OutputStore keeps command output outside the chain: a separate SQLite
// file, owner-only, keyed by the SHA-256 of the stored bytes. The chain
// records only a Blob's digest, size and truncation flag, so output can be
// withheld from readers of the log and still be checked against it.
type OutputStore struct {
	db      *sqldb.DB
	owned   bool
	maxBlob int
	cache   *blobCache
}

// OutputOptions configure an OutputStore.
type OutputOptions struct {
	// Path is the database file (outputs.db), created 0600. Open refuses
	// a file that group or others can access, or another user owns
	// (*securefile.Error, as output can hold secrets).
	Path string
	// DB, instead of Path, is a PostgreSQL database that holds the
	// outputs, shared by the gateway's replicas; the caller closes it.
	DB *sqldb.DB
	// MaxBlob caps one blob; longer data is cut and flagged. Zero:
	// DefaultMaxBlob.
	MaxBlob int
}

// MigrateOutputs brings the output store's table on PostgreSQL to this
// build's schema (OpenOutputs does it too).
func MigrateOutputs(ctx context.Context, db *sqldb.DB) error {
	return db.Migrate(ctx, "outputs", pgOutputMigrations)
}

// pgOutputMigrations are the output store's schema versions on
// PostgreSQL (sqldb.Migrate).
var pgOutputMigrations = []string{
	`CREATE TABLE blobs (digest BYTEA PRIMARY KEY, data BYTEA NOT NULL)`,
}

// A Blob describes stored output.
// As a record field tagged "name" (see FieldsOf), its facts are the entry
// fields name_sha256, name_bytes, name_stored and name_truncated.
type Blob struct {
	Digest    [32]byte `audit:"sha256"`    // SHA-256 of the stored bytes
	Size      int64    `audit:"bytes"`     // bytes offered to Put
	Stored    int64    `audit:"stored"`    // bytes stored (Size capped at MaxBlob)
	Truncated bool     `audit:"truncated"` // Stored < Size
}

// OpenOutputs opens (creating when missing) the output store.
func OpenOutputs(ctx context.Context, opts OutputOptions) (*OutputStore, error) {
	if opts.MaxBlob <= 0 {
		opts.MaxBlob = DefaultMaxBlob
	}
	if opts.DB != nil {
		if err := opts.DB.Migrate(ctx, "outputs", pgOutputMigrations); err != nil {
			return nil, fmt.Errorf("audit log: output store: %w", err)
		}
		return newOutputStore(opts.DB, false, opts.MaxBlob), nil
	}
	if opts.Path == "" {
		return nil, errors.New("audit log: OutputOptions.Path (or DB) is required")
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log: output store: %w", err)
	}
	returnLargeAllocations()
	// Output can hold secrets: an existing file others may read is refused.
	if err := securefile.CreatePrivate(opts.Path); err != nil {
		return nil, err
	}
	raw, err := sql.Open("sqlite3", rwDSN(opts.Path))
	if err != nil {
		return nil, fmt.Errorf("audit log: output store: %w", err)
	}
	db := sqldb.Wrap(raw, sqldb.SQLite)
	// SQLite takes one writer at a time anyway: one connection keeps many
	// parallel actions from opening a connection (and a page cache) each.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS blobs (digest BLOB PRIMARY KEY, data BLOB NOT NULL) STRICT`); err != nil {
		db.Close()
		return nil, fmt.Errorf("audit log: output store: %w", err)
	}
	return newOutputStore(db, true, opts.MaxBlob), nil
}

// Close closes the store (and its database, unless the caller gave it).
func (s *OutputStore) Close() error {
	s.cache.stop()
	if !s.owned {
		return nil
	}
	return s.db.Close()
}

// Put stores data (cut to the cap) durably and returns its Blob. Storing
// the same bytes twice keeps one copy.
func (s *OutputStore) Put(ctx context.Context, data []byte) (Blob, error) {
	bs, err := s.PutAll(ctx, data)
	if err != nil {
		return Blob{}, err
	}
	return bs[0], nil
}

// emptyDigest is the SHA-256 of no bytes: empty output is never written,
// and Get answers it without the database.
var emptyDigest = sha256.Sum256(nil)

// PutAll stores several outputs (an action's stdout and stderr) in one
// transaction, so they cost one fsync between them, and returns their
// Blobs in order.
func (s *OutputStore) PutAll(ctx context.Context, data ...[]byte) ([]Blob, error) {
	blobs := make([]Blob, len(data))
	var stored [][]byte
	for i, d := range data {
		b := Blob{Size: int64(len(d))}
		if len(d) > s.maxBlob {
			d, b.Truncated = d[:s.maxBlob], true
		}
		b.Stored = int64(len(d))
		b.Digest = sha256.Sum256(d)
		blobs[i] = b
		if len(d) > 0 {
			stored = append(stored, d)
		}
	}
	if len(stored) == 0 {
		return blobs, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("audit log: store output: %w", err)
	}
	defer tx.Rollback()
	for i, d := range stored {
		digest := sha256.Sum256(d)
		if _, err := tx.ExecContext(ctx, `INSERT INTO blobs (digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING`, digest[:], d); err != nil {
			return nil, fmt.Errorf("audit log: store output %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("audit log: store output: %w", err)
	}
	return blobs, nil
}

// newOutputStore is the store on db (closed by Close when owned).
func newOutputStore(db *sqldb.DB, owned bool, maxBlob int) *OutputStore {
	return &OutputStore{db: db, owned: owned, maxBlob: maxBlob,
		cache: &blobCache{max: max(blobCacheBytes, 2*maxBlob), idle: blobCacheIdle}}
}

// Get returns the stored bytes of digest, checked against it, or an error
// wrapping ErrNotFound. The bytes may be shared with later calls: the
// caller must not modify them.
func (s *OutputStore) Get(ctx context.Context, digest [32]byte) ([]byte, error) {
	if digest == emptyDigest {
		return []byte{}, nil
	}
	if data, ok := s.cache.get(digest); ok {
		return data, nil
	}
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM blobs WHERE digest = ?`, digest[:]).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("audit log: output %s: %w", hex.EncodeToString(digest[:]), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: read output: %w", err)
	}
	if sha256.Sum256(data) != digest {
		return nil, fmt.Errorf("audit log: output %s does not match its digest", hex.EncodeToString(digest[:]))
	}
	s.cache.put(digest, data)
	return data, nil
}
