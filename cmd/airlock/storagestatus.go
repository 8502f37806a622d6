package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"github.com/airlockgw/airlock/gateway/config"
	"github.com/airlockgw/airlock/gateway/engine"
)

// storageStatus prints the replicas sharing the configuration's database,
// whose configuration drifts, the shared keys and the schema versions.
// Exit status, as audit verify's: 0 no live replica drifts, 1 some do,
// 2 the status could not be read.
func storageStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("airlock storage status", "airlock storage status [--config FILE] [--json]", stderr)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, code, ok := parseVerb(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	cfg, ok := loadConfig(*cfgPath, stderr)
	if !ok {
		return exitFailed
	}
	if cfg.Storage == nil {
		fmt.Fprintf(stderr, "airlock: the configuration %s has no storage block: its gateway keeps its state in SQLite files in %s, without replicas\n", cfg.Path, cfg.StateDir)
		return exitFailed
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := engine.OpenStorage(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return exitFailed
	}
	defer db.Close()
	st, err := engine.ReadStorageStatus(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return exitFailed
	}
	file := statusFile{Path: cfg.Path, ConfigDigest: config.SecurityDigest(cfg)}
	if *asJSON {
		err = writeStatusJSON(stdout, sqldb.Describe(cfg.Storage.Postgres), file, st)
	} else {
		err = writeStatusText(stdout, sqldb.Describe(cfg.Storage.Postgres), file, st)
	}
	if err != nil {
		fmt.Fprintf(stderr, "airlock: %v\n", err)
		return exitFailed
	}
	if st.Drift() {
		return exitDamaged
	}
	return exitOK
}

// statusFile is the configuration file the command read.
type statusFile struct {
	Path         string `json:"path"`
	ConfigDigest string `json:"config_digest"`
}

// statusJSON is storage status --json's object.
type statusJSON struct {
	Database string              `json:"database"`
	File     statusFile          `json:"config_file"`
	Replicas []statusReplicaJSON `json:"replicas"`
	// Reference is the digest most live replicas hold ("" on a tie or
	// with none live); Drift whether some live replica holds another.
	Reference          string          `json:"reference_digest"`
	Tie                bool            `json:"tie"`
	Drift              bool            `json:"drift"`
	SharedKeys         []statusKeyJSON `json:"shared_keys"`
	CheckpointVerifier string          `json:"checkpoint_verifier,omitempty"`
	SchemaVersions     map[string]int  `json:"schema_versions"`
}

type statusReplicaJSON struct {
	ID            string    `json:"id"`
	Host          string    `json:"host"`
	PID           int64     `json:"pid"`
	StartedAt     time.Time `json:"started_at"`
	LeaseLeftS    float64   `json:"lease_left_s"`
	Live          bool      `json:"live"`
	ConfigDigest  string    `json:"config_digest"`
	DigestVersion int       `json:"config_digest_version"`
	Drift         bool      `json:"drift"`
	MatchesFile   bool      `json:"matches_config_file"`
}

type statusKeyJSON struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
}

func writeStatusJSON(w io.Writer, database string, file statusFile, st *engine.StorageStatus) error {
	out := statusJSON{Database: database, File: file, Replicas: []statusReplicaJSON{}, Reference: st.Reference, Tie: st.Tie,
		Drift: st.Drift(), SharedKeys: []statusKeyJSON{}, CheckpointVerifier: st.CheckpointVerifier, SchemaVersions: st.Versions}
	for _, r := range st.Replicas {
		out.Replicas = append(out.Replicas, statusReplicaJSON{ID: r.ID, Host: r.Host, PID: r.PID, StartedAt: time.Unix(0, r.Started).UTC(),
			LeaseLeftS: r.LeaseLeft, Live: r.Live(), ConfigDigest: r.ConfigDigest, DigestVersion: r.DigestVersion, Drift: r.Drift,
			MatchesFile: r.ConfigDigest == file.ConfigDigest})
	}
	for _, k := range st.SharedKeys {
		out.SharedKeys = append(out.SharedKeys, statusKeyJSON(k))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeStatusText(w io.Writer, database string, file statusFile, st *engine.StorageStatus) error {
	short := config.ShortDigest
	fmt.Fprintf(w, "database %s\n\n", database)
	live := st.Live()
	fmt.Fprintf(w, "replicas: %d live", live)
	if n := len(st.Replicas) - live; n > 0 {
		fmt.Fprintf(w, ", %d whose lease ran out (a survivor finishes their work and removes them)", n)
	}
	fmt.Fprintln(w)
	if len(st.Replicas) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  REPLICA\tHOST\tPID\tSTARTED\tLEASE LEFT\tCONFIG")
		for _, r := range st.Replicas {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Host, r.PID, time.Unix(0, r.Started).Format(timeWithZone),
				leaseLeft(r), cmp.Or(short(r.ConfigDigest), "(none)"), replicaNote(r, st, file))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nthis file: %s (config digest %s)\n", file.Path, short(file.ConfigDigest))
	switch {
	case live == 0:
		fmt.Fprintln(w, "configuration: no live replica")
	case st.Tie:
		fmt.Fprintf(w, "configuration DRIFT: the %d live replicas split between configurations, none held by most: reload every replica with the same file\n", live)
	case st.Drift():
		n := 0
		for _, r := range st.Replicas {
			if r.Drift {
				n++
			}
		}
		verb := "differ"
		if n == 1 {
			verb = "differs"
		}
		fmt.Fprintf(w, "configuration DRIFT: %d of %d live replicas %s from the majority's configuration (%s): reload every replica with the same file\n", n, live, verb, short(st.Reference))
	default:
		fmt.Fprintf(w, "configuration: every live replica enforces %s\n", short(st.Reference))
	}
	fmt.Fprintln(w, "\nshared keys:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range st.SharedKeys {
		fmt.Fprintf(tw, "  %s\t%s\n", k.Name, k.Fingerprint)
	}
	if st.CheckpointVerifier != "" {
		fmt.Fprintf(tw, "  checkpoint verifier (audit log)\t%s\n", st.CheckpointVerifier)
	}
	if len(st.SharedKeys) == 0 && st.CheckpointVerifier == "" {
		fmt.Fprintln(tw, "  none recorded yet (no replica has started)")
	}
	tw.Flush()
	var parts []string
	for _, n := range sortedKeys(st.Versions) {
		parts = append(parts, fmt.Sprintf("%s %d", n, st.Versions[n]))
	}
	_, err := fmt.Fprintf(w, "\nschema versions: %s\n", cmp.Or(strings.Join(parts, ", "), "none (run airlock storage migrate, or start a replica)"))
	return err
}

// replicaNote is what the status says of r beside its digest.
func replicaNote(r engine.ReplicaStatus, st *engine.StorageStatus, file statusFile) string {
	var notes []string
	switch {
	case r.Drift && st.Tie:
		notes = append(notes, "DRIFT (no majority)")
	case r.Drift:
		notes = append(notes, "DRIFT: differs from the majority's "+config.ShortDigest(st.Reference))
	}
	if r.ConfigDigest == file.ConfigDigest {
		notes = append(notes, "same as this file")
	}
	if r.ConfigDigest == "" {
		notes = append(notes, "an older build that records no digest")
	}
	return strings.Join(notes, "; ")
}

// leaseLeft is how long r's lease still runs, or since when it ran out.
func leaseLeft(r engine.ReplicaStatus) string {
	d := time.Duration(r.LeaseLeft * float64(time.Second)).Round(100 * time.Millisecond)
	if r.Live() {
		return d.String()
	}
	return "ran out " + (-d).String() + " ago"
}
