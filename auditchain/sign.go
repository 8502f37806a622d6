package auditchain

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Signing checkpoints: every N entries, every T, and at Close; each
// appended to checkpoints.log and offered to the witness.

// checkpointRecord is a checkpoint entry's fields: the signed note's
// digest and the tree it signs. Its fields are in name order, as the
// writer stores them.
type checkpointRecord struct {
	NoteSHA256 [sha256.Size]byte   `audit:"note_sha256"`
	Root       [tlog.HashSize]byte `audit:"root"`
	Size       int64               `audit:"size"`
}

// maybeCheckpoint signs a checkpoint when one is due (or, when final,
// whenever entries are uncovered). It runs on the writer goroutine, so no
// entry is appended while it works.
func (l *Log) maybeCheckpoint(ctx context.Context, final bool) error {
	if p := l.failed.Load(); p != nil {
		if final {
			return *p // Close reports that the log had failed
		}
		return nil
	}
	now := time.Now()
	if l.shared() && !final {
		// Other replicas append too: this replica's size may be behind,
		// so only the interval (or its own appends) can say a checkpoint
		// may be due; checkpoint re-reads the head and decides. Only the
		// holder of the signer lease signs.
		if !l.due(now) || !l.signerLease(ctx) {
			return nil
		}
	} else {
		if l.size == l.ckpt.Size || !final && l.idle() {
			return nil
		}
		if !final && !l.due(now) {
			return nil
		}
	}
	err := l.checkpoint(ctx, !final)
	if err != nil {
		l.retryAt = now.Add(time.Second)
		l.log.Error("checkpoint failed", "size", l.size, "error", err)
	}
	return err
}

// idle reports whether nothing but the last checkpoint's own entry came
// after it: that entry alone does not call for another checkpoint, or an
// idle log would sign forever.
func (l *Log) idle() bool {
	return l.size == l.ckpt.Size || l.ckptEntry && l.size == l.ckpt.Size+1
}

// due reports whether a periodic checkpoint is due at now, by count or by
// time, and not held off after a failure.
func (l *Log) due(now time.Time) bool {
	byCount := l.opts.CheckpointEvery > 0 && l.size-l.ckpt.Size >= int64(l.opts.CheckpointEvery)
	byTime := l.opts.CheckpointInterval > 0 && now.Sub(l.ckptAt) >= l.opts.CheckpointInterval
	return (byCount || byTime) && !now.Before(l.retryAt)
}

// checkpoint signs the current tree. With entry, it also appends a
// checkpoint entry recording it (in the same transaction as the stored
// note); the final checkpoint at Close has no entry, so that it covers
// everything.
func (l *Log) checkpoint(ctx context.Context, entry bool) error {
	if !l.shared() {
		// Move every committed frame into the main database file and sync
		// it: losing the WAL after a crash must not lose an entry a signed
		// checkpoint vouches for. PASSIVE never waits for readers; when a
		// reader holds frames back, signing waits for a later attempt.
		var busy, walFrames, moved int
		if err := l.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walFrames, &moved); err != nil {
			return fmt.Errorf("audit log: wal checkpoint: %w", err)
		}
		if busy != 0 || walFrames != moved {
			return fmt.Errorf("audit log: wal checkpoint moved %d of %d frames; readers hold the rest", moved, walFrames)
		}
	}
	// On PostgreSQL the transaction holds the chain lock from here to the
	// commit: the tree signed is the whole log, and no replica appends
	// until the checkpoint is stored.
	ctx, cancel := l.writeCtx(ctx)
	defer cancel()
	tx, err := l.begin(ctx)
	if err != nil {
		return l.recover(ctx, fmt.Errorf("audit log: begin: %w", err))
	}
	defer tx.Rollback()
	if l.shared() {
		if err := l.refreshCheckpoint(ctx, tx); err != nil {
			return err
		}
	}
	if l.shared() && l.idle() {
		// Nothing new (another replica signed, or nothing was appended).
		l.ckptAt = time.Now()
		return nil
	}
	size := l.size
	root, err := tlog.TreeHash(size, dbHashReader{ctx, tx})
	if err != nil {
		return fmt.Errorf("audit log: tree hash: %w", err)
	}
	if root != l.front.root() {
		return l.fail(fmt.Errorf("audit log: stored tree hashes disagree with the appended entries: %w", ErrInconsistent))
	}
	if l.ckpt.Size > 0 {
		p, err := tlog.ProveTree(size, l.ckpt.Size, dbHashReader{ctx, tx})
		if err == nil {
			err = tlog.CheckTree(p, size, root, l.ckpt.Size, l.ckpt.Root)
		}
		if err != nil {
			return l.fail(fmt.Errorf("audit log: new tree is not consistent with checkpoint %d: %w: %w", l.ckpt.Size, err, ErrInconsistent))
		}
	}
	c := Checkpoint{Origin: l.opts.Origin, Size: size, Root: root}
	msg, err := note.Sign(&note.Note{Text: c.Text()}, l.key.signer)
	if err != nil {
		return fmt.Errorf("audit log: sign checkpoint: %w", err)
	}
	if err := l.appendCheckpointFile(msg); err != nil {
		// The outside copy is evidence, not a condition for appending.
		l.log.Error("could not append checkpoint to file", "path", l.opts.CheckpointLogPath, "error", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (size, note) VALUES (?, ?)`, size, msg); err != nil {
		return l.recover(ctx, fmt.Errorf("audit log: store checkpoint: %w", err))
	}
	st := headState{size: l.size, chain: l.chain, front: l.front, ckptEntry: l.ckptEntry}
	var refs []Ref
	if entry {
		fields, err := FieldsOf(checkpointRecord{NoteSHA256: sha256.Sum256(msg), Root: [tlog.HashSize]byte(root), Size: size})
		if err != nil {
			return err
		}
		r := &appendReq{e: Entry{Kind: KindCheckpoint}, fields: fields, done: make(chan appendResult, 1)}
		r.state.Store(reqTaken)
		if refs, st, err = l.stage(ctx, tx, []*appendReq{r}); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		if err := l.commitFailed(ctx, refs, st, err); err != nil {
			return err
		}
	} else {
		l.apply(st)
	}
	if l.shared() {
		// Committed with synchronous_commit: durable, and all before it.
		l.durable = durableHead{l.size, l.chain}
	}
	l.ckpt, l.ckptAt = c, time.Now()
	l.log.Debug("signed checkpoint", "size", size, "root", root.String())
	if l.witness != nil {
		select {
		case <-l.witness: // drop a note the witness has not taken yet
		default:
		}
		l.witness <- msg
	}
	return nil
}

func (l *Log) appendCheckpointFile(msg []byte) error {
	if l.opts.CheckpointLogPath == "" {
		return nil
	}
	f, err := os.OpenFile(l.opts.CheckpointLogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(append([]byte(nil), msg...), '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
