#!/usr/bin/env python3
"""Verify an airlock audit log (audit.db) without airlock.

A second, independent verifier, written from the formats given in
docs/audit.md ("Verifying without airlock"), not from airlock's code. It
needs Python 3.9 or later and the `cryptography` package (Debian:
python3-cryptography) for Ed25519.

    airlock-verify.py --key checkpoint.vkey [--trusted-checkpoint FILE]... [--json] audit.db

Exit 0: intact. 1: damaged (the first damaged entry is named). 2: could not
verify (no file, not an audit log, a bad key, an unusable checkpoint file).
3: the key is not this log's (its name is not the log's origin, or no
checkpoint in the database is signed by it).
"""
import argparse, base64, hashlib, json, os, re, sqlite3, sys, urllib.parse

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
except ImportError:
    sys.exit("airlock-verify: the Python package 'cryptography' is missing; "
             "install it (Debian: apt-get install python3-cryptography) and run again")

KINDS = {"gateway.started", "gateway.stopped", "config.loaded", "run.created", "run.approved",
         "run.denied", "run.ended", "action.requested", "approval.requested", "approval.decided",
         "action.connecting", "action.finished", "output.read", "token.rotated", "checkpoint",
         "auth.failed", "agent.added", "agent.revoked", "reviewer.added", "reviewer.disabled",
         "reviewer.enabled", "reviewer.removed", "reviewer.password_changed", "command.revealed",
         "reviewer.renamed", "reviewer.sessions_ended"}
TRIGGERS = [f"CREATE TRIGGER {t}_no_{op.lower()} BEFORE {op} ON {t} BEGIN SELECT RAISE(ABORT, "
            f"'auditchain: {t} is append-only'); END"
            for t in ("meta", "entries", "tree_hashes", "checkpoints") for op in ("UPDATE", "DELETE")]
SCHEMA = [
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    "CREATE TABLE entries (\n\tseq INTEGER PRIMARY KEY,\n\ttime_ns INTEGER NOT NULL,\n"
    "\tkind TEXT NOT NULL,\n\taction_id TEXT NOT NULL,\n\trun_id TEXT NOT NULL,\n"
    "\tleaf BLOB NOT NULL,\n\tleaf_hash BLOB NOT NULL,\n\tchain BLOB NOT NULL\n) STRICT",
    "CREATE INDEX entries_by_action ON entries (action_id, kind)",
    "CREATE INDEX entries_connecting ON entries (action_id) WHERE kind = 'action.connecting'",
    "CREATE TABLE tree_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL) STRICT",
    "CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, size INTEGER NOT NULL, note BLOB NOT NULL) STRICT",
    "CREATE INDEX checkpoints_by_size ON checkpoints (size)"] + TRIGGERS
SCHEMA_QUERY = "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema"
SIG = "\u2014 "  # an em dash and a space begin each signature line of a note


class CannotVerify(Exception):
    pass


class KeyMismatch(Exception):
    pass


def sha256(*parts):
    return hashlib.sha256(b"".join(parts)).digest()


def b64(s):  # canonical standard base64 only
    raw = base64.b64decode(s, validate=True)
    if base64.b64encode(raw).decode() != s:
        raise ValueError("not canonical base64")
    return raw


class Key:
    """A verifier key: NAME+HASH+base64(0x01 || 32-byte Ed25519 public key)."""
    def __init__(self, text):
        try:
            self.name, khash, data = text.strip().split("+", 2)
            raw = b64(data)
            ok = self.name and not any(c.isspace() for c in self.name) and len(khash) == 8 \
                and len(raw) == 33 and raw[0] == 1 and bytes.fromhex(khash) == sha256(self.name.encode(), b"\n", raw)[:4]
        except ValueError:
            ok = False
        if not ok:
            raise CannotVerify("the verifier key is not NAME+HASH+KEY of an Ed25519 key; give the "
                               "one line of keys/checkpoint.vkey")
        self.hash, self.pub = bytes.fromhex(khash), Ed25519PublicKey.from_public_bytes(raw[1:])


