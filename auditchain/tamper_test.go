package auditchain

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The catalogue's log: 45 appended entries with a checkpoint every 10, so
// checkpoint entries sit at seqs 10, 20, 30 and 40, the log holds 49 rows
// (seqs 0-48) and the final checkpoint at Close covers all 49.
const (
	catalogueAppends = 45
	catalogueRows    = 49
)

// tamper opens the database directly, drops the append-only triggers,
// runs fn, and puts the triggers back exactly as they were, so that only
// what fn does differs.
func tamper(t *testing.T, path string, fn func(db *sql.DB)) {
	t.Helper()
	tamperKeep(t, path, true, fn)
}

func tamperKeep(t *testing.T, path string, restoreTriggers bool, fn func(db *sql.DB)) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var triggers []string
	rows, err := db.Query(`SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n, s string
		if err := rows.Scan(&n, &s); err != nil {
			t.Fatal(err)
		}
		names, triggers = append(names, n), append(triggers, s)
	}
	rows.Close()
	for _, n := range names {
		mustExec(t, db, `DROP TRIGGER `+n)
	}
	fn(db)
	if restoreTriggers {
		for _, s := range triggers {
			mustExec(t, db, s)
		}
	}
	mustExec(t, db, `PRAGMA wal_checkpoint(TRUNCATE)`)
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func readLeaf(t *testing.T, db *sql.DB, seq int64) []byte {
	t.Helper()
	var leaf []byte
	if err := db.QueryRow(`SELECT leaf FROM entries WHERE seq = ?`, seq).Scan(&leaf); err != nil {
		t.Fatalf("read leaf %d: %v", seq, err)
	}
	return leaf
}

type rawRow struct {
	seq                     int64
	time                    int64
	kind, action, run       string
	leaf, leafHash, chainHS []byte
}

func readRows(t *testing.T, db *sql.DB, from int64) []rawRow {
	t.Helper()
	rows, err := db.Query(`SELECT seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain FROM entries WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []rawRow
	for rows.Next() {
		var r rawRow
		if err := rows.Scan(&r.seq, &r.time, &r.kind, &r.action, &r.run, &r.leaf, &r.leafHash, &r.chainHS); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func insertRow(t *testing.T, db *sql.DB, r rawRow) {
	t.Helper()
	mustExec(t, db, `INSERT INTO entries (seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.seq, r.time, r.kind, r.action, r.run, r.leaf, r.leafHash, r.chainHS)
}

// shift renumbers the rows from seq on by delta (their leaves unchanged).
func shift(t *testing.T, db *sql.DB, from, delta int64) {
	t.Helper()
	rs := readRows(t, db, from)
	mustExec(t, db, `DELETE FROM entries WHERE seq >= ?`, from)
	for _, r := range rs {
		r.seq += delta
		insertRow(t, db, r)
	}
}

// rowFor builds a self-consistent row for e at seq, chained after prev.
func rowFor(t *testing.T, e Entry, seq int64, prev [32]byte) rawRow {
	t.Helper()
	e.Seq = seq
	leaf, err := EncodeLeaf(e)
	if err != nil {
		t.Fatal(err)
	}
	lh := tlog.RecordHash(leaf)
	c := ChainHash(prev, leaf)
	return rawRow{seq, e.Time.UnixNano(), e.Kind.String(), e.ActionID, e.RunID, leaf, lh[:], c[:]}
}

func chainAt(t *testing.T, db *sql.DB, seq int64) [32]byte {
	t.Helper()
	if seq < 0 {
		return chainGenesis
	}
	var b []byte
	if err := db.QueryRow(`SELECT chain FROM entries WHERE seq = ?`, seq).Scan(&b); err != nil {
		t.Fatal(err)
	}
	var c [32]byte
	copy(c[:], b)
	return c
}

// rederive recomputes what an attacker who knows the format would: the
// leaf hash and chain of every row from seq on, and (when tree is set)
// the whole stored tree.
func rederive(t *testing.T, db *sql.DB, from int64, tree bool) {
	t.Helper()
	prev := chainAt(t, db, from-1)
	for _, r := range readRows(t, db, from) {
		lh := tlog.RecordHash(r.leaf)
		prev = ChainHash(prev, r.leaf)
		mustExec(t, db, `UPDATE entries SET leaf_hash = ?, chain = ? WHERE seq = ?`, lh[:], prev[:], r.seq)
	}
	if tree {
		mustExec(t, db, `DELETE FROM tree_hashes`)
		var f frontier
		for _, r := range readRows(t, db, 0) {
			hs, err := f.add(tlog.RecordHash(r.leaf))
			if err != nil {
				t.Fatal(err)
			}
			base := tlog.StoredHashIndex(0, r.seq)
			for j, h := range hs {
				mustExec(t, db, `INSERT INTO tree_hashes (idx, hash) VALUES (?, ?)`, base+int64(j), h[:])
			}
		}
	}
}

// cutTail deletes the rows from seq on and, with tree, their stored hashes.
func cutTail(t *testing.T, db *sql.DB, from int64, tree bool) {
	t.Helper()
	mustExec(t, db, `DELETE FROM entries WHERE seq >= ?`, from)
	if tree {
		mustExec(t, db, `DELETE FROM tree_hashes WHERE idx >= ?`, tlog.StoredHashIndex(0, from))
	}
}

func flipLeafByte(t *testing.T, db *sql.DB, seq int64) {
	t.Helper()
	leaf := readLeaf(t, db, seq)
	leaf[len(leaf)-1] ^= 0x01 // the last byte of the last field's value
	mustExec(t, db, `UPDATE entries SET leaf = ? WHERE seq = ?`, leaf, seq)
}

func signerFor(t *testing.T, o Options) note.Signer {
	t.Helper()
	b, err := os.ReadFile(o.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signCheckpoint(t *testing.T, s note.Signer, c Checkpoint) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: c.Text()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func treeRoot(t *testing.T, db *sql.DB, size int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(size, dbHashReader{context.Background(), db})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func checkpointNote(t *testing.T, db *sql.DB, size int64) []byte {
	t.Helper()
	var msg []byte
	if err := db.QueryRow(`SELECT note FROM checkpoints WHERE size = ?`, size).Scan(&msg); err != nil {
		t.Fatalf("checkpoint %d: %v", size, err)
	}
	return msg
}

// finding is what a tamper case must produce: the first damage.
type finding struct {
	Seq  int64
	Kind DamageKind
}

// tamperCase is one way of changing a log behind the gateway's back, and
// the first damage Verify must report (nil: intact).
type tamperCase struct {
	name         string
	trusted      bool // verify with checkpoints.log as the outside record
	dropTriggers bool // leave the append-only triggers dropped
	tamper       func(t *testing.T, o Options, db *sql.DB)
	want         *finding
}

// forgedEntry is sample entry i with a field the gateway never wrote.
func forgedEntry(i int) Entry {
	e := sampleEntry(i)
	e.Fields = append(e.Fields, Str("forged", "yes"))
	return e
}

// tamperCatalogue is every tampering Verify must catch, and where.
var tamperCatalogue = []tamperCase{
	{name: "untouched", tamper: func(*testing.T, Options, *sql.DB) {}},
	{name: "untouched with trusted file", trusted: true, tamper: func(*testing.T, Options, *sql.DB) {}},
	{
		name:   "one byte of the first leaf",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { flipLeafByte(t, db, 0) },
		want:   &finding{0, DamageModified},
	},
	{
		name:   "one byte of a middle leaf",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { flipLeafByte(t, db, 25) },
		want:   &finding{25, DamageModified},
	},
	{
		name:   "one byte of the last leaf",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { flipLeafByte(t, db, catalogueRows-1) },
		want:   &finding{catalogueRows - 1, DamageModified},
	},
	{
		name: "leaf hash column only",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `UPDATE entries SET leaf_hash = zeroblob(32) WHERE seq = 25`)
		},
		want: &finding{25, DamageModified},
	},
	{
		name: "chain column only",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `UPDATE entries SET chain = zeroblob(32) WHERE seq = 25`)
		},
		want: &finding{25, DamageModified},
	},
	{
		name: "stored tree hash only",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `UPDATE tree_hashes SET hash = zeroblob(32) WHERE idx = ?`, tlog.StoredHashIndex(0, 25))
		},
		want: &finding{25, DamageModified},
	},
	{
		name: "kind column only",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `UPDATE entries SET kind = 'token.rotated' WHERE seq = 25`)
		},
		want: &finding{25, DamageModified},
	},
	{
		name: "leaf changed with its leaf hash recomputed",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			flipLeafByte(t, db, 25)
			lh := tlog.RecordHash(readLeaf(t, db, 25))
			mustExec(t, db, `UPDATE entries SET leaf_hash = ? WHERE seq = 25`, lh[:])
		},
		want: &finding{25, DamageModified},
	},
	{
		name: "chain recomputed from the changed row on",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			flipLeafByte(t, db, 25)
			rederive(t, db, 25, false)
		},
		want: &finding{25, DamageModified},
	},
	{
		// Only a checkpoint can see this: the damage lies between the
		// last checkpoint that verifies (20) and the first that does
		// not (30).
		name: "chain and stored tree recomputed",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			flipLeafByte(t, db, 25)
			rederive(t, db, 25, true)
		},
		want: &finding{20, DamageFork},
	},
	{
		name:   "middle row deleted",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { mustExec(t, db, `DELETE FROM entries WHERE seq = 25`) },
		want:   &finding{25, DamageDeleted},
	},
	{
		name: "middle row deleted, later rows renumbered",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `DELETE FROM entries WHERE seq = 25`)
			shift(t, db, 26, -1)
		},
		want: &finding{25, DamageDeleted},
	},
	{
		// Renumbered by someone who knows the format: every later
		// leaf re-encoded with its new seq, chain and tree
		// recomputed. The checkpoint entry written after size 30 now
		// sits at 29: the removal lies after 20, the last checkpoint
		// that verifies.
		name:         "middle row deleted, later rows rewritten with their chain and tree",
		dropTriggers: true,
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			renumberRewritten(t, db, 25)
		},
		want: &finding{20, DamageDeleted},
	},
	{
		name:   "first row deleted",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { mustExec(t, db, `DELETE FROM entries WHERE seq = 0`) },
		want:   &finding{0, DamageDeleted},
	},
	{
		name: "first row deleted, later rows renumbered",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `DELETE FROM entries WHERE seq = 0`)
			shift(t, db, 1, -1)
		},
		want: &finding{0, DamageDeleted},
	},
	{
		name: "row inserted, later rows renumbered",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			shift(t, db, 25, 1)
			insertRow(t, db, rowFor(t, forgedEntry(25), 25, chainAt(t, db, 24)))
		},
		want: &finding{25, DamageInserted},
	},
	{
		name: "two rows swapped",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			rs := readRows(t, db, 25)[:2]
			mustExec(t, db, `DELETE FROM entries WHERE seq IN (25, 26)`)
			rs[0].seq, rs[1].seq = 26, 25
			insertRow(t, db, rs[0])
			insertRow(t, db, rs[1])
		},
		want: &finding{25, DamageReordered},
	},
	{
		name: "two distant rows swapped",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			a, b := readRows(t, db, 25)[0], readRows(t, db, 33)[0]
			mustExec(t, db, `DELETE FROM entries WHERE seq IN (25, 33)`)
			a.seq, b.seq = 33, 25
			insertRow(t, db, a)
			insertRow(t, db, b)
		},
		want: &finding{25, DamageReordered},
	},
	{
		name: "row duplicated, later rows renumbered",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			r := readRows(t, db, 25)[0]
			shift(t, db, 26, 1)
			r.seq = 26
			insertRow(t, db, r)
		},
		want: &finding{26, DamageDuplicated},
	},
	{
		name:   "tail cut inside the last checkpoint",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { cutTail(t, db, 45, true) },
		want:   &finding{45, DamageTruncated},
	},
	{
		name:   "tail cut across a checkpoint",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { cutTail(t, db, 35, true) },
		want:   &finding{35, DamageTruncated},
	},
	{
		name:   "tail cut, stored tree left",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { cutTail(t, db, 45, false) },
		want:   &finding{45, DamageTruncated},
	},
	{
		name:    "tail cut with its checkpoints, caught outside",
		trusted: true,
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			cutTail(t, db, 35, true)
			mustExec(t, db, `DELETE FROM checkpoints WHERE size > 35`)
		},
		want: &finding{35, DamageRolledBack},
	},
	{
		name: "tail cut, other rows appended naively under the same seqs",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			cutTail(t, db, 35, true)
			for i := int64(35); i < catalogueRows; i++ {
				r := rowFor(t, forgedEntry(int(i)), i, [32]byte{})
				insertRow(t, db, r)
			}
		},
		want: &finding{35, DamageModified},
	},
	{
		// Rebuilt with the right chain and tree, only the checkpoint
		// at 40 contradicts it; the damage lies after 30.
		name: "tail cut, other rows appended with chain and tree",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			cutTail(t, db, 35, true)
			prev := chainAt(t, db, 34)
			for i := int64(35); i < catalogueRows; i++ {
				r := rowFor(t, forgedEntry(int(i)), i, prev)
				copy(prev[:], r.chainHS)
				insertRow(t, db, r)
			}
			rederive(t, db, 35, true)
		},
		want: &finding{30, DamageFork},
	},
	{
		name: "checkpoint size edited",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			msg := strings.Replace(string(checkpointNote(t, db, 20)), "\n20\n", "\n19\n", 1)
			mustExec(t, db, `UPDATE checkpoints SET note = ? WHERE size = 20`, []byte(msg))
		},
		want: &finding{-1, DamageBadSignature},
	},
	{
		name: "checkpoint root edited",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			msg := checkpointNote(t, db, 20)
			c, err := ParseCheckpoint(string(msg[:strings.Index(string(msg), "\n\n")+1]))
			if err != nil {
				t.Fatal(err)
			}
			bad := c
			bad.Root[0] ^= 1
			out := strings.Replace(string(msg), c.Text(), bad.Text(), 1)
			mustExec(t, db, `UPDATE checkpoints SET note = ? WHERE size = 20`, []byte(out))
		},
		want: &finding{-1, DamageBadSignature},
	},
	{
		name: "checkpoint signature edited",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			msg := string(checkpointNote(t, db, 20))
			i := strings.LastIndex(msg, " ") + 1
			sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(msg[i:]))
			if err != nil {
				t.Fatal(err)
			}
			sig[len(sig)-1] ^= 1 // the Ed25519 signature, not the key hash
			out := msg[:i] + base64.StdEncoding.EncodeToString(sig) + "\n"
			mustExec(t, db, `UPDATE checkpoints SET note = ? WHERE size = 20`, []byte(out))
		},
		want: &finding{-1, DamageBadSignature},
	},
	{
		name: "checkpoint signed by an unknown key",
		tamper: func(t *testing.T, o Options, db *sql.DB) {
			skey, _, err := note.GenerateKey(rand.Reader, o.Origin)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := note.NewSigner(skey)
			msg := signCheckpoint(t, s, Checkpoint{o.Origin, 20, treeRoot(t, db, 20)})
			mustExec(t, db, `UPDATE checkpoints SET note = ? WHERE size = 20`, msg)
		},
		want: &finding{-1, DamageUnknownKey},
	},
	{
		name: "checkpoint for another origin",
		tamper: func(t *testing.T, o Options, db *sql.DB) {
			msg := signCheckpoint(t, signerFor(t, o), Checkpoint{"other.test/log", 20, treeRoot(t, db, 20)})
			mustExec(t, db, `UPDATE checkpoints SET note = ? WHERE size = 20`, msg)
		},
		want: &finding{-1, DamageWrongOrigin},
	},
	{
		name:   "checkpoint deleted",
		tamper: func(t *testing.T, _ Options, db *sql.DB) { mustExec(t, db, `DELETE FROM checkpoints WHERE size = 20`) },
		want:   &finding{-1, DamageCheckpointDeleted},
	},
	{
		name: "checkpoint sizes going backwards",
		tamper: func(t *testing.T, o Options, db *sql.DB) {
			msg := signCheckpoint(t, signerFor(t, o), Checkpoint{o.Origin, 15, treeRoot(t, db, 15)})
			mustExec(t, db, `INSERT INTO checkpoints (size, note) VALUES (15, ?)`, msg)
		},
		want: &finding{-1, DamageCheckpointOrder},
	},
	{
		name: "old checkpoint replayed",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `INSERT INTO checkpoints (size, note) VALUES (20, ?)`, checkpointNote(t, db, 20))
		},
		want: &finding{-1, DamageReplayed},
	},
	{
		name: "checkpoint size column edited",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			mustExec(t, db, `UPDATE checkpoints SET size = 21 WHERE size = 20`)
		},
		want: &finding{-1, DamageMalformed},
	},
	{
		name:         "triggers dropped",
		dropTriggers: true,
		tamper:       func(*testing.T, Options, *sql.DB) {},
		want:         &finding{-1, DamageSchema},
	},
	{
		name: "NULL in a hash column",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			loosen(t, db)
			mustExec(t, db, `UPDATE entries SET chain = NULL WHERE seq = 25`)
		},
		want: &finding{25, DamageMalformed},
	},
	{
		name: "hash stored as TEXT",
		tamper: func(t *testing.T, _ Options, db *sql.DB) {
			loosen(t, db)
			mustExec(t, db, `UPDATE entries SET leaf_hash = hex(leaf_hash) WHERE seq = 25`)
		},
		want: &finding{25, DamageMalformed},
	},
}

func TestTamperCatalogue(t *testing.T) {
	for _, tt := range tamperCatalogue {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			o.CheckpointEvery = 10
			v := buildLog(t, o, catalogueAppends)
			tamperKeep(t, o.Path, !tt.dropTriggers, func(db *sql.DB) { tt.tamper(t, o, db) })
			var trusted []TrustedNote
			if tt.trusted {
				trusted = trustedFile(t, o)
			}
			rep := verify(t, o, v, trusted...)
			var got *finding
			if f := rep.First(); f != nil {
				got = &finding{f.Seq, f.Kind}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("first damage (-want +got):\n%s\nall: %+v", diff, rep.Damage)
			}
		})
	}
}

// renumberRewritten deletes entry del and rewrites every later row as an
// attacker who knows the format would: each leaf re-encoded with its new
// seq, its leaf hash, the chain and the stored tree recomputed.
func renumberRewritten(t *testing.T, db *sql.DB, del int64) {
	t.Helper()
	rs := readRows(t, db, del+1)
	mustExec(t, db, `DELETE FROM entries WHERE seq >= ?`, del)
	prev := chainAt(t, db, del-1)
	for _, r := range rs {
		e, err := DecodeLeaf(r.leaf)
		if err != nil {
			t.Fatal(err)
		}
		nr := rowFor(t, e, r.seq-1, prev)
		prev = [32]byte(nr.chainHS)
		insertRow(t, db, nr)
	}
	rederive(t, db, 0, true)
}

// loosen rebuilds the entries table without types or constraints, as an
// attacker must before storing NULLs or TEXT in it.
func loosen(t *testing.T, db *sql.DB) {
	t.Helper()
	mustExec(t, db, `CREATE TABLE loose (seq INTEGER PRIMARY KEY, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain)`)
	mustExec(t, db, `INSERT INTO loose SELECT * FROM entries`)
	mustExec(t, db, `DROP TABLE entries`)
	mustExec(t, db, `ALTER TABLE loose RENAME TO entries`)
}
