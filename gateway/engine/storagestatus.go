package engine

import (
	"context"
	"fmt"

	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
)

// StorageStatus is what the database the replicas share says of them:
// airlock storage status. It is read, never changed: a gateway need not
// run where it is read.
type StorageStatus struct {
	// Replicas are the replicas' rows, the oldest first, with their
	// Drift set.
	Replicas []ReplicaStatus
	// Reference is the configuration digest most live replicas hold: a
	// live replica with another is drifting. "" when no replica is live,
	// when Tie, or when most live replicas record none (older builds).
	Reference string
	// Tie: two or more digests are each held by as many live replicas,
	// more than any other; no digest is the reference, and every live
	// replica counts as drifting.
	Tie bool
	// SharedKeys are the keys the replicas share, by name, with their
	// fingerprints as the first replica recorded them.
	SharedKeys []SharedKeyStatus
	// CheckpointVerifier is the audit log's checkpoint verifier key as
	// recorded with the log (its name and key hash, name+hash), "" when
	// none is.
	CheckpointVerifier string
	// Versions are each component's schema version.
	Versions map[string]int
}

// SharedKeyStatus is one key the replicas share.
type SharedKeyStatus struct {
	Name        string
	Fingerprint string
}

// Drift reports whether some live replica drifts.
func (s *StorageStatus) Drift() bool {
	for _, r := range s.Replicas {
		if r.Drift {
			return true
		}
	}
	return false
}

// Live counts the live replicas.
func (s *StorageStatus) Live() int {
	n := 0
	for _, r := range s.Replicas {
		if r.Live() {
			n++
		}
	}
	return n
}

// ReadStorageStatus reads the replicas, their configuration digests, the
// shared keys and the schema versions from db. Tables a database does not
// have yet (no replica joined, an older schema) read as empty.
func ReadStorageStatus(ctx context.Context, db *sqldb.DB) (*StorageStatus, error) {
	vs, err := db.Versions(ctx)
	if err != nil {
		return nil, err
	}
	st := &StorageStatus{Versions: vs}
	if v := vs["replicas"]; v > 0 {
		if st.Replicas, err = listReplicas(ctx, db, v >= replicaDigestVersion); err != nil {
			return nil, err
		}
		if st.SharedKeys, err = readSharedKeys(ctx, db); err != nil {
			return nil, err
		}
	}
	st.Reference, st.Tie = reference(st.Replicas)
	for i, r := range st.Replicas {
		st.Replicas[i].Drift = r.Live() && (st.Tie || r.ConfigDigest != st.Reference)
	}
	var hasLog bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('meta') IS NOT NULL`).Scan(&hasLog); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if hasLog {
		// A log whose first replica has not recorded its key yet has none.
		if v, err := auditchain.RecordedVerifierKey(ctx, db); err == nil {
			st.CheckpointVerifier = fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
		}
	}
	return st, nil
}

// reference is the digest held by more live replicas than any other, or
// tie when several are held by as many.
func reference(rs []ReplicaStatus) (digest string, tie bool) {
	counts := map[string]int{}
	for _, r := range rs {
		if r.Live() {
			counts[r.ConfigDigest]++
		}
	}
	best := 0
	for d, n := range counts {
		switch {
		case n > best:
			digest, best, tie = d, n, false
		case n == best:
			tie = true
		}
	}
	if tie {
		return "", true
	}
	return digest, false
}

// readSharedKeys reads the shared_keys table's names and fingerprints.
func readSharedKeys(ctx context.Context, db *sqldb.DB) ([]SharedKeyStatus, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, fingerprint FROM shared_keys ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("storage: read the shared keys: %w", err)
	}
	defer rows.Close()
	var out []SharedKeyStatus
	for rows.Next() {
		var k SharedKeyStatus
		if err := rows.Scan(&k.Name, &k.Fingerprint); err != nil {
			return nil, fmt.Errorf("storage: read the shared keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: read the shared keys: %w", err)
	}
	return out, nil
}