def open_note(msg, key):
    """Returns (problem, (origin, size, root)); problem is None for a good checkpoint."""
    try:
        text = msg.decode("utf-8") if isinstance(msg, bytes) else None
    except UnicodeDecodeError:
        text = None
    if text is None or any(c < " " and c != "\n" for c in text) or "\n\n" not in text:
        return "malformed", None
    i = text.rindex("\n\n")
    body, sigs, signed = text[:i + 1], text[i + 2:], False
    if not sigs.endswith("\n"):
        return "malformed", None
    for line in sigs[:-1].split("\n"):
        name, _, s = line[len(SIG):].partition(" ")
        try:
            sig = b64(s) if line.startswith(SIG) and name and "+" not in name else b""
        except ValueError:
            sig = b""
        if len(sig) < 5:
            return "malformed", None
        if name == key.name and sig[:4] == key.hash:
            try:
                key.pub.verify(sig[4:], body.encode())
            except InvalidSignature:
                return "bad_signature", None
            signed = True
    if not signed:
        return "unknown_key", None
    lines = body[:-1].split("\n")
    try:
        origin, size, root = lines[0], int(lines[1]), b64(lines[2])
        if str(size) != lines[1] or size < 0 or len(root) != 32 or "" in lines[3:] or not origin:
            raise ValueError
    except (ValueError, IndexError):
        return "malformed", None
    return ("wrong_origin", None) if origin != key.name else (None, (origin, size, root))


def split_notes(data):
    """The notes of a checkpoint file: text lines, a blank line, signature lines; blank lines between."""
    lines, notes, i = data.splitlines(keepends=True), [], 0
    blank = lambda l: l.strip(b"\n") == b""
    while True:
        while i < len(lines) and blank(lines[i]):
            i += 1
        if i == len(lines):
            return notes
        start = i
        while i < len(lines) and not blank(lines[i]):
            i += 1
        sigs = i = i + 1
        while i < len(lines) and lines[i].startswith(SIG.encode()):
            i += 1
        if i == sigs or sigs > len(lines):
            raise CannotVerify(f"note {len(notes) + 1} has no signature block")
        notes.append(b"".join(lines[start:i]))


def decode_leaf(leaf):
    """Parses a version 1 leaf strictly: (seq, time_ns, kind, action_id, run_id, {name: (tag, value)})."""
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(leaf):
            raise ValueError("truncated")
        pos += n
        return leaf[pos - n:pos]
    num = lambda n, signed=False: int.from_bytes(take(n), "big", signed=signed)
    if len(leaf) > 4 << 20 or num(1) != 1:
        raise ValueError("not a version 1 leaf")
    seq, time_ns = num(8), num(8, True)
    kind, action, run = take(num(1)), take(num(2)), take(num(2))
    if seq >= 1 << 63 or kind.decode("latin-1") not in KINDS or max(len(action), len(run)) > 256:
        raise ValueError("bad header")
    fields, prev, count = {}, b"", num(2)
    if count > 256:
        raise ValueError("too many fields")
    for _ in range(count):
        name, tag = take(num(1)), num(1)
        if not re.fullmatch(rb"[a-z0-9_.]{1,64}", name) or (fields and name <= prev):
            raise ValueError("bad field name or order")
        if tag in (1, 4) and (n := num(4)) <= 1 << 20:
            value = take(n)
        elif tag == 2:
            value = num(8, True)
        elif tag == 3 and (b := num(1)) <= 1:
            value = b == 1
        else:
            raise ValueError("bad value tag, length or bool")
        fields[name.decode()], prev = (tag, value), name
    if pos != len(leaf):
        raise ValueError("trailing bytes")
    return seq, time_ns, kind.decode(), action, run, fields


