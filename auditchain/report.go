package auditchain

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/airlockgw/airlock/deploy/sqldb"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// VerifyOptions say what to verify and what to trust.
type VerifyOptions struct {
	// Path is the database file. It is opened read-only.
	Path string

	// DB, instead of Path, is a PostgreSQL database that holds the log
	// (Options.DB). It is read in one repeatable-read, read-only
	// transaction: replicas may go on appending meanwhile.
	DB *sqldb.DB

	// Key verifies checkpoint signatures; its name is the expected origin.
	// Required: the key in the database's own directory proves nothing
	// to someone who distrusts that machine, so the caller chooses it.
	Key note.Verifier

	// Trusted are signed checkpoints kept outside the database (a copy of
	// checkpoints.log, notes a witness stored). The database must extend
	// each of them.
	Trusted []TrustedNote
}

// A TrustedNote is a signed checkpoint from outside the database. Source
// names where it came from (a file, a witness); Index is its position
// there, from 1. Reports label it "Source#Index".
type TrustedNote struct {
	Source string
	Index  int
	Note   []byte
}

func (t TrustedNote) label() string {
	if t.Index == 0 {
		return t.Source
	}
	return t.Source + "#" + strconv.Itoa(t.Index)
}

// EvidenceError: a checkpoint kept outside the database (a copy of
// checkpoints.log, a witness's notes) cannot be used — it is malformed, or
// not signed by this log's key. It says nothing about the database; the
// verification was not done.
type EvidenceError struct {
	Source string
	Index  int
	Err    error
}

func (e *EvidenceError) Error() string {
	return fmt.Sprintf("audit log: the checkpoint file %s, note #%d, cannot be used: %v (this says nothing about the database: fix the file, or leave it out)", e.Source, e.Index, e.Err)
}

func (e *EvidenceError) Unwrap() error { return e.Err }

// ReadTrustedNotes reads a checkpoint file (one or more signed notes, as
// the log appends them) into TrustedNotes with path as their Source.
func ReadTrustedNotes(path string) ([]TrustedNote, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: read checkpoints: %w", err)
	}
	notes, err := SplitNotes(data)
	if err != nil {
		return nil, fmt.Errorf("audit log: %s: %w", path, err)
	}
	out := make([]TrustedNote, len(notes))
	for i, n := range notes {
		out[i] = TrustedNote{Source: path, Index: i + 1, Note: n}
	}
	return out, nil
}

// A Damage is one finding of Verify.
type Damage struct {
	// Seq is the first entry the damage concerns, or -1 when it concerns
	// no entry (a checkpoint, the schema). For damage found only through a
	// checkpoint, Seq is the start of the range that checkpoint could not
	// vouch for (the size of the last checkpoint that did verify).
	Seq    int64      `json:"seq"`
	Kind   DamageKind `json:"kind"`
	Source string     `json:"source"` // "database" or a trusted note's label
	Detail string     `json:"detail"`
}

// A Fork is the evidence of a fork: a signed checkpoint that the database
// contradicts and, when the database holds one, its own signed checkpoint
// with a consistency proof from the contradicted size to it.
type Fork struct {
	Size        int64          `json:"size"`
	TrustedNote string         `json:"trusted_note"`
	Source      string         `json:"source"`
	TrustedRoot tlog.Hash      `json:"trusted_root"`
	LocalRoot   tlog.Hash      `json:"local_root"` // recomputed from the database's entries
	LocalNote   string         `json:"local_note,omitempty"`
	LocalSize   int64          `json:"local_size,omitempty"`
	Proof       tlog.TreeProof `json:"proof,omitempty"` // LocalRoot at Size is a prefix of LocalNote's tree
}

// A Report is the result of Verify.
type Report struct {
	Entries            int64    `json:"entries"`             // rows in the database
	Verified           int64    `json:"verified"`            // entries checked before the first entry damage
	Checkpoints        int      `json:"checkpoints"`         // database checkpoints that verified
	TrustedCheckpoints int      `json:"trusted_checkpoints"` // outside checkpoints that verified
	Covered            int64    `json:"covered"`             // entries vouched for by a verified checkpoint
	Uncovered          int64    `json:"uncovered"`           // Entries - Covered: not yet vouched for
	Damage             []Damage `json:"damage"`
	Fork               *Fork    `json:"fork,omitempty"`
	// TimeSetBack, when set, says entry times go backwards somewhere in
	// the verified entries: the system clock was set back while entries
	// were written. It is not damage (order is by seq, which the chain
	// fixes), but those times do not show the order of events.
	TimeSetBack *TimeSetBack `json:"time_set_back,omitempty"`
}

// TimeSetBack summarises entries whose time is earlier than the previous
// entry's.
type TimeSetBack struct {
	Entries  int64         `json:"entries"`   // entries earlier than their predecessor
	FirstSeq int64         `json:"first_seq"` // the first of them
	Largest  time.Duration `json:"largest_ns"`
}

// String explains the finding in a sentence for people.
func (t *TimeSetBack) String() string {
	n := "1 entry has a time"
	if t.Entries != 1 {
		n = fmt.Sprintf("%d entries have a time", t.Entries)
	}
	return fmt.Sprintf("%s earlier than the entry before (first at seq %d, by up to %v): the system clock was set back while the log was written; the order of events is the seq order, not the times",
		n, t.FirstSeq, t.Largest)
}

// Intact reports whether Verify found no damage.
func (r *Report) Intact() bool { return len(r.Damage) == 0 }

// First returns the finding with the lowest entry seq, or else the first
// finding, or nil when the log is intact.
func (r *Report) First() *Damage {
	var best *Damage
	for i := range r.Damage {
		d := &r.Damage[i]
		if d.Seq >= 0 && (best == nil || best.Seq < 0 || d.Seq < best.Seq) {
			best = d
		}
	}
	if best == nil && len(r.Damage) > 0 {
		best = &r.Damage[0]
	}
	return best
}

// FirstUnvouched is the seq of the first entry a reader of the log must
// not vouch for: math.MaxInt64 when the log is intact, else the first
// damaged entry's, and 0 when the damage is to the log as a whole.
func (r *Report) FirstUnvouched() int64 {
	if r.Intact() {
		return math.MaxInt64
	}
	return max(r.First().Seq, 0)
}
