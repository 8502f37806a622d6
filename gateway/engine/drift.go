package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
)

// Configuration drift between replicas. Each replica records with its
// lease the security digest of the configuration in force
// (config.SecurityDigest): when it joins, when a reload puts another
// configuration in force, and at each renewal (a known_hosts file counts
// by its contents, which an edit changes without a reload). At each of
// these it reads its live peers' digests: those that differ from its own
// are airlock_replicas_config_drift, and a change of which peers differ,
// or of what, is logged once — a warning while some differ, a note when
// none does any more.
//
// Drift is warned about, not refused: a rolling reload makes replicas
// differ for a while, and a replica that stopped taking actions because
// a peer runs another file would turn an operator's slip into an outage.
// The operator reloads every replica with the same file; airlock storage
// status shows which differ.

// driftWatch is what a replica remembers of drift between renewals.
type driftWatch struct {
	mu sync.Mutex
	// stored is the digest this replica's row holds.
	stored string
	// seen describes the drift last logged: "" when none was.
	seen string
}

// configDigest is the security digest of the configuration in force.
func (e *core) configDigest() string { return config.SecurityDigest(e.conf().cfg) }

// publishConfig records the digest of the configuration in force with
// this replica's lease when it changed, then compares it with the live
// peers' (watchDrift). Its errors are logged: drift is watched, never a
// reason to stop.
func (r *replica) publishConfig(ctx context.Context) {
	digest := r.e.configDigest()
	r.drift.mu.Lock()
	defer r.drift.mu.Unlock()
	if digest != r.drift.stored {
		if _, err := r.db.ExecContext(ctx, `UPDATE replicas SET config_digest = ?, config_digest_version = ? WHERE id = ?`,
			digest, config.SecurityDigestVersion, r.ID()); err != nil {
			r.log.Warn("the configuration's digest is not recorded with the lease; will try again", "error", err)
			return
		}
		r.drift.stored = digest
	}
	r.e.metrics.setConfigDigest(digest)
	if err := r.watchDrift(ctx, digest); err != nil {
		r.log.Warn("reading the other replicas' configuration digests; will try again", "error", err)
	}
}

// watchDrift counts the live peers whose digest differs from mine, and
// logs a change of them. r.drift.mu is held.
func (r *replica) watchDrift(ctx context.Context, mine string) error {
	all, err := listReplicas(ctx, r.db, true)
	if err != nil {
		return err
	}
	var differ []string
	for _, p := range all {
		if p.ID == r.ID() || !p.Live() || p.ConfigDigest == mine {
			continue
		}
		differ = append(differ, p.ID+" "+p.shortDigest())
	}
	slices.Sort(differ)
	r.e.metrics.configDrift.Set(float64(len(differ)))
	seen := ""
	if len(differ) > 0 {
		seen = config.ShortDigest(mine) + ": " + strings.Join(differ, ", ")
	}
	if seen == r.drift.seen {
		return nil
	}
	if seen == "" {
		r.log.Info("configuration drift cleared: every live replica enforces the configuration in force here",
			"config_digest", config.ShortDigest(mine))
	} else {
		r.log.Warn("configuration drift: live replicas enforce another configuration than this one; reload every replica with the same file (airlock storage status shows which differ)",
			"config_digest", config.ShortDigest(mine), "differing", strings.Join(differ, ", "))
	}
	r.drift.seen = seen
	return nil
}

// ReplicaStatus is one replica's row in the database.
type ReplicaStatus struct {
	ID   string
	Host string
	PID  int64
	// Started is when it joined, on its own clock.
	Started int64
	// LeaseLeft is how long its lease still runs, on the database's
	// clock, in seconds; zero or less: it ran out (a survivor is to
	// finish the replica's work and remove it).
	LeaseLeft float64
	// ConfigDigest is the security digest of the configuration it
	// enforces (config.SecurityDigest), DigestVersion its version; ""
	// and 0 for a replica of a build that records none.
	ConfigDigest  string
	DigestVersion int
	// Drift is set by ReadStorageStatus: the replica is live and its
	// digest is not the reference.
	Drift bool
}

// Live reports whether the replica's lease still runs.
func (r ReplicaStatus) Live() bool { return r.LeaseLeft > 0 }

// shortDigest is the digest's short form, or what stands for none.
func (r ReplicaStatus) shortDigest() string {
	return cmp.Or(config.ShortDigest(r.ConfigDigest), "(none recorded: an older build)")
}

// replicaDigestVersion is the replicas' schema version from which their
// rows hold a configuration digest.
const replicaDigestVersion = 2

// listReplicas reads the replicas table, the oldest replica first;
// withDigest reads the digest columns (their schema is there).
func listReplicas(ctx context.Context, db sqldb.Querier, withDigest bool) ([]ReplicaStatus, error) {
	cols := `'', 0`
	if withDigest {
		cols = `config_digest, config_digest_version`
	}
	rows, err := db.QueryContext(ctx, `SELECT id, host, pid, started_at,
		EXTRACT(EPOCH FROM (lease_until - clock_timestamp()))::float8, `+cols+`
		FROM replicas ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("storage: read the replicas: %w", err)
	}
	defer rows.Close()
	var out []ReplicaStatus
	for rows.Next() {
		var r ReplicaStatus
		if err := rows.Scan(&r.ID, &r.Host, &r.PID, &r.Started, &r.LeaseLeft, &r.ConfigDigest, &r.DigestVersion); err != nil {
			return nil, fmt.Errorf("storage: read the replicas: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: read the replicas: %w", err)
	}
	return out, nil
}