class Verifier:
    def __init__(self, con, key, trusted):
        self.con, self.key, self.trusted = con, key, trusted
        self.findings, self.stopped = [], False
        self.nodes, self.n, self.roots = {}, 0, bytearray(sha256())
        self.last_good, self.last_db, self.last_trusted, self.good = 0, 0, {}, [0, 0]

    def find(self, seq, kind, detail, stop=False):
        self.findings.append({"seq": seq, "kind": kind, "detail": detail})
        self.stopped = self.stopped or stop

    def root(self, size):
        return bytes(self.roots[32 * size:32 * size + 32])

    def add_leaf(self, leaf_hash):
        """Adds a leaf to the RFC 6962 tree, records the new root and returns the hashes tree_hashes stores for it."""
        out, h, level = [leaf_hash], leaf_hash, 0
        while self.n >> level & 1:
            h = sha256(b"\x01", self.nodes[level], h)
            out.append(h)
            level += 1
        self.nodes[level], self.n = h, self.n + 1
        root = None
        for level in range(self.n.bit_length()):
            if self.n >> level & 1:
                root = self.nodes[level] if root is None else sha256(b"\x01", self.nodes[level], root)
        self.roots += root
        return out

    def run(self):
        cur = self.con.cursor()
        want = sqlite3.connect(":memory:")
        for ddl in SCHEMA:
            want.execute(ddl)
        got, exp = set(cur.execute(SCHEMA_QUERY)), set(want.execute(SCHEMA_QUERY))
        if got != exp:
            self.find(None, "schema", f"tables, indexes or triggers differ: {sorted(got ^ exp)}")
        self.ckpts = [(i, s, n, t, open_note(n, self.key)) for i, s, n, t in self.con.execute(
            "SELECT id, size, note, typeof(size) || typeof(note) FROM checkpoints ORDER BY id")]
        if self.ckpts and all(c[4][0] == "unknown_key" for c in self.ckpts):
            raise KeyMismatch(f"no checkpoint in the database is signed by this key ({self.key.name}): "
                           "it is another log's key, or every checkpoint was replaced")
        self.note_sums = {sha256(n if isinstance(n, bytes) else str(n).encode()) for _, _, n, _, _ in self.ckpts}
        self.tree = self.con.execute("SELECT idx, hash FROM tree_hashes ORDER BY idx")
        self.tree_next, prev, s = 0, bytes(32), 0
        self.checkpoints_at(0)
        for row in cur.execute("SELECT seq, time_ns, kind, action_id, run_id, leaf, leaf_hash, chain FROM entries ORDER BY seq"):
            prev = self.entry(s, row, prev)
            if self.stopped:
                break
            s += 1
            self.checkpoints_at(s)
        if not self.stopped:
            self.finish(s)

    def entry(self, s, row, prev):
        seq, time_ns, kind, action, run, leaf, leaf_hash, chain = row
        bad = lambda kind, why, at=s: self.find(at, kind, why, stop=True)
        if not isinstance(seq, int) or not isinstance(time_ns, int):
            return bad("malformed", f"the row after entry {s - 1} has a NULL or non-integer seq or time")
        if seq != s:
            return bad("deleted", f"entry {s} is missing (the next row is seq {seq})")
        # Compared as bytes: a TEXT column's bytes, or None (NULL), which matches nothing.
        kind, action, run, leaf, leaf_hash, chain = (v.encode() if isinstance(v, str) else v
                                                     for v in (kind, action, run, leaf, leaf_hash, chain))
        if not isinstance(leaf, bytes):
            return bad("malformed", "the leaf is NULL or not a blob")
        try:
            lseq, ltime, lkind, laction, lrun, fields = decode_leaf(leaf)
        except (ValueError, UnicodeDecodeError) as e:
            return bad("modified", f"the leaf does not decode: {e}")
        if lseq != s:
            return bad("misplaced", f"the row at {s} holds the leaf of entry {lseq}")
        if (ltime, lkind.encode(), laction, lrun) != (time_ns, kind, action, run):
            return bad("modified", "the columns differ from the leaf")
        lh = sha256(b"\x00", leaf)
        if lh != leaf_hash:
            return bad("modified", "the stored leaf hash differs from the leaf")
        if sha256(b"airlock/chain/v1", prev, leaf) != chain:
            return bad("modified", "the chain hash does not follow from the previous entry")
        for h in self.add_leaf(lh):
            stored = self.tree.fetchone()
            if stored != (self.tree_next, h):
                return bad("modified", f"stored tree hash {self.tree_next} is missing or differs")
            self.tree_next += 1
        if lkind == "checkpoint":
            self.checkpoint_entry(s, fields)
        return chain

    def checkpoint_entry(self, s, fields):
        def field(name, tag, default):
            t, v = fields.get(name, (tag, default))
            if t != tag or (tag == 4 and len(v) != 32):
                raise ValueError(name)
            return v
        try:
            size, root, note_sum = field("size", 2, 0), field("root", 4, bytes(32)), field("note_sha256", 4, bytes(32))
        except ValueError:
            size = None
        if size is not None and size > s:
            self.find(self.last_good, "deleted", f"the checkpoint entry at {s} records size {size}: entries "
                      f"after {self.last_good} were removed and the rest renumbered", stop=True)
        elif size is None or size <= 0:
            self.find(s, "modified", f"checkpoint entry {s} has malformed fields", stop=True)
        elif self.root(size) != root:
            self.find(self.last_good, "modified", f"checkpoint entry {s} records a root the entries do not "
                      f"give at size {size}: entries after {self.last_good} were changed", stop=True)
        elif note_sum not in self.note_sums:
            self.find(None, "checkpoint_deleted", f"the checkpoint of size {size} recorded by entry {s} is gone")

    def next_checkpoint(self):
        while self.ckpts and self.ckpts[0][3] != "integerblob":
            self.find(None, "malformed", f"checkpoint row {self.ckpts.pop(0)[0]} has wrong column types")
        return self.ckpts[0] if self.ckpts else None

    def checkpoints_at(self, size):
        while (c := self.next_checkpoint()) and c[1] <= size:
            self.db_checkpoint(self.ckpts.pop(0), size)
        while self.trusted and self.trusted[0][1][1] <= size:
            label, (_, tsize, troot) = self.trusted.pop(0)
            source = label.rsplit("#", 1)[0]
            if troot != self.root(size):
                self.find(self.last_trusted.get(source, 0), "fork", f"{label} signs another root at size {size}")
            else:
                self.good[1] += 1
                self.last_trusted[source], self.last_good = size, max(self.last_good, size)

    def db_checkpoint(self, c, size):
        cid, col_size, note, _, (problem, body) = c
        if problem:
            return self.find(None, problem, f"checkpoint {cid}: {problem.replace('_', ' ')}")
        if body[1] != col_size:
            return self.find(None, "malformed", f"checkpoint {cid}: size column {col_size}, note {body[1]}")
        if body[1] < self.last_db or body[1] == self.last_db > 0:
            replay = self.con.execute("SELECT count(*) FROM checkpoints WHERE note = ? AND id < ?", (note, cid)).fetchone()[0]
            return self.find(None, "replayed" if replay else "checkpoint_order", f"checkpoint {cid} goes backwards")
        if body[1] != size:
            return
        if body[2] != self.root(size):
            return self.find(self.last_good, "fork", f"checkpoint {cid} signs another root at size {size} than the entries give")
        self.last_db, self.last_good, self.good[0] = size, max(self.last_good, size), self.good[0] + 1

    def finish(self, n):
        if self.tree.fetchone():
            self.find(n, "truncated", f"the stored tree holds hashes for entries after the last one ({n - 1})")
        while c := self.next_checkpoint():
            self.ckpts.pop(0)
            if not c[4][0] and c[4][1][1] > n:
                self.find(n, "truncated", f"checkpoint {c[0]} vouches for {c[4][1][1]} entries; there are {n}")
            else:
                self.db_checkpoint(c, n)
        if self.trusted and not any(f["kind"] == "truncated" for f in self.findings):
            label, (_, tsize, _) = self.trusted[0]
            self.find(n, "rolled_back", f"{label} vouches for {tsize} entries; the database holds {n}")


