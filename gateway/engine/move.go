package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockgw/airlock/approvals"
	"github.com/airlockgw/airlock/auditchain"
	"github.com/airlockgw/airlock/deploy/sqldb"
)

// MoveStep is a step of MoveStateDir that finished.
type MoveStep uint8

// The steps, in order.
const (
	// MoveVerified: the SQLite audit log verified (Entries, Checkpoints).
	MoveVerified MoveStep = iota + 1
	// MoveLog: the log copied and verified again from the database
	// (Entries).
	MoveLog
	// MoveState: runs, approval requests, reviewers and agent tokens
	// copied (State, by table); skipped without a state.db.
	MoveState
	// MoveOutputs: the output store copied (Blobs); skipped without an
	// outputs.db.
	MoveOutputs
)

// MoveProgress reports one finished step of MoveStateDir.
type MoveProgress struct {
	Step        MoveStep
	Entries     int64
	Checkpoints int
	State       map[string]int64
	Blobs       int64
}

// MoveStateDir copies a stopped SQLite gateway's state directory into db:
// the audit log verified, copied entry for entry and verified again from
// the database (the same entry and checkpoint counts, or nothing is
// trusted), then the state and the outputs. A gateway still running on
// dir (it holds the log's lock) is refused: a log being written is never
// copied. progress is called after each step.
func MoveStateDir(ctx context.Context, dir string, db *sqldb.DB, progress func(MoveProgress)) error {
	auditDB := filepath.Join(dir, "audit.db")
	if _, err := os.Stat(auditDB); err != nil {
		return fmt.Errorf("--from %s: no audit log there (%v)", dir, err)
	}
	lock, err := os.OpenFile(auditDB+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("a gateway runs on %s: stop it first", dir)
	}
	if err := moveLog(ctx, dir, db, progress); err != nil {
		return err
	}
	if stateDB := filepath.Join(dir, "state.db"); exists(stateDB) {
		counts, err := approvals.ImportSQLite(ctx, stateDB, db)
		if err != nil {
			return err
		}
		progress(MoveProgress{Step: MoveState, State: counts})
	}
	if outDB := filepath.Join(dir, "outputs.db"); exists(outDB) {
		n, err := auditchain.ImportOutputs(ctx, outDB, db)
		if err != nil {
			return err
		}
		progress(MoveProgress{Step: MoveOutputs, Blobs: n})
	}
	return nil
}

// moveLog verifies dir's audit log against its checkpoints.log, copies it
// into db and verifies the copy.
func moveLog(ctx context.Context, dir string, db *sqldb.DB, progress func(MoveProgress)) error {
	auditDB := filepath.Join(dir, "audit.db")
	vkeyFile := filepath.Join(dir, "keys", "checkpoint.vkey")
	vkey, err := os.ReadFile(vkeyFile)
	if err != nil {
		return fmt.Errorf("the verifier key: %w", err)
	}
	key, err := auditchain.ParseVerifierKey(strings.TrimSpace(string(vkey)))
	if err != nil {
		return fmt.Errorf("%s: %w", vkeyFile, err)
	}
	var trusted []auditchain.TrustedNote
	if notes, err := auditchain.ReadTrustedNotes(filepath.Join(dir, "checkpoints.log")); err == nil {
		trusted = notes
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	before, err := auditchain.Verify(ctx, auditchain.VerifyOptions{Path: auditDB, Key: key, Trusted: trusted})
	if err != nil {
		return fmt.Errorf("verify %s: %w", auditDB, err)
	}
	if !before.Intact() {
		d := before.First()
		return fmt.Errorf("%s is damaged (%s at seq %d: %s): nothing was copied; run airlock audit verify", auditDB, d.Kind, d.Seq, d.Detail)
	}
	progress(MoveProgress{Step: MoveVerified, Entries: int64(before.Entries), Checkpoints: before.Checkpoints})
	n, err := auditchain.ImportSQLite(ctx, auditDB, db, strings.TrimSpace(string(vkey)))
	if err != nil {
		return err
	}
	after, err := auditchain.Verify(ctx, auditchain.VerifyOptions{DB: db, Key: key, Trusted: trusted})
	if err != nil {
		return fmt.Errorf("verify the copy: %w", err)
	}
	if !after.Intact() || after.Entries != before.Entries || after.Checkpoints != before.Checkpoints {
		return fmt.Errorf("the copy does not verify as the original did (%d entries, %d checkpoints, damage %+v): leave the storage block out and keep using %s", after.Entries, after.Checkpoints, after.First(), dir)
	}
	progress(MoveProgress{Step: MoveLog, Entries: n})
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
