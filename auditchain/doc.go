// Package auditchain is airlock's tamper-evident, append-only audit log.
//
// It owns the binary leaf encoding of audit entries, the hash chain over
// them, the RFC 6962 Merkle tree (built with golang.org/x/mod/sumdb/tlog),
// the signed checkpoints (C2SP tlog-checkpoint bodies signed as Ed25519
// signed notes with golang.org/x/mod/sumdb/note), the separate output store,
// and the offline verifier.
//
// A [Log] is the writer: one goroutine commits concurrent [Log.Append] calls
// in shared transactions (group commit), and an Append returns only once its
// entry is durable. [Verify] re-derives everything from the stored leaves and
// reports the first damaged sequence number and the kind of damage.
// [Reader] serves exports, per-action views and inclusion and consistency
// proofs from a database file without the signing key.
//
// The package knows nothing of SSH, HTTP, approvals or the gateway's
// configuration: the caller decides which entries to write and what their
// fields mean. Nothing outside this package reads or writes its tables.
//
// The on-disk format, what verification proves and what it cannot are
// described in docs/audit.md.
//
// References: RFC 6962 §2.1 (Merkle hash trees), C2SP tlog-checkpoint and
// signed-note (https://c2sp.org/tlog-checkpoint, https://c2sp.org/signed-note).
package auditchain