def main():
    p = argparse.ArgumentParser(description="Verify an airlock audit log without airlock.")
    p.add_argument("db", help="the audit log, audit.db (a copy is best)")
    p.add_argument("--key", required=True, help="FILE holding the verifier key (checkpoint.vkey)")
    p.add_argument("--trusted-checkpoint", action="append", default=[], metavar="FILE",
                   help="signed checkpoints kept outside the database (repeatable)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    a = p.parse_args()
    try:
        with open(a.key, encoding="utf-8") as f:
            key = Key(f.read(4096))
        trusted = []
        for path in a.trusted_checkpoint:
            with open(path, "rb") as f:
                for i, note in enumerate(split_notes(f.read()), 1):
                    problem, body = open_note(note, key)
                    if problem:
                        raise CannotVerify(f"{path}, note #{i}: {problem.replace('_', ' ')}; this says nothing "
                                           "about the database: fix the file, or leave it out")
                    trusted.append((f"{path}#{i}", body))
        trusted.sort(key=lambda t: t[1][1])
        if not os.path.isfile(a.db):
            raise CannotVerify(f"{a.db}: no such file")
        wal = any(os.path.exists(a.db + x) for x in ("-wal", "-shm"))
        uri = "file:" + urllib.parse.quote(os.path.abspath(a.db)) + "?mode=ro" + ("" if wal else "&immutable=1")
        con = sqlite3.connect(uri, uri=True, isolation_level=None)
        con.execute("BEGIN")
        try:
            meta = dict(con.execute("SELECT name, value FROM meta"))
            entries = con.execute("SELECT count(*) FROM entries").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise CannotVerify(f"{a.db} is not an airlock audit log: {e}")
        if meta.get("format") != "1":
            raise CannotVerify(f"{a.db}: audit log format {meta.get('format')!r}, this verifier reads format 1")
        if meta.get("origin") != key.name:
            raise KeyMismatch(f"this key (origin {key.name}) did not sign this log (origin {meta.get('origin')})")
        v = Verifier(con, key, trusted)
        v.run()
    except (CannotVerify, OSError, sqlite3.Error) as e:
        print(f"airlock-verify: could not verify: {e}", file=sys.stderr)
        return 2
    except KeyMismatch as e:
        verdict = {"verdict": "key_mismatch", "first": None, "detail": e.args[0]}
        print(json.dumps(verdict) if a.json else f"KEY MISMATCH: {e.args[0]}")
        return 3
    fs = v.findings
    first = min((f for f in fs if f["seq"] is not None), key=lambda f: f["seq"], default=fs[0] if fs else None)
    if a.json:
        print(json.dumps({"verdict": "damaged" if fs else "intact", "first": first and first["seq"],
                          "entries": entries, "findings": fs}))
    elif not fs:
        print(f"intact: {entries} entries; {v.good[0]} checkpoints in the database and {v.good[1]} kept "
              f"outside verified; {entries - v.last_good} entries not yet covered by a checkpoint")
    else:
        where = "the log as a whole" if first["seq"] is None else f"first damaged entry {first['seq']}"
        print(f"DAMAGED: {where}: {first['kind']}: {first['detail']}")
        for f in fs:
            if f is not first:
                print(f"also: {'-' if f['seq'] is None else f['seq']}: {f['kind']}: {f['detail']}")
    return 1 if fs else 0


if __name__ == "__main__":
    sys.exit(main())
